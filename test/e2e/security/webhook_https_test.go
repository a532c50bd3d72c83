package security

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestWebhookServerHTTPS: issue 3, requirements 8 and 9. Bad input sent straight to wincompat's
// server over HTTPS (not through the API server, which would never send it), then its TLS settings.
func TestWebhookServerHTTPS(t *testing.T) {
	cl := e2eutil.StartCluster(t)
	ns := e2eutil.ReadyNamespace // opted in, and in wincompat's cache

	valid := e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{UID: "valid", Kind: e2eutil.PodKind, Resource: e2eutil.PodResource, Namespace: ns, Object: e2eutil.PodJSON(t, ns)})
	// Over controller-runtime's 7 MiB limit on request bodies; otherwise a valid review.
	huge := e2eutil.WindowsPod(ns, "huge")
	huge.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	huge.Annotations = map[string]string{"padding": strings.Repeat("x", 8<<20)}
	hugeObj, err := json.Marshal(huge)
	if err != nil {
		t.Fatal(err)
	}
	huge.Annotations["padding"] = strings.Repeat("x", 7<<20-64<<10)
	largeObj, err := json.Marshal(huge)
	if err != nil {
		t.Fatal(err)
	}
	service, err := json.Marshal(&corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"` + ns + `"},"data":{"k":"dg=="}}`)
	wrongType := bytes.Replace(e2eutil.PodJSON(t, ns), []byte(`"runAsUser":1000`), []byte(`"runAsUser":"x"`), 1)
	if bytes.Equal(wrongType, e2eutil.PodJSON(t, ns)) {
		t.Fatal("test bug: runAsUser not found in the pod's JSON")
	}

	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			body []byte
			// What the answer must say. uid "" means no request could be read, so none is echoed.
			wantHTTP       []int // any of these
			wantAPIVersion string
			wantUID        string
			wantAllowed    bool
			wantCode       int32
			wantMessage    string // substring of result.message
			wantPatch      bool
			wantWarning    string // substring of some warning
		}{
			{
				name: "truncated JSON", body: valid[:len(valid)/2],
				wantHTTP: []int{http.StatusOK}, wantCode: http.StatusBadRequest, wantMessage: "unexpected end of JSON input",
			},
			{
				name: "Service on the pod path",
				body: e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{UID: "service", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Service"},
					Resource: metav1.GroupVersionResource{Version: "v1", Resource: "services"}, Namespace: ns, Object: service}),
				wantHTTP: []int{http.StatusOK}, wantAPIVersion: "admission.k8s.io/v1", wantUID: "service", wantAllowed: true, wantCode: http.StatusOK,
				wantWarning: "does not handle services",
			},
			{
				// The resource is right but the kind and object are not a Pod's: not wincompat's business.
				name: "Service kind on the pods resource",
				body: e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{UID: "service-kind", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Service"},
					Resource: e2eutil.PodResource, Namespace: ns, Object: service}),
				wantHTTP: []int{http.StatusOK}, wantAPIVersion: "admission.k8s.io/v1", wantUID: "service-kind", wantAllowed: true, wantCode: http.StatusOK,
				wantWarning: "unsupported object",
			},
			{
				// controller-runtime answers a v1beta1 review in v1beta1.
				name: "v1beta1 review", body: e2eutil.ReviewBody(t, "admission.k8s.io/v1beta1", e2eutil.ReviewRequest{UID: "beta", Kind: e2eutil.PodKind, Resource: e2eutil.PodResource, Namespace: ns, Object: e2eutil.PodJSON(t, ns)}),
				wantHTTP: []int{http.StatusOK}, wantAPIVersion: "admission.k8s.io/v1beta1", wantUID: "beta", wantAllowed: true, wantCode: http.StatusOK,
				wantPatch: true, wantWarning: "runAsUser",
			},
			{
				name: "null object", body: e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{UID: "null", Kind: e2eutil.PodKind, Resource: e2eutil.PodResource, Namespace: ns, Object: json.RawMessage("null")}),
				wantHTTP: []int{http.StatusOK}, wantAPIVersion: "admission.k8s.io/v1", wantUID: "null", wantCode: http.StatusBadRequest, wantMessage: "no object",
			},
			{
				// Either an HTTP 413 or a review answer with code 413.
				name: "body over 7 MiB", body: e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{UID: "huge", Kind: e2eutil.PodKind, Resource: e2eutil.PodResource, Namespace: ns, Object: hugeObj}),
				wantHTTP: []int{http.StatusOK, http.StatusRequestEntityTooLarge}, wantCode: http.StatusRequestEntityTooLarge, wantMessage: "too large",
			},
			{
				// Just under the limit the same review is served: the refusal above is the limit, not
				// the size of the pod.
				name: "body just under 7 MiB", body: e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{UID: "large", Kind: e2eutil.PodKind, Resource: e2eutil.PodResource, Namespace: ns, Object: largeObj}),
				wantHTTP: []int{http.StatusOK}, wantAPIVersion: "admission.k8s.io/v1", wantUID: "large", wantAllowed: true, wantCode: http.StatusOK,
				wantPatch: true, wantWarning: "runAsUser",
			},
			{
				name: "unknown resource",
				body: e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{UID: "secret", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
					Resource: metav1.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: ns, Object: secret}),
				wantHTTP: []int{http.StatusOK}, wantAPIVersion: "admission.k8s.io/v1", wantUID: "secret", wantAllowed: true, wantCode: http.StatusOK,
				wantWarning: "does not handle secrets",
			},
			{
				name: "wrong type in a field", body: e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{UID: "wrong-type", Kind: e2eutil.PodKind, Resource: e2eutil.PodResource, Namespace: ns, Object: wrongType}),
				wantHTTP: []int{http.StatusOK}, wantAPIVersion: "admission.k8s.io/v1", wantUID: "wrong-type", wantCode: http.StatusBadRequest, wantMessage: "runAsUser",
			},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, review, raw := cl.Post(t, webhook.PodPath, tc.body)
				if !slices.Contains(tc.wantHTTP, status) {
					t.Fatalf("HTTP %d, want one of %v; body %.300s", status, tc.wantHTTP, raw)
				}
				if status == http.StatusRequestEntityTooLarge {
					return // an HTTP-level refusal carries no review
				}
				if review == nil || review.Response == nil {
					t.Fatalf("the answer is not an AdmissionReview with a response: %.300s", raw)
				}
				res := review.Response
				if res.Result != nil {
					t.Logf("allowed=%v code=%d message=%q warnings=%q", res.Allowed, res.Result.Code, res.Result.Message, res.Warnings)
				}
				if tc.wantAPIVersion != "" && (review.APIVersion != tc.wantAPIVersion || review.Kind != "AdmissionReview") {
					t.Errorf("answered as %s %s, want %s AdmissionReview", review.APIVersion, review.Kind, tc.wantAPIVersion)
				}
				if string(res.UID) != tc.wantUID {
					t.Errorf("uid %q, want %q", res.UID, tc.wantUID)
				}
				if res.Allowed != tc.wantAllowed {
					t.Errorf("allowed = %v, want %v (result %+v)", res.Allowed, tc.wantAllowed, res.Result)
				}
				if res.Result == nil || res.Result.Code != tc.wantCode || !strings.Contains(res.Result.Message, tc.wantMessage) {
					t.Errorf("result = %+v, want code %d and a message containing %q", res.Result, tc.wantCode, tc.wantMessage)
				}
				if got := len(res.Patch) > 0; got != tc.wantPatch {
					t.Errorf("patch present = %v, want %v: %s", got, tc.wantPatch, res.Patch)
				}
				if tc.wantPatch && (res.PatchType == nil || *res.PatchType != admissionv1.PatchTypeJSONPatch) {
					t.Errorf("patchType = %v, want JSONPatch", res.PatchType)
				}
				if tc.wantWarning != "" && !containsSubstring(res.Warnings, tc.wantWarning) {
					t.Errorf("no warning mentions %q: %q", tc.wantWarning, res.Warnings)
				}
			})
		}
	})

	// After all that, the server still answers a valid review, with a patch that applies and does the job.
	t.Run("still healthy", func(t *testing.T) {
		status, review, raw := cl.Post(t, webhook.PodPath, valid)
		if status != http.StatusOK || review == nil || review.Response == nil {
			t.Fatalf("HTTP %d: %.300s", status, raw)
		}
		res := review.Response
		if !res.Allowed || res.UID != "valid" || len(res.Patch) == 0 {
			t.Fatalf("answer to a valid review: allowed=%v uid=%q patch=%s result=%+v", res.Allowed, res.UID, res.Patch, res.Result)
		}
		p, err := jsonpatch.DecodePatch(res.Patch)
		if err != nil {
			t.Fatalf("patch does not decode: %v: %s", err, res.Patch)
		}
		out, err := p.Apply(e2eutil.PodJSON(t, ns))
		if err != nil {
			t.Fatalf("patch does not apply: %v: %s", err, res.Patch)
		}
		var pod corev1.Pod
		if err := json.Unmarshal(out, &pod); err != nil {
			t.Fatal(err)
		}
		if pod.Spec.SecurityContext.RunAsUser != nil || pod.Spec.NodeSelector[corev1.LabelOSStable] != "windows" {
			t.Errorf("patched pod: securityContext %+v nodeSelector %v", pod.Spec.SecurityContext, pod.Spec.NodeSelector)
		}
	})

	t.Run("TLS", func(t *testing.T) {
		// The default minimum is TLS 1.3 and HTTP/2 is off (`wincompat serve`'s flag defaults).
		for _, f := range tlsFindings(t, cl.WebhookAddr(), cl.WebhookTLS(t)) {
			t.Error(f)
		}
		// A normal client gets TLS 1.3 and HTTP/1.1: the refusals above are not a broken server.
		conn, err := tls.Dial("tcp", cl.WebhookAddr(), func() *tls.Config {
			c := cl.WebhookTLS(t)
			c.NextProtos = []string{"h2", "http/1.1"}
			return c
		}())
		if err != nil {
			t.Fatalf("a TLS 1.3 client offering h2 and http/1.1 was refused: %v", err)
		}
		defer conn.Close()
		if s := conn.ConnectionState(); s.Version != tls.VersionTLS13 || s.NegotiatedProtocol != "http/1.1" {
			t.Errorf("negotiated %s and %q, want TLS 1.3 and http/1.1", tls.VersionName(s.Version), s.NegotiatedProtocol)
		}
	})

	// The same checks against a server told to accept TLS 1.2 and HTTP/2 must object, or they prove
	// nothing. This restarts the server, so it comes last.
	t.Run("TLS checks catch a weakened server", func(t *testing.T) {
		cl.StopServing()
		cl.Serve(t, func(o *server.Options) { o.TLSMinVersion, o.EnableHTTP2 = "1.2", true })
		findings := tlsFindings(t, cl.WebhookAddr(), cl.WebhookTLS(t))
		if len(findings) != 2 {
			t.Errorf("findings against a TLS 1.2, HTTP/2 server: %q, want both", findings)
		}
	})
}

func containsSubstring(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
