package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestWebhookReinvocation: issue 3, requirement 6. Another webhook re-adds runAsUser after wincompat;
// the API server reinvokes wincompat (reinvocationPolicy IfNeeded), which removes it again without
// repeating itself in wincompat.io/changes.
func TestWebhookReinvocation(t *testing.T) {
	cl := e2eutil.StartCluster(t)
	const ns = "reinvocation"
	cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
	r := cl.InstallReadder(t, ns)

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		// The second pass finds exactly what the first did: nothing new to record.
		{"runAsUser in the input", e2eutil.WindowsPod(ns, "same-field")},
		// The second pass finds a field the first did not see: merged into the list, once.
		{"no securityContext in the input", func() *corev1.Pod {
			p := e2eutil.WindowsPod(ns, "new-field")
			p.Spec.SecurityContext = nil
			return p
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readderBefore, wincompatBefore := r.Calls.Load(), admissionReviews(t)
			var pod corev1.Pod
			if err := cl.CreateAndGet(t, tc.pod, &pod); err != nil {
				t.Fatalf("rejected: wincompat did not undo the readder's runAsUser on reinvocation: %v", err)
			}
			if n := r.Calls.Load() - readderBefore; n != 1 {
				t.Errorf("the readder was called %d times, want 1", n)
			}
			// The first call and the reinvocation.
			if n := admissionReviews(t) - wincompatBefore; n != 2 {
				t.Errorf("wincompat answered %v reviews for one pod, want 2 (call and reinvocation)", n)
			}
			if sc := pod.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
				t.Errorf("stored pod has runAsUser %d", *sc.RunAsUser)
			}
			if sc := pod.Spec.SecurityContext; sc == nil || sc.WindowsOptions == nil || ptr.Deref(sc.WindowsOptions.RunAsUserName, "") != "ContainerUser" {
				t.Errorf("the non-root intent of the re-added runAsUser was lost: %+v", sc)
			}
			changes := e2eutil.DecodeChanges(t, pod.Annotations, policy.AnnotationChanges) // fails on duplicates
			n := 0
			for _, c := range changes {
				if c.Action == policy.Strip && c.Path == "spec.securityContext.runAsUser" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s records the strip of spec.securityContext.runAsUser %d times, want 1: %s", policy.AnnotationChanges, n, pod.Annotations[policy.AnnotationChanges])
			}
			if c := e2eutil.CountToleration(&pod, e2eutil.WindowsToleration); c != 1 {
				t.Errorf("the Windows toleration appears %d times after reinvocation", c)
			}
			if pod.Annotations[policy.AnnotationVersion] != "e2e" {
				t.Errorf("annotations: %v", pod.Annotations)
			}
		})
	}
}
