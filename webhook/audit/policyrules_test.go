package audit

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// The audit explains with the policy's own rules (policy/placement_scope.go): which objects wincompat decides
// on, which are Windows, and what a Windows node's taint means.

func loadPolicy(t *testing.T, yaml string) *policy.Policy {
	t.Helper()
	p, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\n" + yaml))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// TestNotCoveredInExcludedNamespace: a pod in a namespace of the policy's excludedNamespaces was never
// going to be changed; the audit says so instead of blaming wincompat's downtime, and does not ask for
// the namespace to be labelled.
func TestNotCoveredInExcludedNamespace(t *testing.T) {
	pol := loadPolicy(t, "excludedNamespaces: [kube-system, legacy-win]\n")
	inNamespace := func(p *corev1.Pod, ns string) *corev1.Pod { p.Namespace = ns; return p }
	objs := []client.Object{
		namespace("legacy-win", map[string]string{policy.LabelEnabled: "true"}),
		namespace("old-win", nil),
		namespace("web", map[string]string{policy.LabelEnabled: "true"}),
		inNamespace(winPod("excluded", img2022), "legacy-win"),
		inNamespace(winPod("unlabelled", img2022), "old-win"),
		inNamespace(winPod("unseen", img2022), "web"),
	}
	sameFindings(t, "not-covered", findings(run(t, Options{Policy: pol}, objs...), NotCovered, NamespaceUnlabeled), []string{
		"not-covered Pod/excluded: namespace legacy-win is in the policy's excludedNamespaces: wincompat never changes its objects",
		"not-covered Pod/unlabelled: its namespace is not labelled " + policy.LabelEnabled + "=true",
		"not-covered Pod/unseen: created while wincompat was not running, or before the namespace was labelled",
		"namespace-not-labelled : 1 Windows pods, but the namespace is not labelled " + policy.LabelEnabled + "=true",
	})

	// Unlabelled too: labelling it would change nothing.
	objs[0] = namespace("legacy-win", nil)
	sameFindings(t, "excluded and unlabelled", findings(run(t, Options{Policy: pol}, objs...), NotCovered, NamespaceUnlabeled), []string{
		"not-covered Pod/excluded: namespace legacy-win is in the policy's excludedNamespaces: wincompat never changes its objects",
		"not-covered Pod/unlabelled: its namespace is not labelled " + policy.LabelEnabled + "=true",
		"not-covered Pod/unseen: created while wincompat was not running, or before the namespace was labelled",
		"namespace-not-labelled : 1 Windows pods, but the namespace is not labelled " + policy.LabelEnabled + "=true",
	})
}

// TestWindowsAsThePolicyJudges: a template pinned to Windows by required node affinity, and a pod that
// is Windows by its namespace's default-os label, are Windows to the audit as to the webhook.
func TestWindowsAsThePolicyJudges(t *testing.T) {
	windowsAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"windows"}}}}}}}}
	spec := corev1.PodSpec{Affinity: windowsAffinity, Containers: []corev1.Container{{Name: "app", Image: img2019}}}
	byDefault := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "by-default", Namespace: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: img2019}}}}
	objs := []client.Object{
		namespace("apps", map[string]string{policy.LabelEnabled: "true"}),
		namespace("web", map[string]string{policy.LabelEnabled: "true", policy.LabelDefaultOS: "windows"}),
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "apps"}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: spec}}},
		byDefault,
	}
	rep := run(t, Options{Builds: []string{b2022}}, objs...)
	want := []NamespaceRow{{Namespace: "apps", OptedIn: true, Workloads: 1}, {Namespace: "web", OptedIn: true, WindowsPods: 1}}
	if !slices.Equal(rep.Namespaces, want) {
		t.Errorf("namespace rows:\n got %+v\nwant %+v", rep.Namespaces, want)
	}
	reason := "containers[app]: image " + img2019 + " (tag: Windows build " + b2019 + ") cannot run on " + b2022
	sameFindings(t, "judged as Windows", findings(rep, CannotRunOnBuilds, NotCovered), []string{
		"cannot-run-on-builds Deployment/pinned: " + reason,
		"cannot-run-on-builds Pod/by-default: " + reason,
		"not-covered Pod/by-default: created while wincompat was not running, or before the namespace was labelled",
	})
}

// TestNodeStateTaintNotReported: Kubernetes' own node-state taints on a ready Windows node (not-ready
// lingering after the node turned ready, a cordon) are not the operating system's, so the audit never
// advises tolerating them; a taint nobody tolerates that could mark the OS still is reported.
func TestNodeStateTaintNotReported(t *testing.T) {
	n := node("win-0", b2022, true)
	n.Spec.Taints = []corev1.Taint{
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
		{Key: "sku", Value: "windows", Effect: corev1.TaintEffectNoSchedule},
	}
	objs := []client.Object{namespace("web", map[string]string{policy.LabelEnabled: "true"}), n, winPod("app", img2022)}
	sameFindings(t, "windows-taint-untolerated", findings(run(t, Options{}, objs...), WindowsTaintUntolerated), []string{
		"windows-taint-untolerated Node/win-0: taint sku=windows:NoSchedule is tolerated by no Windows pod: none can be scheduled there; if it marks the operating system, add it to the policy's windowsNodeTaints",
	})
}
