package gated

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/wincompat/wincompat/policy"
)

const (
	optedIn    = "apps"
	notOptedIn = "other"
	heldBack   = "registry.example/team/app:ltsc2019" // its index holds only a 2022 entry
	otherGate  = "example.com/quota"
	testBound  = 3 * time.Minute
)

var created = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// resolver answers from answers; an image it has no answer for is pending, as a registry that has not
// answered within the admission budget.
type resolver struct {
	answers map[string]policy.Image
	asked   int
}

func (r *resolver) Lookup(_ context.Context, req policy.ImageRequest) map[string]policy.Image {
	r.asked++
	out := map[string]policy.Image{}
	for _, image := range req.Images {
		if a, ok := r.answers[image]; ok {
			out[image] = a
		} else {
			out[image] = policy.Image{Err: "registry.example: no answer within 1s", Pending: true}
		}
	}
	return out
}

func (r *resolver) Warm(policy.ImageRequest) map[string]policy.Image { return nil }

// answered is the registry's answer for heldBack.
func answered() *resolver {
	return &resolver{answers: map[string]policy.Image{heldBack: {Digest: "sha256:1", Platforms: []policy.Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.2227"}}}}}
}

// gatedPod is a pod as admission stores it behind the gate: no build pin, the gate and its label.
func gatedPod(name, ns string, gates ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-uid"), CreationTimestamp: metav1.NewTime(created),
			Labels:      map[string]string{policy.LabelGated: "true", policy.LabelOS: "windows"},
			Annotations: map[string]string{policy.AnnotationVersion: "v1"}},
		Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, NodeSelector: map[string]string{corev1.LabelOSStable: "windows"},
			Containers: []corev1.Container{{Name: "app", Image: heldBack}}},
	}
	for _, g := range gates {
		p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
	}
	return p
}

type harness struct {
	c       *Controller
	client  client.Client
	events  *events.FakeRecorder
	patches int
}

// newHarness is a controller over a fake API server holding pods, an opted-in and another namespace,
// and a cluster of 2019 and 2025 nodes; beforePatch, when set, runs before each patch reaches it.
func newHarness(t *testing.T, images *resolver, now time.Time, beforePatch func(client.WithWatch, client.Patch) error, pods ...*corev1.Pod) *harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: optedIn, Labels: map[string]string{policy.LabelEnabled: "true"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: notOptedIn}},
	}
	for _, p := range pods {
		objs = append(objs, p)
	}
	h := &harness{events: events.NewFakeRecorder(10)}
	h.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			h.patches++
			if beforePatch != nil {
				if err := beforePatch(c, p); err != nil {
					return err
				}
			}
			return c.Patch(ctx, obj, p, opts...)
		},
	}).Build()
	cluster := &policy.Cluster{Builds: []string{"10.0.17763", "10.0.26100"}}
	h.c = &Controller{Live: h.client, Writer: h.client, Namespaces: h.client, Cluster: func(context.Context) (*policy.Cluster, error) { return cluster, nil },
		Policy: policy.Default, Version: "v1", Bound: testBound, Wait: 10 * time.Second, Recorder: h.events, Metrics: NewMetrics(prometheus.NewRegistry()),
		Log: logr.Discard(), Now: func() time.Time { return now }}
	if images != nil {
		h.c.Images = images
	}
	h.c.init()
	return h
}

