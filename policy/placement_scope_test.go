package policy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const policyHeader = "apiVersion: wincompat.io/v1alpha1\nkind: Policy\n"

// TestScope: the policy's own excludedNamespaces decide, not a fixed kube-system, and Decide skips
// exactly the objects Scope puts out of scope, for the same reason.
func TestScope(t *testing.T) {
	pol, err := Load([]byte(policyHeader + "excludedNamespaces: [legacy-win]\n"))
	if err != nil {
		t.Fatal(err)
	}
	enabled := map[string]string{LabelEnabled: "true"}
	skip := map[string]string{LabelSkip: "true"}
	for name, tc := range map[string]struct {
		ns       Namespace
		labels   map[string]string
		want     OutOfScope
		wantSkip string
	}{
		"labelled namespace":            {Namespace{Name: "web", Labels: enabled}, nil, InScope, ""},
		"excluded by the policy":        {Namespace{Name: "legacy-win", Labels: enabled}, nil, ExcludedNamespace, "namespace legacy-win is excluded by policy"},
		"kube-system when not excluded": {Namespace{Name: "kube-system", Labels: enabled}, nil, InScope, ""},
		"unlabelled namespace":          {Namespace{Name: "web"}, nil, NamespaceNotEnabled, "namespace is not labelled " + LabelEnabled + "=true"},
		"skip label":                    {Namespace{Name: "web", Labels: enabled}, skip, SkipLabelled, "object is labelled " + LabelSkip + "=true"},
		"excluded comes first":          {Namespace{Name: "legacy-win"}, skip, ExcludedNamespace, "namespace legacy-win is excluded by policy"},
		"unlabelled before skip":        {Namespace{Name: "web"}, skip, NamespaceNotEnabled, "namespace is not labelled " + LabelEnabled + "=true"},
	} {
		if got := pol.Scope(tc.labels, tc.ns); got != tc.want {
			t.Errorf("%s: Scope = %d, want %d", name, got, tc.want)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: tc.labels}, Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}}}
		d, err := pol.Decide(pod, Facts{Operation: Create, Namespace: tc.ns, Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if d.Skipped != tc.wantSkip || d.Windows != (tc.want == InScope) {
			t.Errorf("%s: Decide skipped %q (Windows %t), want %q", name, d.Skipped, d.Windows, tc.wantSkip)
		}
	}
	if got := Default().Scope(nil, Namespace{Name: "kube-system", Labels: enabled}); got != ExcludedNamespace {
		t.Errorf("the default policy: kube-system is %d, want excluded", got)
	}
}

// TestIsWindows: every signal the webhook's trigger reads, and it agrees with Decide on each.
func TestIsWindows(t *testing.T) {
	affinity := func(key string, op corev1.NodeSelectorOperator, values ...string) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}}}}}
	}
	plain := Namespace{Name: "web", Labels: map[string]string{LabelEnabled: "true"}}
	windowsByDefault := Namespace{Name: "web", Labels: map[string]string{LabelEnabled: "true", LabelDefaultOS: "windows"}}
	noInference, err := Load([]byte(policyHeader + "inferOSFromNodeSelector: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		pol  *Policy
		spec corev1.PodSpec
		ns   Namespace
		want bool
	}{
		"spec.os windows":             {Default(), corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}}, plain, true},
		"spec.os linux wins":          {Default(), corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Linux}}, windowsByDefault, false},
		"stable nodeSelector":         {Default(), corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelOSStable: "windows"}}, plain, true},
		"beta nodeSelector":           {Default(), corev1.PodSpec{NodeSelector: map[string]string{"beta.kubernetes.io/os": "windows"}}, plain, true},
		"required affinity":           {Default(), corev1.PodSpec{Affinity: affinity(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "windows")}, plain, true},
		"affinity NotIn linux":        {Default(), corev1.PodSpec{Affinity: affinity(corev1.LabelOSStable, corev1.NodeSelectorOpNotIn, "linux")}, plain, true},
		"no signal":                   {Default(), corev1.PodSpec{}, plain, false},
		"namespace default-os":        {Default(), corev1.PodSpec{}, windowsByDefault, true},
		"default-os, pinned to Linux": {Default(), corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelOSStable: "linux"}}, windowsByDefault, false},
		"no inference from selectors": {noInference, corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelOSStable: "windows"}}, plain, false},
	} {
		if got := tc.pol.IsWindows(&tc.spec, tc.ns); got != tc.want {
			t.Errorf("%s: IsWindows = %t, want %t", name, got, tc.want)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: *tc.spec.DeepCopy()}
		d, err := tc.pol.Decide(pod, Facts{Operation: Create, Namespace: tc.ns, Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if d.Windows != tc.want {
			t.Errorf("%s: Decide took it for Windows %t (%s), IsWindows %t", name, d.Windows, d.Skipped, tc.want)
		}
	}
}

// TestWindowsNodeTaint: Kubernetes' own node-state taints are never the operating system's, whatever
// their effect; a taint the policy names is tolerated whatever its key.
func TestWindowsNodeTaint(t *testing.T) {
	pol, err := Load([]byte(policyHeader + "windowsNodeTaints:\n  - {key: sku, value: windows, effect: NoSchedule}\n  - {key: node.kubernetes.io/unreachable, value: \"\", effect: NoSchedule}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		taint corev1.Taint
		want  TaintMeaning
	}{
		{corev1.Taint{Key: "node.kubernetes.io/os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}, TaintToleratedByWindowsPods},
		{corev1.Taint{Key: "os", Value: "Windows", Effect: corev1.TaintEffectNoExecute}, TaintToleratedByWindowsPods},
		{corev1.Taint{Key: "sku", Value: "windows", Effect: corev1.TaintEffectNoSchedule}, TaintToleratedByWindowsPods},
		{corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}, TaintToleratedByWindowsPods},
		{corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}, TaintNodeState},
		{corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}, TaintNodeState},
		{corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, TaintNodeState},
		{corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}, TaintNodeState},
		{corev1.Taint{Key: "team", Value: "payments", Effect: corev1.TaintEffectNoSchedule}, TaintUnknown},
		{corev1.Taint{Key: "os", Value: "linux", Effect: corev1.TaintEffectNoSchedule}, TaintUnknown},
	} {
		if got := pol.WindowsNodeTaint(tc.taint); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.taint.ToString(), got, tc.want)
		}
	}
}
