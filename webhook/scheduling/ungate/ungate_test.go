package ungate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/pagedfake"
)

const foreignGate = "example.com/quota"

func gatedPod(ns, name string, gates ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name},
			Annotations: map[string]string{"team": "a"}},
		Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "c", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}}},
	}
	for _, g := range gates {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		if g == policy.SchedulingGate {
			pod.Labels[policy.LabelGated] = "true"
		}
	}
	return pod
}

// apiServer is the paged fake with what the API server does and the fake does not: a list by
// spec.nodeName (filtered after paging, so a page may hold fewer pods than the limit, as the API
// server's may). Every list must ask for the unbound pods alone: a gated pod is never bound.
type apiServer struct {
	client.Client
	t        *testing.T
	requests map[string]int
	// beforePatch, when set, runs before each patch reaches the fake.
	beforePatch func(ctx context.Context, pod client.Object) error
	// afterList, when set, runs after each list.
	afterList func(n int)
	lists     int
}

func newAPIServer(t *testing.T, objs ...client.Object) *apiServer {
	r, requests := pagedfake.New(objs...)
	return &apiServer{Client: r.(client.Client), t: t, requests: requests}
}

func (a *apiServer) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.FieldSelector == nil || lo.FieldSelector.String() != "spec.nodeName=" {
		a.t.Errorf("a list asks for %v, not for the unbound pods alone (spec.nodeName=)", lo.FieldSelector)
	}
	sel := lo.FieldSelector
	lo.FieldSelector = nil
	if err := a.Client.List(ctx, list, lo); err != nil {
		return err
	}
	a.lists++
	if a.afterList != nil {
		defer a.afterList(a.lists)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := items[:0]
	for _, o := range items {
		if sel.Matches(fields.Set{"spec.nodeName": o.(*corev1.Pod).Spec.NodeName}) {
			kept = append(kept, o)
		}
	}
	return meta.SetList(list, kept)
}

func (a *apiServer) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	if a.beforePatch != nil {
		if err := a.beforePatch(ctx, obj); err != nil {
			return err
		}
	}
	return a.Client.Patch(ctx, obj, p, opts...)
}

func (a *apiServer) pod(ns, name string) *corev1.Pod {
	a.t.Helper()
	var pod corev1.Pod
	if err := a.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		a.t.Fatal(err)
	}
	return &pod
}

func gateNames(pod *corev1.Pod) []string {
	var out []string
	for _, g := range pod.Spec.SchedulingGates {
		out = append(out, g.Name)
	}
	return out
}

// released: the pod lost wincompat's gate and label and nothing else, and its record says why.
func (a *apiServer) released(before *corev1.Pod) {
	a.t.Helper()
	pod := a.pod(before.Namespace, before.Name)
	want := slices.DeleteFunc(gateNames(before), func(g string) bool { return g == policy.SchedulingGate })
	if got := gateNames(pod); !slices.Equal(got, want) {
		a.t.Errorf("%s: gates %q, want %q", pod.Name, got, want)
	}
	if _, ok := pod.Labels[policy.LabelGated]; ok || pod.Labels["app"] != before.Name {
		a.t.Errorf("%s: labels %v, want app alone", pod.Name, pod.Labels)
	}
	if pod.Annotations["team"] != "a" || len(pod.Spec.Containers) != 1 || pod.Spec.OS == nil {
		a.t.Errorf("%s: changed beyond the gate: %+v", pod.Name, pod)
	}
	changes, err := policy.DecodeChanges(pod.Annotations[policy.AnnotationChanges])
	if err != nil || !slices.ContainsFunc(changes, func(c policy.Change) bool { return c.Rule == policy.RuleBuildGate && c.Reason == Reason }) {
		a.t.Errorf("%s: the record does not say why the gate went (%v): %v", pod.Name, err, pod.Annotations[policy.AnnotationChanges])
	}
}

// untouched: the pod is as it was stored.
func (a *apiServer) untouched(before *corev1.Pod) {
	a.t.Helper()
	pod := a.pod(before.Namespace, before.Name)
	if pod.ResourceVersion != "" && before.ResourceVersion != "" && pod.ResourceVersion != before.ResourceVersion {
		a.t.Errorf("%s: written, want untouched", pod.Name)
	}
	if !slices.Equal(gateNames(pod), gateNames(before)) || len(pod.Labels) != len(before.Labels) {
		a.t.Errorf("%s: changed: gates %q labels %v", pod.Name, gateNames(pod), pod.Labels)
	}
}

func stored(a *apiServer, pods ...*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		out[i] = a.pod(p.Namespace, p.Name)
	}
	return out
}

