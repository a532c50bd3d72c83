package perf

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf/load"
)

func TestChartPod(t *testing.T) {
	for _, windows := range []bool{true, false} {
		pod, err := TypedPod(ChartPod(2, "ns", windows))
		if err != nil {
			t.Fatalf("windows %v: %v", windows, err)
		}
		if len(pod.Spec.Containers) != 2 || pod.Namespace != "ns" {
			t.Errorf("windows %v: %d containers in namespace %q", windows, len(pod.Spec.Containers), pod.Namespace)
		}
		if declared := pod.Spec.OS != nil && pod.Spec.OS.Name == corev1.Windows; declared != windows {
			t.Errorf("windows %v: spec.os %v", windows, pod.Spec.OS)
		}
	}
}

func TestWindowsChartPod(t *testing.T) {
	pod, err := TypedPod(WindowsChartPod("ns", "r.example/a:1", "r.example/b:2"))
	if err != nil {
		t.Fatal(err)
	}
	var images []string
	for _, c := range pod.Spec.Containers {
		images = append(images, c.Image)
	}
	if !reflect.DeepEqual(images, []string{"r.example/a:1", "r.example/b:2"}) || pod.Spec.OS == nil || pod.Spec.OS.Name != corev1.Windows {
		t.Errorf("images %v, os %v", images, pod.Spec.OS)
	}
}

func TestCorpusPod(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := CorpusPod(filepath.Join(root, "..", "shared", "corpus", "charts", "ingress-nginx.yaml"), "ingress-nginx-controller", "ns")
	if err != nil {
		t.Fatal(err)
	}
	pod, err := TypedPod(raw)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.OS == nil || pod.Spec.OS.Name != corev1.Windows || len(pod.Spec.Containers) == 0 || pod.Namespace != "ns" {
		t.Errorf("pod %s/%s: os %v, %d containers", pod.Namespace, pod.Name, pod.Spec.OS, len(pod.Spec.Containers))
	}
}

func TestNewReview(t *testing.T) {
	pod := ChartPod(2, "ns", true)
	r, err := NewReview("chart", "", pod, "ns", admissionv1.Create, WithPatch, "mutated")
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]bool{}
	for _, body := range r.bodies {
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil {
			t.Fatal(err)
		}
		req := review.Request
		if req == nil || req.Operation != admissionv1.Create || req.Namespace != "ns" || req.Resource.Resource != "pods" || req.Kind.Kind != "Pod" {
			t.Fatalf("request %+v", req)
		}
		var got, want any
		_ = json.Unmarshal(req.Object.Raw, &got)
		_ = json.Unmarshal(pod, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("the review carries another object:\n%s", req.Object.Raw)
		}
		uids[string(req.UID)] = true
	}
	if len(uids) != bodiesPerReview {
		t.Errorf("%d distinct uids in %d bodies", len(uids), bodiesPerReview)
	}
}

func TestOneShotReview(t *testing.T) {
	pods := [][]byte{WindowsChartPod("ns", "a"), WindowsChartPod("ns", "b"), WindowsChartPod("ns", "c")}
	r, err := NewOneShotReview("fresh", "", pods, "ns", WithPatch, "mutated")
	if err != nil {
		t.Fatal(err)
	}
	c := &ReviewClient{next: make([]int, 2)}
	// Whichever worker asks, each pod goes once and in order; then the review says it ran out.
	for want, worker := range []int{1, 0, 1} {
		i, err := r.take(c, worker)
		if err != nil || i != want {
			t.Fatalf("take %d: body %d, %v", want, i, err)
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(r.bodies[i], &review); err != nil {
			t.Fatal(err)
		}
		var got, sent any
		_ = json.Unmarshal(review.Request.Object.Raw, &got)
		_ = json.Unmarshal(pods[want], &sent)
		if !reflect.DeepEqual(got, sent) {
			t.Errorf("body %d carries another pod", i)
		}
	}
	if _, err := r.take(c, 0); err != errNoneLeft {
		t.Errorf("a fourth take: %v, want %v", err, errNoneLeft)
	}
}

func TestWritePlot(t *testing.T) {
	res := &load.Result{Latency: load.NewHistogram(), SendLag: load.NewHistogram(), OK: 1000}
	for i := int64(1); i <= 1000; i++ {
		_ = res.Latency.RecordValue(100 + i)
	}
	phase := Phase{Summary: res.Summarize()}
	r := &Results{
		Reviews:   &ReviewResults{GOMAXPROCS: 1, LoadFraction: 0.7, Scenarios: []ReviewScenario{{Name: "a", Fixed: phase}}},
		APIServer: &APIResults{Creators: 8, Kinds: []APIKind{{Name: "b", Max: Comparison{With: phase, Without: phase}}}},
		Images:    &ImageResults{GOMAXPROCS: 1, Phases: []ImagePhase{{Scenario: "c", Load: "max", Phase: phase}, {Scenario: "c", Load: "10/s", Phase: phase}}},
	}
	path := filepath.Join(t.TempDir(), "latency.png")
	if err := WritePlot(r, path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() <= 2*b.Dy() {
		t.Errorf("three panels side by side in %v", b)
	}
}

// A review refused unread carries a status code and no uid: the code is what the error must name.
func TestStatusCode(t *testing.T) {
	for answer, want := range map[string]string{
		`{"response":{"uid":"","allowed":false,"status":{"metadata":{},"message":"over","code":429}}}`: " (code 429)",
		`{"response":{"uid":"x","allowed":false,"status":{"code":403}}}`:                               " (code 403)",
		`{"response":{"uid":"x","allowed":false}}`:                                                     "",
		`{"response":{"status":{"code":}}}`:                                                            "",
	} {
		if got := statusCode([]byte(answer)); got != want {
			t.Errorf("statusCode(%s) = %q, want %q", answer, got, want)
		}
	}
}

// policy/admissionpolicy measures its policies' runtime cost on a copy of the chart pod of the engine
// comparison (TestAdmissionPolicyRuntimeCost): it must stay that pod.
func TestChartPodTestdata(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "policy", "admissionpolicy", "testdata", "chartpod.json"))
	if err != nil {
		t.Fatal(err)
	}
	var copied, pod any
	if err := json.Unmarshal(raw, &copied); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ChartPod(2, "perf", true), &pod); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(copied, pod) {
		t.Errorf("policy/admissionpolicy/testdata/chartpod.json is not ChartPod(2, \"perf\", true); write that pod there")
	}
}
