package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/grantstest"
)

// Namespaces the fuzzed reviews may name; any other is not found, "broken" cannot be read.
var fuzzNamespaces = namespaces{
	"demo":       {policy.LabelEnabled: "true"},
	"default-os": {policy.LabelEnabled: "true", policy.LabelDefaultOS: "windows"},
	"restricted": {policy.LabelEnabled: "true", "pod-security.kubernetes.io/enforce": "restricted"},
	"broken":     nil,
}

// Bits of FuzzHandler's knob byte.
const (
	fuzzWorkloadPath = 1 << iota
	fuzzOffline
)

// fuzzReview wraps an object in an AdmissionReview as the API server sends it. The object is spliced in
// as it is, so that it may be anything, even JSON that encoding/json refuses to write.
func fuzzReview(apiVersion, uid, group, kind, resource, subResource, ns, op string, object []byte) []byte {
	req := map[string]any{
		"uid": uid, "kind": map[string]string{"group": group, "version": "v1", "kind": kind},
		"resource":  map[string]string{"group": group, "version": "v1", "resource": resource},
		"namespace": ns, "operation": op, "userInfo": map[string]any{"username": "fuzz"},
		"object": "OBJECT",
	}
	if subResource != "" {
		req["subResource"] = subResource
	}
	out, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": "AdmissionReview", "request": req})
	if err != nil {
		panic(err)
	}
	return bytes.Replace(out, []byte(`"OBJECT"`), object, 1)
}

// resourceOf is the resource the API server names for each kind wincompat handles.
var resourceOf = map[string]string{
	"Pod": "pods", "PodTemplate": "podtemplates", "ReplicationController": "replicationcontrollers", "Deployment": "deployments",
	"ReplicaSet": "replicasets", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets", "Job": "jobs", "CronJob": "cronjobs",
}

// decodeReview reads a body as controller-runtime's plumbing does (admission/http.go): v1 and v1beta1,
// the latter into the v1 type. Doing the same here tells a review that must be answered with its uid
// from one that cannot be.
func decodeReview(body []byte) (*admissionv1.AdmissionRequest, *schema.GroupVersionKind, error) {
	req := &admissionv1.AdmissionRequest{}
	ar := reviewAnyVersion{}
	ar.Request = req // kept when the review says "request": null, as the plumbing's is
	ar.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
	_, gvk, err := reviewCodecs.UniversalDeserializer().Decode(body, nil, &ar)
	return req, gvk, err
}

type reviewAnyVersion struct{ admissionv1.AdmissionReview }

var reviewCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	if err := admissionv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := admissionv1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s)
}()

