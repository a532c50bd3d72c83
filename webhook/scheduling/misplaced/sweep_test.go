package misplaced

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/inventory"
)

// TestSweepFindsUnlabelledWindowsPods: issue 41. The leader caches only pods labelled
// wincompat.io/os=windows; a Windows pod admitted before wincompat was installed has no label, and is
// found by the sweep of Windows nodes, then judged from the API server like a cached one.
func TestSweepFindsUnlabelledWindowsPods(t *testing.T) {
	labelled := failingState(misplacedPod("labelled"))
	labelled.Labels = map[string]string{policy.LabelOS: string(corev1.Windows)}
	before := failingState(misplacedPod("before-install"))
	notOptedIn := failingState(misplacedPod("not-opted-in"))
	notOptedIn.Namespace = "elsewhere"
	linux := misplacedPod("linux")
	linux.Annotations, linux.Spec.OS = nil, &corev1.PodOS{Name: corev1.Linux}
	onLinuxNode := failingState(misplacedPod("on-linux-node"))
	onLinuxNode.Spec.NodeName = "linux-1"

	w, _ := newTestWatcher(t)
	// The API server: the pods, listed by spec.nodeName as kube-apiserver indexes them.
	live := fake.NewClientBuilder().WithScheme(w.Client.Scheme()).
		WithObjects(labelled, before, notOptedIn, linux, onLinuxNode).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		Build()
	w.Live = live
	w.Nodes = func() *inventory.Snapshot {
		return &inventory.Snapshot{Builds: map[string]string{"win-2022": "10.0.20348", "win-2019": "10.0.17763"},
			ReadyBuilds: map[string]string{"win-2022": "10.0.20348", "win-2019": "10.0.17763"}}
	}
	w.sweeps = make(chan event.GenericEvent, 10)
	ctx := context.Background()
	if err := w.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	close(w.sweeps)
	var asked []string
	for e := range w.sweeps {
		asked = append(asked, e.Object.GetNamespace()+"/"+e.Object.GetName())
	}
	if want := []string{testNamespace + "/before-install"}; !slices.Equal(asked, want) {
		t.Fatalf("the sweep asked to judge %q, want %q: unlabelled Windows pods of opted-in namespaces on Windows nodes", asked, want)
	}
	key := types.NamespacedName{Namespace: testNamespace, Name: "before-install"}
	if _, err := w.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	cause, found := w.causes[key]
	w.mu.Unlock()
	if !found || cause != CauseOSMismatch {
		t.Errorf("the swept pod judged: cause %q, found %v; want %s", cause, found, CauseOSMismatch)
	}
	// Gone from the API server: forgotten, with its key.
	if err := live.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	_, stillSwept := w.swept[key]
	_, stillCounted := w.causes[key]
	w.mu.Unlock()
	if stillSwept || stillCounted {
		t.Errorf("a deleted swept pod is still kept: swept %v, counted %v", stillSwept, stillCounted)
	}
	// A pod the sweep did not find is never read from the API server: an Event about any pod name
	// costs no request.
	if _, err := w.pod(ctx, types.NamespacedName{Namespace: testNamespace, Name: "labelled"}); err == nil {
		t.Error("a pod neither cached nor swept was read from the API server")
	}
}
