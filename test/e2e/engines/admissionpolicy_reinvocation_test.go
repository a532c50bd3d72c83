package engines

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/fixtures"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestAdmissionPolicyRunsOncePerPod: issue 29. The API server reinvokes a MutatingAdmissionPolicy of
// reinvocationPolicy IfNeeded after its own change (policy/admissionpolicy/README.md, "Reinvocation"),
// and the pods policies' changes matchCondition turns that second pass away before it evaluates
// anything. Counted by the API server itself (apiserver_mutating_admission_policy_check_total, one per
// mutation evaluated):
//   - with changes, one evaluation per Windows pod;
//   - with a webhook after the policy that puts runAsUser back, two, and the pod is admitted without it:
//     the policy still runs again when there is something to do;
//   - the same policy without changes, two per pod: what the matchCondition saves.
func TestAdmissionPolicyRunsOncePerPod(t *testing.T) {
	ctx := context.Background()
	cfg, c := controlplane.Start(t)
	e2eutil.RequireAdmissionPolicies(t, cfg)
	rendered := admissionpolicy.Render(policy.Default(), admissionpolicy.Options{Version: "e2e-once"})
	e2eutil.InstallAdmissionPolicies(ctx, t, c, rendered)
	var pods *admissionregistrationv1.MutatingAdmissionPolicy
	for i := range rendered.Policies {
		if rendered.Policies[i].Name == "wincompat-pods" {
			pods = &rendered.Policies[i]
		}
	}
	const ns, nsReadded = "map-once", "map-once-readded"
	e2eutil.SetUpNamespace(ctx, t, c, ns, map[string]string{policy.LabelEnabled: "true"}, nil)
	e2eutil.SetUpNamespace(ctx, t, c, nsReadded, map[string]string{policy.LabelEnabled: "true"}, nil)
	e2eutil.WaitForAdmissionPolicy(t, c, ns)
	// Only wincompat-pods: the namespaces enforce no Pod Security and set no default-os.
	evaluations := func() int {
		n, err := fixtures.AdmissionPolicyEvaluations(ctx, cfg, func(p string) bool { return p == "wincompat-pods" })
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	createPods := func(ns, prefix string, n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			pod := e2eutil.WindowsPod(ns, fmt.Sprintf("%s-%d", prefix, i))
			if err := c.Create(ctx, pod); err != nil {
				t.Fatalf("creating %s: %v", pod.Name, err)
			}
			if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsUser != nil {
				t.Errorf("%s stored with runAsUser %d", pod.Name, *pod.Spec.SecurityContext.RunAsUser)
			}
			if pod.Annotations[policy.AnnotationAdmissionPolicy] != "e2e-once" {
				t.Errorf("%s stored without the admission policy's marker: %v", pod.Name, pod.Annotations)
			}
			out = append(out, pod)
		}
		return out
	}

	const n = 5
	before := evaluations()
	createPods(ns, "once", n)
	if got := evaluations() - before; got != n {
		t.Errorf("%d Windows pods: wincompat-pods evaluated %d times, want %d (once each)", n, got, n)
	}

	// With no wincompat webhook anywhere, the API server calls it after the admission policies.
	e2eutil.InstallReadderIn(t, c, nsReadded, "zz-readd-runasuser")
	before = evaluations()
	createPods(nsReadded, "readded", n)
	if got := evaluations() - before; got != 2*n {
		t.Errorf("%d Windows pods, runAsUser put back after the policy: wincompat-pods evaluated %d times, want %d (twice each)", n, got, 2*n)
	}

	// The same policy without changes.
	var current admissionregistrationv1.MutatingAdmissionPolicy
	if err := c.Get(ctx, client.ObjectKey{Name: pods.Name}, &current); err != nil {
		t.Fatal(err)
	}
	last := current.Spec.MatchConditions[len(current.Spec.MatchConditions)-1]
	if last.Name != "changes" {
		t.Fatalf("the last matchCondition of %s is %s, want changes", pods.Name, last.Name)
	}
	current.Spec.MatchConditions = current.Spec.MatchConditions[:len(current.Spec.MatchConditions)-1]
	if err := c.Update(ctx, &current); err != nil {
		t.Fatal(err)
	}
	// The API server loads the change from its informer: wait until a probe is evaluated twice.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		before = evaluations()
		if err := c.Create(ctx, e2eutil.WindowsPod(ns, "probe-twice"), client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		if evaluations()-before == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the API server still evaluates wincompat-pods once per pod 30s after changes was removed")
		}
	}
	before = evaluations()
	createPods(ns, "twice", n)
	if got := evaluations() - before; got != 2*n {
		t.Errorf("%d Windows pods without the changes matchCondition: wincompat-pods evaluated %d times, want %d: the API server no longer reinvokes a policy after its own change, and changes may have no purpose", n, got, 2*n)
	}
}
