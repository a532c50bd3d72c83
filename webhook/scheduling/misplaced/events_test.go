package misplaced

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/wincompat/wincompat/policy"
)

// TestEventInformerKeepsOnlyWhatItReads: issue 40, finding 2. The watcher cached every Warning Event
// about a pod, cluster-wide: anyone who may create Events in any namespace could fill the leader. Its
// informer now keeps an Event only if the watcher reads its reason and its namespace opted in, whether
// the Event was there when the informer listed or arrived on its watch.
func TestEventInformerKeepsOnlyWhatItReads(t *testing.T) {
	w, _ := newTestWatcher(t) // testNamespace is opted in; "elsewhere" does not exist, so it is not
	about := func(ns string) corev1.ObjectReference {
		return corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p", UID: types.UID("u-" + ns)}
	}
	event := func(ns, name, reason string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.EventTypeWarning,
			Reason: reason, Message: "0xc0370101 " + strings.Repeat("x", 1<<20), InvolvedObject: about(ns)}
	}
	// Issue 41: a failure reason whose message tells no failure of the table (a Linux pod crashing, in
	// the same namespace) is not kept either.
	crashing := event(testNamespace, "listed-crashloop", "BackOff")
	crashing.Message = "Back-off restarting failed container app in pod web-0_apps"
	cs := kubefake.NewClientset(
		event(testNamespace, "listed-read", "Failed"),
		event(testNamespace, "listed-unread", "Scheduled"),
		event("elsewhere", "listed-elsewhere", "Failed"),
		crashing,
	)
	inf := newEventInformer(cs, w.keepEvent)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	for _, e := range []*corev1.Event{
		event(testNamespace, "watched-read", ReasonMismatch),
		event(testNamespace, "watched-unread", "Pulled"),
		event("elsewhere", "watched-elsewhere", "FailedCreatePodSandBox"),
	} {
		if _, err := cs.CoreV1().Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{testNamespace + "/listed-read", testNamespace + "/watched-read"}
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got = inf.GetStore().ListKeys()
		slices.Sort(got)
		if slices.Equal(got, want) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the informer keeps %q, want %q", got, want)
	}
	// A kept Event whose namespace then opts out still goes when it is deleted.
	optOut := &corev1.Namespace{}
	if err := w.Client.Get(ctx, types.NamespacedName{Name: testNamespace}, optOut); err != nil {
		t.Fatal(err)
	}
	delete(optOut.Labels, policy.LabelEnabled)
	if err := w.Client.Update(ctx, optOut); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Events(testNamespace).Delete(ctx, "listed-read", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want = want[1:]
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = inf.GetStore().ListKeys(); slices.Equal(got, want) {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the deletion the informer keeps %q, want %q", got, want)
	}
	for _, o := range inf.GetStore().List() {
		if e := o.(*corev1.Event); len(e.Message) > 64 {
			t.Errorf("%s kept a message of %d bytes", e.Name, len(e.Message))
		}
	}
}