func (h *harness) reconcile(t *testing.T, name, ns string) reconcile.Result {
	t.Helper()
	res, err := h.c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (h *harness) pod(t *testing.T, name, ns string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func (h *harness) event(t *testing.T) string {
	t.Helper()
	select {
	case e := <-h.events.Events:
		return e
	default:
		t.Fatal("no Event recorded")
		return ""
	}
}

func (h *harness) noEvent(t *testing.T) {
	t.Helper()
	select {
	case e := <-h.events.Events:
		t.Fatalf("unexpected Event %q", e)
	default:
	}
}

func gates(p *corev1.Pod) []string {
	var out []string
	for _, g := range p.Spec.SchedulingGates {
		out = append(out, g.Name)
	}
	return out
}

func recorded(t *testing.T, p *corev1.Pod, rule policy.Rule) []policy.Change {
	t.Helper()
	changes, err := policy.DecodeChanges(p.Annotations[policy.AnnotationChanges])
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(changes, func(c policy.Change) bool { return c.Rule != rule })
}

// TestForeignGateUntouched: a pod held only by another's gate, even with wincompat's label, is not
// written, nor are its images read.
func TestForeignGateUntouched(t *testing.T) {
	images := answered()
	h := newHarness(t, images, created.Add(time.Hour), nil, gatedPod("theirs", optedIn, otherGate))
	if res := h.reconcile(t, "theirs", optedIn); res != (reconcile.Result{}) {
		t.Errorf("result %+v, want none", res)
	}
	if h.patches != 0 || images.asked != 0 {
		t.Errorf("%d patches, %d lookups: want none", h.patches, images.asked)
	}
	if got := gates(h.pod(t, "theirs", optedIn)); !slices.Equal(got, []string{otherGate}) {
		t.Errorf("gates %v", got)
	}
	h.noEvent(t)
}

// TestDecided: the registry answered; the build the answer gives is pinned, wincompat's gate and label
// go, another's gate stays, and the Event says which build and from where.
func TestDecided(t *testing.T) {
	h := newHarness(t, answered(), created.Add(4*time.Second), nil, gatedPod("app", optedIn, otherGate, policy.SchedulingGate))
	if res := h.reconcile(t, "app", optedIn); res != (reconcile.Result{}) {
		t.Errorf("result %+v, want none", res)
	}
	p := h.pod(t, "app", optedIn)
	if got := gates(p); !slices.Equal(got, []string{otherGate}) {
		t.Errorf("gates %v, want only %s", got, otherGate)
	}
	if _, ok := p.Labels[policy.LabelGated]; ok {
		t.Error("the gated label is still there")
	}
	if b, s := p.Annotations[policy.AnnotationBuild], p.Annotations[policy.AnnotationBuildSource]; b != "10.0.26100" || s != policy.SourceImageManifest {
		t.Errorf("build %q from %q, want 10.0.26100 from %s", b, s, policy.SourceImageManifest)
	}
	if got := p.Spec.NodeSelector[corev1.LabelWindowsBuild]; got != "10.0.26100" {
		t.Errorf("nodeSelector build %q", got)
	}
	if len(recorded(t, p, policy.RuleBuildGate)) == 0 {
		t.Error("no build-gate entry in the record")
	}
	if e := h.event(t); !strings.HasPrefix(e, "Normal "+ReasonDecided+" build 10.0.26100 from image-manifest") || !strings.Contains(e, "waited 4s") {
		t.Errorf("Event %q", e)
	}
	if got := histogramCount(t, h.c.Metrics, outcomeDecided); got != 1 {
		t.Errorf("%d decided observations, want 1", got)
	}
}

// TestPendingWaits: within the bound, a pod whose registry has not answered is read again later, never
// past the bound, and not written.
func TestPendingWaits(t *testing.T) {
	h := newHarness(t, &resolver{}, created.Add(testBound-2*time.Second), nil, gatedPod("app", optedIn, policy.SchedulingGate))
	res := h.reconcile(t, "app", optedIn)
	if res.RequeueAfter <= 0 || res.RequeueAfter > 2*time.Second {
		t.Errorf("read again after %v, want within the 2s left of the bound", res.RequeueAfter)
	}
	if h.patches != 0 {
		t.Errorf("%d patches, want none", h.patches)
	}
	h.noEvent(t)
}

// TestFallbackAtBound: past the bound without an answer, the gate goes with the fallback build (the
// tag's), the record says why, and a Warning Event names the bound.
func TestFallbackAtBound(t *testing.T) {
	h := newHarness(t, &resolver{}, created.Add(testBound), nil, gatedPod("app", optedIn, policy.SchedulingGate))
	if res := h.reconcile(t, "app", optedIn); res != (reconcile.Result{}) {
		t.Errorf("result %+v, want none", res)
	}
	p := h.pod(t, "app", optedIn)
	if policy.Gated(p) {
		t.Fatal("still gated past the bound")
	}
	if s := p.Annotations[policy.AnnotationBuildSource]; s == "" || s == policy.SourceImageManifest {
		t.Errorf("build source %q, want a fallback one", s)
	}
	if !slices.ContainsFunc(recorded(t, p, policy.RuleBuildGate), func(c policy.Change) bool { return strings.Contains(c.Reason, "within 3m0s") }) {
		t.Errorf("no build-gate entry names the bound: %v", recorded(t, p, policy.RuleBuildGate))
	}
	if e := h.event(t); !strings.HasPrefix(e, "Warning "+ReasonFallback+" no answer from the registry within 3m0s: build ") {
		t.Errorf("Event %q", e)
	}
	if got := histogramCount(t, h.c.Metrics, outcomeFallback); got != 1 {
		t.Errorf("%d fallback observations, want 1", got)
	}
}

// TestFailedAnswerFallsBackAtOnce: a registry that answered with an error gives no build: the gate goes
// at once, the build from the other sources, and the Warning quotes the failure.
func TestFailedAnswerFallsBackAtOnce(t *testing.T) {
	images := &resolver{answers: map[string]policy.Image{heldBack: {Err: "registry.example: unauthorized"}}}
	h := newHarness(t, images, created.Add(2*time.Second), nil, gatedPod("app", optedIn, policy.SchedulingGate))
	h.reconcile(t, "app", optedIn)
	p := h.pod(t, "app", optedIn)
	if policy.Gated(p) || p.Annotations[policy.AnnotationBuildSource] == policy.SourceImageManifest {
		t.Fatalf("gates %v, build source %q", gates(p), p.Annotations[policy.AnnotationBuildSource])
	}
	if e := h.event(t); !strings.HasPrefix(e, "Warning "+ReasonFallback+" no build from the registry, which answered: registry.example: unauthorized") {
		t.Errorf("Event %q", e)
	}
}

// TestReleasedOutOfScope: a gated pod whose namespace is not opted in (any more) is released at once:
// the gate goes, nothing is pinned, its images are not read.
func TestReleasedOutOfScope(t *testing.T) {
	images := answered()
	h := newHarness(t, images, created.Add(time.Second), nil, gatedPod("app", notOptedIn, policy.SchedulingGate))
	h.reconcile(t, "app", notOptedIn)
	p := h.pod(t, "app", notOptedIn)
	if policy.Gated(p) || p.Labels[policy.LabelGated] != "" {
		t.Fatalf("gates %v, labels %v: want wincompat's gone", gates(p), p.Labels)
	}
	if _, pinned := p.Spec.NodeSelector[corev1.LabelWindowsBuild]; pinned || p.Annotations[policy.AnnotationBuild] != "" {
		t.Errorf("pinned: %v %v", p.Spec.NodeSelector, p.Annotations)
	}
	if images.asked != 0 {
		t.Errorf("%d lookups for a pod out of scope", images.asked)
	}
	if e := h.event(t); !strings.HasPrefix(e, "Normal "+ReasonReleased+" gate removed without a build decision: ") {
		t.Errorf("Event %q", e)
	}
}

// TestConflictRetried: a pod changed between the read and the write is not overwritten: the patch's
// test of the version fails, the pod is read again soon, and the next pass removes the gate keeping the
// change.
func TestConflictRetried(t *testing.T) {
	changedOnce := false
	change := func(c client.WithWatch, _ client.Patch) error {
		if changedOnce {
			return nil
		}
		changedOnce = true
		var p corev1.Pod
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: optedIn, Name: "app"}, &p); err != nil {
			panic(err)
		}
		p.Labels["team"] = "web"
		return c.Update(context.Background(), &p)
	}
	h := newHarness(t, answered(), created.Add(2*time.Second), change, gatedPod("app", optedIn, policy.SchedulingGate))
	if res := h.reconcile(t, "app", optedIn); res.RequeueAfter != conflictRetry {
		t.Fatalf("result %+v after a concurrent change, want a retry after %v", res, conflictRetry)
	}
	if p := h.pod(t, "app", optedIn); !policy.Gated(p) {
		t.Fatal("the stale write went through")
	}
	h.noEvent(t)
	h.reconcile(t, "app", optedIn)
	p := h.pod(t, "app", optedIn)
	if policy.Gated(p) || p.Labels["team"] != "web" || p.Annotations[policy.AnnotationBuild] != "10.0.26100" {
		t.Errorf("after the retry: gates %v, labels %v, build %q", gates(p), p.Labels, p.Annotations[policy.AnnotationBuild])
	}
	if e := h.event(t); !strings.HasPrefix(e, "Normal "+ReasonDecided) {
		t.Errorf("Event %q", e)
	}
}

