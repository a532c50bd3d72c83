package e2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// readder is a second mutating webhook that puts spec.securityContext.runAsUser: 1000 back on every
// pod, as a Linux-minded policy engine might after wincompat removed it.
type readder struct {
	calls atomic.Int64
}

func (r *readder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.calls.Add(1)
	servePodReview(w, req, func(pod *corev1.Pod) []byte {
		op := map[string]any{"op": "add", "path": "/spec/securityContext/runAsUser", "value": 1000}
		if pod.Spec.SecurityContext == nil {
			op = map[string]any{"op": "add", "path": "/spec/securityContext", "value": map[string]any{"runAsUser": 1000}}
		}
		patch, _ := json.Marshal([]any{op})
		return patch
	})
}

// servePodReview answers a pod's AdmissionReview as a third-party webhook would: allowed, with the JSON
// patch mutate returns (none when it returns nil).
func servePodReview(w http.ResponseWriter, req *http.Request, mutate func(*corev1.Pod) []byte) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	var pod corev1.Pod
	if err := json.Unmarshal(review.Request.Object.Raw, &pod); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if patch := mutate(&pod); patch != nil {
		resp.Patch, resp.PatchType = patch, ptr.To(admissionv1.PatchTypeJSONPatch)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: resp,
	})
}

// installReadder serves a readder over TLS (httptest's self-signed certificate, valid for 127.0.0.1)
// and registers it for pod CREATE in namespace ns. Its configuration's name sorts after webhookConfigName, so
// the API server calls it after wincompat; reinvocationPolicy Never, so only wincompat is called again.
func (cl *cluster) installReadder(t *testing.T, ns string) *readder {
	t.Helper()
	r := installReadderIn(t, cl.c, ns, "zz-readd-runasuser")
	cl.warnings.Take()
	return r
}

// installReadderIn registers a readder as the MutatingWebhookConfiguration named name, for pod CREATE
// in ns, and waits until the API server calls it.
func installReadderIn(t *testing.T, c client.Client, ns, name string) *readder {
	t.Helper()
	r := &readder{}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "readd-runasuser.e2e.wincompat.io",
			ClientConfig: serveWebhook(t, r, "/readd"),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	create(context.Background(), t, c, cfg)

	// The API server picks up webhook configurations from an informer: wait until the readder is called.
	for i := 0; r.calls.Load() == 0; i++ {
		if i == 300 {
			t.Fatal("the API server never called the readder webhook")
		}
		_ = c.Create(context.Background(), windowsPod(ns, "probe-readder"), client.DryRunAll)
		time.Sleep(100 * time.Millisecond)
	}
	return r
}

// TestWebhookReinvocation: issue 3, requirement 6. Another webhook re-adds runAsUser after wincompat;
// the API server reinvokes wincompat (reinvocationPolicy IfNeeded), which removes it again without
// repeating itself in wincompat.io/changes.
func TestWebhookReinvocation(t *testing.T) {
	cl := startCluster(t)
	const ns = "reinvocation"
	cl.newNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
	r := cl.installReadder(t, ns)

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		// The second pass finds exactly what the first did: nothing new to record.
		{"runAsUser in the input", windowsPod(ns, "same-field")},
		// The second pass finds a field the first did not see: merged into the list, once.
		{"no securityContext in the input", func() *corev1.Pod {
			p := windowsPod(ns, "new-field")
			p.Spec.SecurityContext = nil
			return p
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readderBefore, wincompatBefore := r.calls.Load(), admissionReviews(t)
			var pod corev1.Pod
			if err := cl.createAndGet(t, tc.pod, &pod); err != nil {
				t.Fatalf("rejected: wincompat did not undo the readder's runAsUser on reinvocation: %v", err)
			}
			if n := r.calls.Load() - readderBefore; n != 1 {
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
			changes := decodeChanges(t, pod.Annotations, policy.AnnotationChanges) // fails on duplicates
			n := 0
			for _, c := range changes {
				if c.Action == policy.Strip && c.Path == "spec.securityContext.runAsUser" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s records the strip of spec.securityContext.runAsUser %d times, want 1: %s", policy.AnnotationChanges, n, pod.Annotations[policy.AnnotationChanges])
			}
			if c := countToleration(&pod, windowsToleration); c != 1 {
				t.Errorf("the Windows toleration appears %d times after reinvocation", c)
			}
			if pod.Annotations[policy.AnnotationVersion] != "e2e" {
				t.Errorf("annotations: %v", pod.Annotations)
			}
		})
	}
}

// serveWebhook serves h over TLS on loopback for the test's life and returns the client configuration
// that reaches it at path: httptest's self-signed certificate, valid for 127.0.0.1, as the caBundle.
func serveWebhook(t *testing.T, h http.Handler, path string) admissionregistrationv1.WebhookClientConfig {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return admissionregistrationv1.WebhookClientConfig{
		URL:      ptr.To(srv.URL + path),
		CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}
}
