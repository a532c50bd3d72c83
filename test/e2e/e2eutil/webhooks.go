package e2eutil

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
)

// Readder is a second mutating webhook that puts spec.securityContext.runAsUser: 1000 back on every
// pod, as a Linux-minded policy engine might after wincompat removed it.
type Readder struct {
	Calls atomic.Int64
}

func (r *Readder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.Calls.Add(1)
	ServePodReview(w, req, func(pod *corev1.Pod) []byte {
		op := map[string]any{"op": "add", "path": "/spec/securityContext/runAsUser", "value": 1000}
		if pod.Spec.SecurityContext == nil {
			op = map[string]any{"op": "add", "path": "/spec/securityContext", "value": map[string]any{"runAsUser": 1000}}
		}
		patch, _ := json.Marshal([]any{op})
		return patch
	})
}

// ServePodReview answers a pod's AdmissionReview as a third-party webhook would: allowed, with the JSON
// patch mutate returns (none when it returns nil).
func ServePodReview(w http.ResponseWriter, req *http.Request, mutate func(*corev1.Pod) []byte) {
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

// InstallReadder serves a readder over TLS (httptest's self-signed certificate, valid for 127.0.0.1)
// and registers it for pod CREATE in namespace ns. Its configuration's name sorts after webhookConfigName, so
// the API server calls it after wincompat; reinvocationPolicy Never, so only wincompat is called again.
func (cl *Cluster) InstallReadder(t *testing.T, ns string) *Readder {
	t.Helper()
	r := InstallReadderIn(t, cl.C, ns, "zz-readd-runasuser")
	cl.Warnings.Take()
	return r
}

// InstallReadderIn registers a readder as the MutatingWebhookConfiguration named name, for pod CREATE
// in ns, and waits until the API server calls it.
func InstallReadderIn(t *testing.T, c client.Client, ns, name string) *Readder {
	t.Helper()
	r := &Readder{}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "readd-runasuser.e2e.wincompat.io",
			ClientConfig: ServeWebhook(t, r, "/readd"),
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
	Create(context.Background(), t, c, cfg)

	// The API server picks up webhook configurations from an informer: wait until the readder is called.
	for i := 0; r.Calls.Load() == 0; i++ {
		if i == 300 {
			t.Fatal("the API server never called the readder webhook")
		}
		_ = c.Create(context.Background(), WindowsPod(ns, "probe-readder"), client.DryRunAll)
		time.Sleep(100 * time.Millisecond)
	}
	return r
}

// ServeWebhook serves h over TLS on loopback for the test's life and returns the client configuration
// that reaches it at path: httptest's self-signed certificate, valid for 127.0.0.1, as the caBundle.
func ServeWebhook(t *testing.T, h http.Handler, path string) admissionregistrationv1.WebhookClientConfig {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return admissionregistrationv1.WebhookClientConfig{
		URL:      ptr.To(srv.URL + path),
		CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}
}