// refusePins stands for an admission policy that refuses any write pinning a build.
func refusePins(_ client.WithWatch, p client.Patch) error {
	data, err := p.Data(nil)
	if err != nil {
		return err
	}
	if strings.Contains(string(data), "nodeSelector") {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "app", errors.New("denied by an admission policy"))
	}
	return nil
}

// TestRefusedWriteRetried: within the bound, a decision the API server refuses is recorded as a Warning
// and tried again; the pod keeps its gate.
func TestRefusedWriteRetried(t *testing.T) {
	h := newHarness(t, answered(), created.Add(2*time.Second), refusePins, gatedPod("app", optedIn, policy.SchedulingGate))
	if _, err := h.c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: optedIn, Name: "app"}}); err == nil {
		t.Fatal("no error for a refused write: it would not be tried again")
	}
	if !policy.Gated(h.pod(t, "app", optedIn)) {
		t.Error("ungated by a refused write")
	}
	if e := h.event(t); !strings.HasPrefix(e, "Warning "+ReasonUngateFailed+" could not remove the gate") || !strings.Contains(e, "denied by an admission policy") {
		t.Errorf("Event %q", e)
	}
}

// TestRefusedWriteReleasedAtBound: past the bound, a pod whose decision cannot be written is not kept
// gated: the gate alone goes, and the Event says why.
func TestRefusedWriteReleasedAtBound(t *testing.T) {
	h := newHarness(t, answered(), created.Add(testBound+time.Second), refusePins, gatedPod("app", optedIn, policy.SchedulingGate))
	h.reconcile(t, "app", optedIn)
	p := h.pod(t, "app", optedIn)
	if !withoutGate(p) || p.Annotations[policy.AnnotationBuild] != "" {
		t.Fatalf("gates %v, labels %v, build %q: want released, nothing pinned", gates(p), p.Labels, p.Annotations[policy.AnnotationBuild])
	}
	if e := h.event(t); !strings.HasPrefix(e, "Normal "+ReasonReleased+" gate removed without a build decision: the write of the build decided was refused") {
		t.Errorf("Event %q", e)
	}
}

