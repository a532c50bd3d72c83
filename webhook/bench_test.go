package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	jsonpatch "github.com/evanphx/json-patch/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/registry"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
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

// benchCase is one pod the benchmarks run on.
type benchCase struct {
	name string
	pod  []byte
}

// benchCases are the synthetic pods of 2, 20 and 100 containers and a real one: the ingress-nginx
// controller from the shared corpus of rendered Helm charts, declared Windows.
func benchCases(b *testing.B) []benchCase {
	return []benchCase{
		{"containers=2", benchPod(2)},
		{"containers=20", benchPod(20)},
		{"containers=100", benchPod(100)},
		{"corpus=ingress-nginx", corpusPod(b, "ingress-nginx.yaml", "Deployment", "ingress-nginx-controller")},
	}
}

// corpusPod turns the pod template of one workload in ../shared/corpus into the Pod its controller
// would create, with spec.os.name=windows as a user deploying the chart to Windows would set it.
func corpusPod(b *testing.B, file, kind, name string) []byte {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "shared", "corpus", "charts", file))
	if err != nil {
		b.Fatalf("the shared corpus sits beside the repository: %v", err)
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil || d.Kind != kind || d.Name != name {
			continue
		}
		pod := corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: d.Spec.Template.ObjectMeta,
			Spec:       d.Spec.Template.Spec,
		}
		pod.GenerateName, pod.Namespace = name+"-7d9f8b6c5d-", "demo"
		pod.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
		out, err := json.Marshal(&pod)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	b.Fatalf("%s has no %s %s", file, kind, name)
	return nil
}

// BenchmarkMutate is decide + diff: raw object in, JSON patch out.
func BenchmarkMutate(b *testing.B) {
	pol := policy.Default()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for _, c := range benchCases(b) {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.pod)))
			for b.Loop() {
				res, err := mutate(pol, gvk, c.pod, benchFacts)
				if err != nil || len(res.Patch) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFloor is the unavoidable part of MutateResolving: decoding the same pod into its type and
// encoding it once.
func BenchmarkFloor(b *testing.B) {
	for _, c := range benchCases(b) {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.pod)))
			for b.Loop() {
				var pod corev1.Pod
				if err := sigsjson.UnmarshalCaseSensitivePreserveInts(c.pod, &pod); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(&pod); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecide is the policy alone, on an already decoded pod (the copy it works on included).
func BenchmarkDecide(b *testing.B) {
	pol := policy.Default()
	for _, c := range benchCases(b) {
		var pod corev1.Pod
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(c.pod, &pod); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
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
func reviewBody(b testing.TB, pod []byte) []byte {
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

// BenchmarkHandler is the whole review: request bytes in, response bytes out, through the Endpoint that
// `wincompat serve` uses (controller-runtime's plumbing, the review decoded in one pass) and wincompat's handler, for each pod and for the same pod once mutated (a pod that
// needs no change: a reinvocation, or a chart already written for Windows).
//
// Two floors, on the same plumbing: "floor" answers "allowed" without looking at the object, which is
// decoding the review and encoding a response with no patch; "floor-typed" also decodes the object into
// its Go type as wincompat does, the least any webhook that reads the pod through Kubernetes types does.
func BenchmarkHandler(b *testing.B) {
	current := &atomic.Pointer[policy.Policy]{}
	current.Store(policy.Default())
	h := NewEndpoint(NewPodHandler(Config{Policy: current, Namespaces: namespaces{"demo": {policy.LabelEnabled: "true"}}, Log: logr.Discard(), Version: "bench"}))
	// The floors are served by the same Endpoint as wincompat, so that the comparison is of the work
	// behind the plumbing, not of two plumbings.
	floor := NewEndpoint(admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { return admission.Allowed("") }))
	typedFloor := NewEndpoint(admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		var pod corev1.Pod
		if _, err := sigsjson.UnmarshalStrict(req.Object.Raw, &pod, sigsjson.DisallowDuplicateFields); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		return admission.Allowed("")
	}))
	for _, c := range benchCases(b) {
		body := reviewBody(b, c.pod)
		mutated := reviewBody(b, mutatedPod(b, c.pod))
		for _, run := range []struct {
			name string
			h    http.Handler
			body []byte
		}{
			{"wincompat", h, body},
			{"wincompat-unchanged", h, mutated},
			{"floor", floor, body},
			{"floor-typed", typedFloor, body},
		} {
			b.Run(run.name+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(run.body)))
				for b.Loop() {
					serveReview(b, run.h, run.body)
				}
			})
		}
	}
}

