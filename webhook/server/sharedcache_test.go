package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
)

// TestLeaderSharesTheReplicasCaches: issue 41. The leader's manager reads Nodes (and Namespaces and
// RuntimeClasses) from the informers every replica already runs, not from caches of its own, keeps only
// pods in its own, and when its term ends the handlers its controllers added are gone: a replica that
// leads many times neither holds a second copy of the nodes nor keeps a former term's handlers.
func TestLeaderSharesTheReplicasCaches(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubefake.NewClientset()
	nodes := toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Nodes().Watch(ctx, o)
		},
	}, cs), &corev1.Node{}, 0, toolscache.Indexers{})
	go nodes.RunWithContext(ctx)
	nodeGVK := schema.GroupVersionKind{Version: "v1", Kind: "Node"}
	shared := &informertest.FakeInformers{Scheme: scheme, InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{nodeGVK: nodes}}
	own := &informertest.FakeInformers{Scheme: scheme}
	term := newSharedKinds(own, shared, scheme)

	inf, err := term.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int32
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { seen.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	if _, err := term.GetInformer(ctx, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := own.InformersByGVK[nodeGVK]; ok {
		t.Error("the leader's cache made a Node informer of its own")
	}
	if _, ok := own.InformersByGVK[schema.GroupVersionKind{Version: "v1", Kind: "Pod"}]; !ok {
		t.Error("the leader's pod informer is not in its own cache")
	}
	if err := term.RemoveInformer(ctx, &corev1.Node{}); err != nil || shared.InformersByGVK[nodeGVK] == nil {
		t.Errorf("the leader removed the replica's Node informer (%v)", err)
	}

	create := func(name string) {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("during")
	waitFor(t, func() bool { return seen.Load() == 1 }, "the term's handler sees a node added while it leads")
	termCtx, endTerm := context.WithCancel(ctx)
	endTerm()
	if err := term.Start(termCtx); err != nil {
		t.Fatal(err)
	}
	create("after")
	time.Sleep(300 * time.Millisecond) // long enough for the informer to deliver it
	if n := seen.Load(); n != 1 {
		t.Errorf("after its term the handler saw %d nodes added, want 1 (the one added during it)", n)
	}
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("timed out: " + what)
}