func withoutGate(p *corev1.Pod) bool {
	_, labelled := p.Labels[policy.LabelGated]
	return !policy.Gated(p) && !labelled
}

// TestGauges: pods within the bound wait, those past it are overdue; a pod without wincompat's gate
// counts for neither.
func TestGauges(t *testing.T) {
	now := created.Add(testBound + time.Minute)
	young := gatedPod("young", optedIn, policy.SchedulingGate)
	young.CreationTimestamp = metav1.NewTime(now.Add(-time.Second))
	h := newHarness(t, nil, now, nil, young, gatedPod("old", optedIn, policy.SchedulingGate), gatedPod("theirs", optedIn, otherGate))
	h.c.gauge(context.Background(), h.client)
	for state, want := range map[string]float64{stateWaiting: 1, stateOverdue: 1} {
		if got := testutil.ToFloat64(h.c.Metrics.pods.WithLabelValues(state)); got != want {
			t.Errorf("%s: %v, want %v", state, got, want)
		}
	}
	if got := testutil.ToFloat64(h.c.Metrics.oldest); got != (testBound + time.Minute).Seconds() {
		t.Errorf("oldest %vs", got)
	}
	h.c.Metrics.reset()
	if got := testutil.ToFloat64(h.c.Metrics.pods.WithLabelValues(stateOverdue)); got != 0 {
		t.Errorf("overdue %v after reset", got)
	}
}

// TestCacheOnLeaderOnly: the cache of gated pods runs in the manager's group of runnables that start
// once the Lease is held, never with the caches every replica starts.
func TestCacheOnLeaderOnly(t *testing.T) {
	c, err := cache.New(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{Scheme: clientgoscheme.Scheme, Mapper: meta.NewDefaultRESTMapper(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := any(c).(manager.LeaderElectionRunnable); !ok || l.NeedLeaderElection() {
		t.Fatal("a cache now needs the Lease by itself: leaderOnly may go")
	}
	if l, ok := leaderOnly(c).(manager.LeaderElectionRunnable); ok && !l.NeedLeaderElection() {
		t.Error("the gated pods' cache would start on every replica")
	}
}

// TestCacheKeepsLittle: the cache keeps of a gated pod what the controller reads, whatever else it holds.
func TestCacheKeepsLittle(t *testing.T) {
	p := gatedPod("app", optedIn, strings.Repeat("x", 60)+".example.com/gate", policy.SchedulingGate)
	p.Annotations["big"] = strings.Repeat("y", 1<<20)
	p.Labels["team"] = "web"
	kept := keptPod(p)
	if len(kept.Annotations) != 0 || len(kept.Labels) != 1 || !slices.Equal(gates(kept), []string{policy.SchedulingGate}) || len(kept.Spec.Containers) != 0 {
		t.Errorf("kept %+v", kept)
	}
	if !kept.CreationTimestamp.Equal(&p.CreationTimestamp) || kept.UID != p.UID || kept.Name != p.Name {
		t.Error("lost what the controller reads")
	}
}

// TestRetryAfter: from a second up to 15s, never past the bound.
func TestRetryAfter(t *testing.T) {
	for _, c := range []struct{ age, left, want time.Duration }{
		{0, time.Minute, time.Second},
		{20 * time.Second, time.Minute, 5 * time.Second},
		{2 * time.Minute, time.Minute, 15 * time.Second},
		{2 * time.Minute, 3 * time.Second, 3 * time.Second},
	} {
		if got := retryAfter(c.age, c.left); got != c.want {
			t.Errorf("retryAfter(%v, %v) = %v, want %v", c.age, c.left, got, c.want)
		}
	}
}

func histogramCount(t *testing.T, m *Metrics, outcome string) uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.duration)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return metric.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