// FuzzHandler sends arbitrary bodies through wincompat's Endpoint (controller-runtime's plumbing, decoding in one pass) to its
// handlers, as `wincompat serve` wires them, and checks the answer the API server would get: it never
// panics (panic recovery is off, so a panic fails the fuzzer instead of becoming a 500); every answer is
// an AdmissionReview with a response; a review that parses is answered under its uid, in its version;
// a refusal says why; a JSON patch applies to the object sent, gives an object of its kind that grants
// nothing the sent one did not, and a reinvocation on it changes nothing more.
func FuzzHandler(f *testing.F) {
	var valid [][]byte
	inputs, _ := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	for _, in := range inputs {
		if strings.HasSuffix(in, ".out.yaml") {
			continue
		}
		c, _, gvk := loadCase(&testing.T{}, in)
		ns := "demo"
		switch {
		case c.Namespace.Labels[policy.LabelEnabled] != "true":
			ns = "elsewhere"
		case c.Namespace.Labels[policy.LabelDefaultOS] == "windows":
			ns = "default-os"
		case c.Namespace.Labels["pod-security.kubernetes.io/enforce"] == "restricted":
			ns = "restricted"
		}
		op, sub := "CREATE", ""
		if c.Operation == "UPDATE" {
			op = "UPDATE"
			if gvk.Kind == "Pod" {
				sub = "ephemeralcontainers"
			}
		}
		knobs := uint8(0)
		if gvk.Kind != "Pod" {
			knobs |= fuzzWorkloadPath
		}
		if c.Cluster == nil {
			knobs |= fuzzOffline
		}
		body := fuzzReview("admission.k8s.io/v1", "uid-"+filepath.Base(in), gvk.Group, gvk.Kind, resourceOf[gvk.Kind], sub, ns, op, c.Object)
		valid = append(valid, body)
		f.Add(knobs, body)
	}
	pod := []byte(windowsPodJSON)
	for _, body := range [][]byte{
		fuzzReview("admission.k8s.io/v1beta1", "beta", "", "Pod", "pods", "", "demo", "CREATE", pod),
		fuzzReview("admission.k8s.io/v1", "wrong-kind", "", "Service", "services", "", "demo", "CREATE", []byte(`{"kind":"Service","spec":{"ports":[{"port":80}]}}`)),
		fuzzReview("admission.k8s.io/v1", "kind-mismatch", "", "Service", "pods", "", "demo", "CREATE", pod),
		fuzzReview("admission.k8s.io/v1", "broken-ns", "", "Pod", "pods", "", "broken", "CREATE", pod),
		fuzzReview("admission.k8s.io/v1", "delete", "", "Pod", "pods", "", "demo", "DELETE", pod),
		fuzzReview("admission.k8s.io/v1", "null", "", "Pod", "pods", "", "demo", "CREATE", []byte("null")),
		fuzzReview("admission.k8s.io/v1", "huge-number", "", "Pod", "pods", "", "demo", "CREATE",
			[]byte(`{"spec":{"os":{"name":"windows"},"securityContext":{"runAsUser":123456789012345678901234567890},"containers":[{"name":"a"}]}}`)),
		fuzzReview("admission.k8s.io/v1", "big-int", "", "Pod", "pods", "", "demo", "CREATE",
			[]byte(`{"spec":{"os":{"name":"windows"},"activeDeadlineSeconds":9007199254740993,"tolerations":[{"key":"k","operator":"Exists","tolerationSeconds":9223372036854775807}],"containers":[{"name":"a","securityContext":{"runAsUser":1e3}}]}}`)),
		fuzzReview("admission.k8s.io/v1", "duplicate-key", "", "Pod", "pods", "", "demo", "CREATE",
			[]byte(`{"spec":{"os":{"name":"windows"},"containers":[{"name":"a","securityContext":{"privileged":false},"securityContext":{"privileged":true}}]}}`)),
		fuzzReview("admission.k8s.io/v1", "deep", "", "Pod", "pods", "", "demo", "CREATE",
			[]byte(`{"spec":{"os":{"name":"windows"},"containers":[{"name":"a"}]},"x":`+strings.Repeat("[", 10001)+strings.Repeat("]", 10001)+`}`)),
		fuzzReview("admission.k8s.io/v1", "unknown-fields", "", "Pod", "pods", "", "demo", "CREATE",
			[]byte(`{"spec":{"os":{"name":"windows"},"futureField":{"privileged":true},"containers":[{"name":"a","securityContext":{"runAsUser":1,"Privileged":true,"futureCap":["ALL"]}}]}}`)),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`),
		[]byte(`{"apiVersion":"v1","kind":"Pod"}`),
		[]byte(`{}`),
		[]byte(``),
		[]byte(`[]`),
		[]byte("\x00\xff"),
	} {
		f.Add(uint8(0), body)
		f.Add(uint8(fuzzWorkloadPath), body)
	}
	for _, body := range valid[:min(len(valid), 6)] {
		f.Add(uint8(0), body[:len(body)/2])
		f.Add(uint8(0), bytes.Replace(body, []byte(`"request"`), []byte(`"requets"`), 1))
	}

	current := &atomic.Pointer[policy.Policy]{}
	current.Store(policy.Default())
	cluster := &policy.Cluster{Builds: []string{"10.0.20348"}, RuntimeClasses: map[string]policy.RuntimeClass{
		"windows-2022": {NodeSelector: map[string]string{"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"}},
	}}
	metrics := NewMetrics(prometheus.NewRegistry())
	handlers := map[uint8]*Handler{}
	servers := map[uint8]http.Handler{}
	for knobs := range uint8(4) {
		cfg := Config{Policy: current, Namespaces: fuzzNamespaces, Version: "fuzz", Metrics: metrics, Log: logr.Discard()}
		if knobs&fuzzOffline == 0 {
			cfg.Cluster = func(context.Context) (*policy.Cluster, error) { return cluster, nil }
		}
		h := NewPodHandler(cfg)
		if knobs&fuzzWorkloadPath != 0 {
			h = NewWorkloadHandler(cfg)
		}
		handlers[knobs] = h
		e := NewEndpoint(h)
		e.webhook.RecoverPanic = new(false)
		e.webhook.LogConstructor = func(logr.Logger, *admission.Request) logr.Logger { return logr.Discard() }
		servers[knobs] = e
	}

	f.Fuzz(func(t *testing.T, knobs uint8, body []byte) {
		knobs &= fuzzWorkloadPath | fuzzOffline
		path := PodPath
		if knobs&fuzzWorkloadPath != 0 {
			path = WorkloadPath
		}
		httpReq := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		httpReq.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		servers[knobs].ServeHTTP(rec, httpReq)

		if rec.Code != http.StatusOK {
			if rec.Code < 400 {
				t.Fatalf("HTTP %d is neither an answer nor an error", rec.Code)
			}
			return
		}
		var answer struct {
			APIVersion string                         `json:"apiVersion"`
			Kind       string                         `json:"kind"`
			Response   *admissionv1.AdmissionResponse `json:"response"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Response == nil {
			t.Fatalf("the answer is not an AdmissionReview with a response (%v): %.500s", err, rec.Body.String())
		}
		resp := answer.Response
		if !resp.Allowed && (resp.Result == nil || resp.Result.Code < 400 || resp.Result.Message == "") {
			t.Fatalf("a refusal that does not say why: %+v", resp.Result)
		}
		if resp.Allowed && resp.Result != nil && resp.Result.Code != 0 && resp.Result.Code != http.StatusOK {
			t.Fatalf("allowed with result code %d", resp.Result.Code)
		}

		req, gvk, err := decodeReview(body)
		if err != nil {
			if resp.Allowed || resp.UID != "" || len(resp.Patch) > 0 {
				t.Fatalf("a review that does not parse (%v) was answered as one: %+v", err, resp)
			}
			return
		}
		if resp.UID != req.UID {
			t.Fatalf("answered under uid %q, the review's is %q", resp.UID, req.UID)
		}
		// A body that names no type is taken as a v1 review. One that names another (a bare Pod, say) is
		// answered under that name by the plumbing; the API server never sends one, and would not read
		// the answer.
		want := admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")
		if gvk != nil && !gvk.Empty() {
			want = *gvk
		}
		if answer.Kind != want.Kind || answer.APIVersion != want.GroupVersion().String() {
			t.Fatalf("answered as %s %s to a %s review", answer.APIVersion, answer.Kind, want)
		}
		if len(resp.Patch) == 0 {
			return
		}
		if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
			t.Fatalf("a patch with allowed=%v patchType=%v", resp.Allowed, resp.PatchType)
		}
		p, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("the patch does not decode: %v\n%s", err, resp.Patch)
		}
		patched, err := p.Apply(req.Object.Raw)
		if err != nil {
			t.Fatalf("the patch does not apply to the object sent: %v\npatch: %s\nobject: %s", err, resp.Patch, req.Object.Raw)
		}
		kindGVK := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
		k, ok := kinds[kindGVK]
		if !ok {
			t.Fatalf("a patch for %v, which wincompat does not handle", kindGVK)
		}
		in, out := k.newObject(), k.newObject()
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, in); err != nil {
			t.Fatal(err)
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(patched, out); err != nil {
			t.Fatalf("the patched object is no %s: %v\n%s", kindGVK.Kind, err, patched)
		}
		if before, after := podSpecOf(in), podSpecOf(out); before != nil && after != nil {
			if widened := grantstest.Widened(before, after); len(widened) > 0 {
				t.Fatalf("the patch widened privileges: %s\npatch: %s", strings.Join(widened, "; "), resp.Patch)
			}
		}
		again := admission.Request{AdmissionRequest: *req}
		again.Object = runtime.RawExtension{Raw: patched}
		second := handlers[knobs].Handle(context.Background(), again)
		if !second.Allowed {
			t.Fatalf("a reinvocation on the patched object was refused: %+v", second.Result)
		}
		if len(second.Patch) > 0 {
			// A second patch may guard (test operations) but must change nothing.
			p2, err := jsonpatch.DecodePatch(second.Patch)
			if err != nil {
				t.Fatalf("the reinvocation's patch does not decode: %v\n%s", err, second.Patch)
			}
			twice, err := p2.Apply(patched)
			if err != nil || !jsonpatch.Equal(twice, patched) {
				t.Fatalf("a reinvocation changed the patched object (%v): %s", err, second.Patch)
			}
		}
	})
}
