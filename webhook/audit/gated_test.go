package audit

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

const gatedImage = "registry.example.com/shop/api:1.4.2"

// auditTime is when the test's audit runs, in whole seconds as the API server keeps timestamps.
var auditTime = time.Date(2026, 11, 28, 23, 30, 0, 0, time.UTC)

var gatedNamespace = policy.Namespace{Name: "web", Labels: map[string]string{policy.LabelEnabled: "true"}}

func gateFacts(img policy.Image) policy.Facts {
	return policy.Facts{Operation: policy.Create, Namespace: gatedNamespace, Version: "v1", Gate: true,
		Cluster: &policy.Cluster{Builds: []string{b2019, b2025}},
		Images:  map[string]policy.Image{gatedImage: img}}
}

var (
	unanswered = policy.Image{Err: "registry.example.com: no answer within 1s", Pending: true}
	answered   = policy.Image{Platforms: []policy.Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.2227"}}}
)

// gatedByWebhook is a pod as the webhook leaves it when its registry did not answer in time: gated, its
// gate recorded, created age ago.
func gatedByWebhook(t *testing.T, name string, age time.Duration) *corev1.Pod {
	t.Helper()
	p := winPod(name, gatedImage)
	p.CreationTimestamp = metav1.NewTime(auditTime.Add(-age))
	d, err := policy.Default().Decide(p, gateFacts(unanswered))
	if err != nil || !d.Gated {
		t.Fatalf("the policy did not gate %s: %v, %+v", name, err, d)
	}
	return p
}

// gatedByPolicies is a pod as the admission policies leave it while no replica answers (hybrid): gated
// and labelled, marked as theirs, nothing recorded.
func gatedByPolicies(name string, age time.Duration) *corev1.Pod {
	p := winPod(name, gatedImage)
	p.CreationTimestamp = metav1.NewTime(auditTime.Add(-age))
	p.Annotations[policy.AnnotationAdmissionPolicy] = "v1"
	p.Labels = map[string]string{policy.LabelGated: "true"}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: policy.SchedulingGate}}
	return p
}

// TestGatedPodFinding: every pod behind wincompat's gate is a gated-pod finding saying how long it has
// waited, why (the gate's entry in its record, or the admission policies), and whether past the bound,
// with what to do then; a pod held by someone else's gate alone is not. A pod of the admission policies
// that waits for the leader, or whose build the leader decided, is no admitted-without-build-decision;
// one released without a decision still is, and says so.
func TestGatedPodFinding(t *testing.T) {
	clock = func() time.Time { return auditTime }
	t.Cleanup(func() { clock = time.Now })
	waiting := gatedByWebhook(t, "waiting", 30*time.Second)
	overdue := gatedByWebhook(t, "overdue", 10*time.Minute)
	hybrid := gatedByPolicies("hybrid", time.Minute)

	others := winPod("others", gatedImage)
	others.Annotations[policy.AnnotationVersion] = "v1"
	others.Labels = map[string]string{policy.LabelGated: "true"} // a label is no gate
	others.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}

	decidedLater := gatedByPolicies("decided-later", 5*time.Minute)
	if d := policy.Default().Ungate(decidedLater, gateFacts(answered), ""); !d.Windows || d.Build == "" || policy.Gated(decidedLater) {
		t.Fatalf("the leader did not decide: %+v", d)
	}
	released := gatedByPolicies("released", 5*time.Minute)
	if len(policy.Release(released, "wincompat was uninstalled")) != 1 {
		t.Fatal("nothing released")
	}

	objs := []*corev1.Pod{waiting, overdue, hybrid, others, decidedLater, released}
	audit := func(opts Options) map[string]map[string]string {
		t.Helper()
		c := []client.Object{namespace("web", map[string]string{policy.LabelEnabled: "true"})}
		for _, p := range objs {
			c = append(c, p.DeepCopy())
		}
		got := map[string]map[string]string{}
		for _, f := range run(t, opts, c...).Findings {
			if got[f.Kind] == nil {
				got[f.Kind] = map[string]string{}
			}
			got[f.Kind][f.Object] = f.Detail
		}
		return got
	}

	got := audit(Options{})
	want := map[string][]string{
		"Pod/waiting": {"gated for 30s, within the bound (3m0s, wincompat serve's default --gate-timeout", policy.ReasonGated},
		"Pod/overdue": {"gated for 10m0s, past the bound (3m0s, wincompat serve's default --gate-timeout", policy.ReasonGated,
			"Lease wincompat.io", "`kubectl wincompat ungate -n web`"},
		"Pod/hybrid": {"gated for 1m0s, within the bound", "admitted by wincompat's admission policies while no webhook replica answered"},
	}
	if len(got[GatedPod]) != len(want) {
		t.Errorf("gated-pod findings %q, want for %d pods", got[GatedPod], len(want))
	}
	for obj, parts := range want {
		for _, part := range parts {
			if !strings.Contains(got[GatedPod][obj], part) {
				t.Errorf("%s: %q lacks %q", obj, got[GatedPod][obj], part)
			}
		}
	}
	if d := got[GatedPod]["Pod/waiting"]; strings.Contains(d, "ungate") {
		t.Errorf("a pod within the bound is told to be released: %q", d)
	}
	if _, ok := got[WithoutBuildDecision]["Pod/released"]; !ok || len(got[WithoutBuildDecision]) != 1 {
		t.Errorf("admitted-without-build-decision %q, want only Pod/released", got[WithoutBuildDecision])
	}
	if d := got[WithoutBuildDecision]["Pod/released"]; !strings.Contains(d, "released without a build decision (wincompat was uninstalled)") {
		t.Errorf("released pod: %q", d)
	}
	if len(got[NotCovered]) != 0 {
		t.Errorf("not-covered %q, want none", got[NotCovered])
	}

	// The cluster's own bound, when the caller knows it.
	got = audit(Options{GateTimeout: 15 * time.Minute})
	if d := got[GatedPod]["Pod/overdue"]; !strings.Contains(d, "gated for 10m0s, within the bound (15m0s, the --gate-timeout given)") {
		t.Errorf("with GateTimeout 15m: %q", d)
	}
}