// mutatedPod is pod with wincompat's patch applied.
func mutatedPod(b *testing.B, pod []byte) []byte {
	b.Helper()
	res, err := mutate(policy.Default(), schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, pod, benchFacts)
	if err != nil {
		b.Fatal(err)
	}
	pj, err := json.Marshal(res.Patch)
	if err != nil {
		b.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(pj)
	if err != nil {
		b.Fatal(err)
	}
	out, err := p.Apply(pod)
	if err != nil {
		b.Fatal(err)
	}
	if again, err := mutate(policy.Default(), schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, out, benchFacts); err != nil || len(again.Patch) > 0 {
		b.Fatalf("a mutated pod still gets a patch: %v %v", again.Patch, err)
	}
	return out
}

// BenchmarkHandlerImages is BenchmarkHandler's 2-container pod with its images read from a registry on
// loopback (tags that name no build), through the real resolver. "warm" answers from the resolver's
// cache, to compare with BenchmarkHandler/wincompat/containers=2 (tags only): the cost of the feature on
// every pod once its images are known. "cold-slow" starts each review with an empty cache against a
// registry slower than the lookup deadline: the review must be answered at the deadline, with the
// fallback, and ms-past-deadline reports by how much it overran.
func BenchmarkHandlerImages(b *testing.B) {
	reg := registrytest.Start()
	defer reg.Close()
	image, err := reg.PushIndex("shop/api", "1.4.2", types.OCIImageIndex, registrytest.Linux("amd64"), registrytest.Windows("10.0.20348.2227"))
	if err != nil {
		b.Fatal(err)
	}
	pod := bytes.ReplaceAll(benchPod(2), []byte("mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"), []byte(image))
	body := reviewBody(b, pod)
	handler := func(r ImageResolver) http.Handler {
		current := &atomic.Pointer[policy.Policy]{}
		current.Store(policy.Default())
		return NewEndpoint(NewPodHandler(Config{Policy: current, Namespaces: namespaces{"demo": {policy.LabelEnabled: "true"}},
			Images: r, Log: logr.Discard(), Version: "bench"}))
	}
	b.Run("warm/containers=2", func(b *testing.B) {
		r, err := registry.New(registry.Config{AllowPrivateNetworks: true})
		if err != nil {
			b.Fatal(err)
		}
		h := handler(r)
		serveReview(b, h, body) // fills the cache
		before := reg.Requests.Load()
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			serveReview(b, h, body)
			took = append(took, time.Since(start))
		}
		reportPercentiles(b, took)
		if n := reg.Requests.Load() - before; n > 0 {
			b.Fatalf("%d registry requests with a warm cache", n)
		}
	})
	b.Run("cold/containers=2", func(b *testing.B) {
		// A miss: every review starts with an empty cache, so it waits for the registry (a manifest GET
		// per image; the index needs no config) on loopback.
		var took []time.Duration
		for b.Loop() {
			r, err := registry.New(registry.Config{AllowPrivateNetworks: true})
			if err != nil {
				b.Fatal(err)
			}
			h := handler(r)
			start := time.Now()
			serveReview(b, h, body)
			took = append(took, time.Since(start))
		}
		reportPercentiles(b, took)
	})
	b.Run("cold-slow/containers=2", func(b *testing.B) {
		const deadline = 200 * time.Millisecond
		reg.SetDelay(2 * deadline)
		defer reg.SetDelay(0)
		var worst time.Duration
		for b.Loop() {
			r, err := registry.New(registry.Config{Timeout: deadline, BackgroundTimeout: 4 * deadline, AllowPrivateNetworks: true})
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			serveReview(b, handler(r), body)
			worst = max(worst, time.Since(start))
		}
		b.ReportMetric(float64(worst-deadline)/float64(time.Millisecond), "ms-past-deadline(max)")
	})
}

// reportPercentiles adds the median and 99th percentile of the iterations' times, in microseconds.
func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	at := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))]) / float64(time.Microsecond) }
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkMutateScaling is BenchmarkMutate over pods of 1,000 to 8,000 containers, each with an image
// of its own (a 3 MiB body holds about 4,000): the time per container must stay flat (CPU linear in
// the object's size), or one hostile pod costs seconds of CPU that go on after the API server gave up.
func BenchmarkMutateScaling(b *testing.B) {
	pol := policy.Default()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for _, n := range []int{1000, 2000, 4000, 8000} {
		parts := strings.Split(string(benchPod(n)), "iis:windowsservercore-ltsc2022")
		var distinct strings.Builder
		for i, p := range parts {
			if i > 0 {
				fmt.Fprintf(&distinct, "iis%d:windowsservercore-ltsc2022", i)
			}
			distinct.WriteString(p)
		}
		raw := []byte(distinct.String())
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := mutate(pol, gvk, raw, benchFacts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/container")
		})
	}
}
