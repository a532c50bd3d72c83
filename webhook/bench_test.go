package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	"github.com/wincompat/wincompat/policy"
)

// benchPod renders a Windows pod with n containers carrying what real charts carry: Linux security
// defaults, resources, probes, env and mounts.
func benchPod(n int) []byte {
	containers := make([]string, n)
	for i := range containers {
		containers[i] = fmt.Sprintf(`{"name":"c%d","image":"mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
		"ports":[{"name":"http","containerPort":%d,"protocol":"TCP"}],
		"env":[{"name":"LOG_LEVEL","value":"info"},{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
		"resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"cpu":"1","memory":"512Mi"}},
		"livenessProbe":{"httpGet":{"path":"/healthz","port":"http"},"initialDelaySeconds":10,"periodSeconds":10},
		"readinessProbe":{"httpGet":{"path":"/ready","port":"http"},"periodSeconds":5},
		"volumeMounts":[{"name":"config","mountPath":"C:\\config","readOnly":true},{"name":"cache","mountPath":"C:\\cache"}],
		"securityContext":{"runAsUser":1001,"runAsNonRoot":true,"readOnlyRootFilesystem":true,"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},"seccompProfile":{"type":"RuntimeDefault"}}}`, i, 8080+i)
	}
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9f8b6c5d-x2x9q","generateName":"web-7d9f8b6c5d-","namespace":"demo",
	"labels":{"app.kubernetes.io/name":"web","app.kubernetes.io/instance":"web","pod-template-hash":"7d9f8b6c5d"},
	"annotations":{"checksum/config":"3f1c2b5e9a7d"},
	"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8b6c5d","uid":"5c0f7a52-8d1b-4c55-9d56-0c4b2f0b7e1a","controller":true,"blockOwnerDeletion":true}]},
	"spec":{"os":{"name":"windows"},"serviceAccountName":"web",
	"securityContext":{"runAsUser":1001,"fsGroup":1001,"seccompProfile":{"type":"RuntimeDefault"}},
	"volumes":[{"name":"config","configMap":{"name":"web"}},{"name":"cache","emptyDir":{"medium":"Memory","sizeLimit":"64Mi"}}],
	"containers":[%s]}}`, strings.Join(containers, ","))
}

var benchFacts = policy.Facts{Operation: policy.Create, Version: "bench",
	Namespace: policy.Namespace{Name: "demo", Labels: map[string]string{policy.LabelEnabled: "true"}}}

// BenchmarkMutate is decide + diff: raw object in, JSON patch out.
func BenchmarkMutate(b *testing.B) {
	pol := policy.Default()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for _, n := range []int{2, 20} {
		raw := benchPod(n)
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				res, err := Mutate(pol, gvk, raw, benchFacts)
				if err != nil || len(res.Patch) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFloor is the unavoidable part: decoding the same pod into its type and encoding it once.
func BenchmarkFloor(b *testing.B) {
	for _, n := range []int{2, 20} {
		raw := benchPod(n)
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				var pod corev1.Pod
				if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &pod); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(&pod); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecide is the policy alone, on an already decoded pod.
func BenchmarkDecide(b *testing.B) {
	pol := policy.Default()
	for _, n := range []int{2, 20, 100} {
		raw := benchPod(n)
		var pod corev1.Pod
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &pod); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p := pod.DeepCopy()
				if d, _ := pol.Decide(p, benchFacts); !d.Windows {
					b.Fatal("not decided")
				}
			}
		})
	}
}

// reviewBody wraps a pod in an AdmissionReview as the API server sends it.
func reviewBody(b *testing.B, pod []byte) []byte {
	b.Helper()
	review := map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "kind": map[string]string{"version": "v1", "kind": "Pod"},
			"resource": map[string]string{"version": "v1", "resource": "pods"}, "namespace": "demo", "operation": "CREATE",
			"userInfo": map[string]any{"username": "system:serviceaccount:kube-system:replicaset-controller"},
			"object":   json.RawMessage(pod),
		},
	}
	out, err := json.Marshal(review)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func serveReview(b *testing.B, h http.Handler, body []byte) {
	req := httptest.NewRequest(http.MethodPost, PodPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
}

// BenchmarkHandler is the whole review: request bytes in, response bytes out, through controller-runtime's
// webhook plumbing and wincompat's handler. BenchmarkHandlerFloor is the same plumbing answering
// "allowed" without looking at the object: decoding the review and encoding a response with no patch.
func BenchmarkHandler(b *testing.B) {
	current := &atomic.Pointer[policy.Policy]{}
	current.Store(policy.Default())
	h := &admission.Webhook{Handler: NewPodHandler(Config{Policy: current, Namespaces: namespaces{"demo": {policy.LabelEnabled: "true"}}, Log: logr.Discard(), Version: "bench"})}
	floor := &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })}
	for _, n := range []int{2, 20, 100} {
		body := reviewBody(b, benchPod(n))
		b.Run(fmt.Sprintf("wincompat/containers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				serveReview(b, h, body)
			}
		})
		b.Run(fmt.Sprintf("floor/containers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				serveReview(b, floor, body)
			}
		})
	}
}