// TestRunReleasesEveryGatedPod: every pod carrying wincompat's gate, labelled or not, over several
// pages, loses it and its label, with the reason in its record; another gate stays; pods without
// wincompat's gate are never written; and Run ends after a second pass finds none.
func TestRunReleasesEveryGatedPod(t *testing.T) {
	ours := gatedPod("apps", "ours", policy.SchedulingGate)
	both := gatedPod("apps", "both", foreignGate, policy.SchedulingGate)
	unlabelled := gatedPod("apps", "unlabelled", policy.SchedulingGate)
	delete(unlabelled.Labels, policy.LabelGated)
	foreign := gatedPod("apps", "foreign", foreignGate)
	plain := gatedPod("apps", "plain")
	bound := gatedPod("apps", "bound")
	bound.Spec.NodeName = "win-1"
	other := gatedPod("other", "ours-elsewhere", policy.SchedulingGate)
	a := newAPIServer(t, ours, both, unlabelled, foreign, plain, bound, other)
	pods := stored(a, ours, both, unlabelled, foreign, plain, bound, other)

	res, err := Run(context.Background(), a, Options{PageSize: 2, Settle: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Released != 4 || res.Passes != 2 {
		t.Errorf("released %d pods in %d passes, want 4 in 2", res.Released, res.Passes)
	}
	for _, p := range []*corev1.Pod{pods[0], pods[1], pods[2], pods[6]} {
		a.released(p)
	}
	for _, p := range []*corev1.Pod{pods[3], pods[4], pods[5]} {
		a.untouched(p)
	}
	// Seven pods, two a page: four requests a pass.
	if got := a.requests["*v1.PodList"]; got != 8 {
		t.Errorf("%d list requests, want 8: four pages in each of two passes", got)
	}
}

// TestRunOneNamespace: -n releases the pods of that namespace alone.
func TestRunOneNamespace(t *testing.T) {
	here := gatedPod("apps", "here", policy.SchedulingGate)
	there := gatedPod("other", "there", policy.SchedulingGate)
	a := newAPIServer(t, here, there)
	pods := stored(a, here, there)
	res, err := Run(context.Background(), a, Options{Namespace: "apps", Settle: time.Millisecond})
	if err != nil || res.Released != 1 {
		t.Fatalf("released %d, %v; want 1", res.Released, err)
	}
	a.released(pods[0])
	a.untouched(pods[1])
}

// TestRunTakesAChangedPodAgain: a pod written between its list and its patch is not overwritten from
// what was listed; the next pass releases it as it is then.
func TestRunTakesAChangedPodAgain(t *testing.T) {
	pod := gatedPod("apps", "busy", policy.SchedulingGate)
	a := newAPIServer(t, pod)
	writes := 0
	a.beforePatch = func(ctx context.Context, obj client.Object) error {
		writes++
		if writes > 1 {
			return nil
		}
		// Its owner writes it meanwhile.
		p := a.pod(obj.GetNamespace(), obj.GetName())
		p.Annotations["owner"] = "was here"
		return a.Client.Update(ctx, p)
	}
	res, err := Run(context.Background(), a, Options{Settle: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Released != 1 || res.Passes != 3 || writes != 2 {
		t.Errorf("released %d in %d passes with %d patches, want 1 in 3 (conflict, released, none) with 2", res.Released, res.Passes, writes)
	}
	got := a.pod("apps", "busy")
	if policy.Gated(got) || got.Annotations["owner"] != "was here" {
		t.Errorf("gates %q, annotations %v: want released, the owner's write kept", gateNames(got), got.Annotations)
	}
}

// TestRunFindsAPodGatedLate: a pod stored gated by an admission still in flight when the gating stopped
// is found by a later pass, and Run goes on until a pass finds none.
func TestRunFindsAPodGatedLate(t *testing.T) {
	first := gatedPod("apps", "first", policy.SchedulingGate)
	late := gatedPod("apps", "late", policy.SchedulingGate)
	a := newAPIServer(t, first)
	a.afterList = func(n int) {
		if n == 1 {
			if err := a.Client.Create(context.Background(), late.DeepCopy()); err != nil {
				t.Error(err)
			}
		}
	}
	res, err := Run(context.Background(), a, Options{Settle: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Released != 2 || res.Passes != 3 {
		t.Errorf("released %d in %d passes, want 2 in 3", res.Released, res.Passes)
	}
	if p := a.pod("apps", "late"); policy.Gated(p) {
		t.Error("the pod gated late keeps the gate")
	}
}

// TestRunFailsWhenAPatchIsRefused: a refused patch (RBAC, an admission policy) ends Run with an error
// that names the pod, and a pod that went meanwhile is no error.
func TestRunFailsWhenAPatchIsRefused(t *testing.T) {
	gone := gatedPod("apps", "gone", policy.SchedulingGate)
	refused := gatedPod("apps", "refused", policy.SchedulingGate)
	a := newAPIServer(t, gone, refused)
	a.beforePatch = func(ctx context.Context, obj client.Object) error {
		if obj.GetName() == "gone" {
			return a.Client.Delete(ctx, a.pod("apps", "gone"))
		}
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, obj.GetName(), errors.New("denied"))
	}
	res, err := Run(context.Background(), a, Options{Settle: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "apps/refused") || strings.Contains(err.Error(), "gone") {
		t.Fatalf("err %v, want the refused pod named, not the deleted one", err)
	}
	if res.Released != 0 || res.Passes != 1 {
		t.Errorf("released %d in %d passes, want 0 in 1", res.Released, res.Passes)
	}
}

// TestRunEndsWithItsContext: pods that stay gated (re-gated as fast as they are released) do not keep
// Run forever.
func TestRunEndsWithItsContext(t *testing.T) {
	a := newAPIServer(t, gatedPod("apps", "again", policy.SchedulingGate))
	a.afterList = func(int) {
		_ = a.Client.Create(context.Background(), gatedPod("apps", "again-"+time.Now().Format("150405.000000000"), policy.SchedulingGate))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, a, Options{Settle: 5 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's deadline", err)
	}
}
