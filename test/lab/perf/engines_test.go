package perf

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
)

// TestCheckStoredChartPod: the check that proves an engine did the rewrite must refuse a pod stored
// without any one part of it, and accept one with all of them.
func TestCheckStoredChartPod(t *testing.T) {
	rewritten := func() *corev1.Pod {
		pod, err := TypedPod(ChartPod(2, "ns", true))
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
		pod.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "windows"}
		pod.Spec.Tolerations = []corev1.Toleration{{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule}}
		return pod
	}
	if err := CheckStoredChartPod(rewritten()); err != nil {
		t.Fatalf("a rewritten pod: %v", err)
	}
	for name, spoil := range map[string]func(*corev1.Pod){
		"no nodeSelector":            func(p *corev1.Pod) { p.Spec.NodeSelector = nil },
		"a Linux nodeSelector":       func(p *corev1.Pod) { p.Spec.NodeSelector[corev1.LabelOSStable] = "linux" },
		"no toleration":              func(p *corev1.Pod) { p.Spec.Tolerations = nil },
		"a toleration for NoExecute": func(p *corev1.Pod) { p.Spec.Tolerations[0].Effect = corev1.TaintEffectNoExecute },
		"runAsUser kept":             func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsUser = ptr.To[int64](1001) },
		"fsGroup kept":               func(p *corev1.Pod) { p.Spec.SecurityContext.FSGroup = ptr.To[int64](1001) },
		"seccompProfile kept": func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		},
	} {
		pod := rewritten()
		spoil(pod)
		if err := CheckStoredChartPod(pod); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestFloorEngineStoresWhatWincompatStores: the floor engine (floor.yaml) is only a floor if it does
// this pod's whole rewrite. Through a real API server, the chart pod the engines create comes out of
// it exactly as out of wincompat's admission policies and as the Go decision (the webhook's) leaves it,
// created as is: spec, labels and annotations, but for wincompat's own annotations (the change record,
// the markers, the build decision) and the webhook's build pin (spec.affinity), which needs a registry
// or the cluster and which the admission policies do not make either.
func TestFloorEngineStoresWhatWincompatStores(t *testing.T) {
	cfg, _ := controlplane.Start(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "perf"
	labels := map[string]string{policy.LabelEnabled: "true"}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"default", "web"} {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	chart, err := TypedPod(ChartPod(2, ns, true))
	if err != nil {
		t.Fatal(err)
	}
	store := func(pod *corev1.Pod) *corev1.Pod {
		t.Helper()
		got, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	rejected := func(s ProbeState) bool { return s.Rejected }

	floor, err := NewFloorSwitch(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if err := floor.Apply(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := WaitForProbeState(ctx, cs, chart, "applying the floor", func(s ProbeState) bool { return s.Placed && s.Named && !s.Policies && !s.Webhook }); err != nil {
		t.Fatal(err)
	}
	byFloor := store(chart)
	if err := CheckStoredChartPod(byFloor); err != nil {
		t.Error(err)
	}
	if err := floor.Apply(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := WaitForProbeState(ctx, cs, chart, "applying nothing", rejected); err != nil {
		t.Fatal(err)
	}

	// The Go decision, as `wincompat serve` makes it, applied before the API server sees the pod: what
	// the engine none creates.
	decided := chart.DeepCopy()
	d, err := policy.Default().Decide(decided, policy.Facts{Operation: policy.Create, Namespace: policy.Namespace{Name: ns, Labels: labels}, Version: "test"})
	if err != nil || !d.Windows || len(d.Changes) == 0 {
		t.Fatalf("the Go decision: %+v, %v", d, err)
	}
	byDecision := store(decided)
	byDecision.Spec.Affinity = nil
	// Created as is, the decided pod holds its toleration before the ones the API server's
	// DefaultTolerationSeconds adds; the webhook and the admission policies, which run after that
	// plugin, append it after them.
	own := decided.Spec.Tolerations
	defaults := slices.DeleteFunc(slices.Clone(byDecision.Spec.Tolerations), func(t corev1.Toleration) bool {
		return slices.ContainsFunc(own, func(o corev1.Toleration) bool { return o.MatchToleration(&t) })
	})
	byDecision.Spec.Tolerations = append(defaults, own...)

	policies, err := NewAdmissionPolicySwitch(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if err := policies.Apply(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := WaitForProbeState(ctx, cs, chart, "applying wincompat's admission policies", func(s ProbeState) bool { return s.Policies && !s.Webhook }); err != nil {
		t.Fatal(err)
	}
	byPolicies := store(chart)

	floorSide := comparablePod(byFloor)
	for name, other := range map[string]*corev1.Pod{"wincompat's admission policies": byPolicies, "the Go decision": byDecision} {
		if diff := cmp.Diff(comparablePod(other), floorSide); diff != "" {
			t.Errorf("the floor stores another pod than %s (-%s +floor):\n%s", name, name, diff)
		}
	}
	// What the comparison leaves out must be wincompat's alone: the floor writes none of it.
	for k := range byFloor.Annotations {
		if strings.HasPrefix(k, wincompatAnnotations) {
			t.Errorf("the floor wrote %s", k)
		}
	}
	if byFloor.Spec.Affinity != nil {
		t.Errorf("the floor wrote spec.affinity %v", byFloor.Spec.Affinity)
	}
}

// wincompatAnnotations prefixes the annotations wincompat writes of its own: the change record, the
// markers of each engine, the build decision.
const wincompatAnnotations = "wincompat.io/"

// comparablePod is p without what differs between any two creations (name, uid, times, managed
// fields, the random name of the service account token's volume) and without wincompat's own
// annotations.
func comparablePod(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.ObjectMeta = metav1.ObjectMeta{Namespace: p.Namespace, Labels: maps.Clone(p.Labels), Annotations: maps.Clone(p.Annotations), OwnerReferences: p.OwnerReferences}
	maps.DeleteFunc(p.Annotations, func(k, _ string) bool { return strings.HasPrefix(k, wincompatAnnotations) })
	// wincompat's own label, which says who admitted the pod: the floor does the rewrite, not the record.
	delete(p.Labels, policy.LabelOS)
	const token = "kube-api-access-"
	for i := range p.Spec.Volumes {
		if strings.HasPrefix(p.Spec.Volumes[i].Name, token) {
			p.Spec.Volumes[i].Name = token
		}
	}
	for i := range p.Spec.Containers {
		for j := range p.Spec.Containers[i].VolumeMounts {
			if m := &p.Spec.Containers[i].VolumeMounts[j]; strings.HasPrefix(m.Name, token) {
				m.Name = token
			}
		}
	}
	return p
}
