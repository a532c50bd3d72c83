package misplaced

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/wincompat/wincompat/policy"
)

const (
	testNamespace = "apps"
	osMismatch    = "Error: failed to create containerd task: failed to create shim task: hcs::CreateComputeSystem app: The container operating system does not match the host operating system.: unknown"
)

// writes counts what the watcher asked the API server to do to pods, and the Events it listed.
type writes struct{ deletes, evictions, dryEvictions, eventLists, eventsListed int }

// protectedPod is the name of a pod whose PodDisruptionBudget allows no disruption: the test API server
// answers an eviction of it 429, as kube-apiserver does.
const protectedPod = "protected"

// newTestWatcher is a watcher with remediation on, tokens to spare, over a fake API server holding objs
// and an opted-in namespace.
func newTestWatcher(t *testing.T, objs ...client.Object) (*Watcher, *writes) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace, Labels: map[string]string{policy.LabelEnabled: "true"}}}
	w := &writes{}
	// Events go to the watcher's own informer's store, as the informer keeps them; the rest to the API
	// server.
	store := &countingIndexer{Indexer: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, eventIndexers), counts: w}
	var others []client.Object
	for _, o := range objs {
		if e, ok := o.(*corev1.Event); ok {
			if err := store.Add(keptEvent(e)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		others = append(others, o)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(others, ns)...).
		WithInterceptorFuncs(interceptor.Funcs{
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if _, ok := obj.(*corev1.Pod); ok {
					w.deletes++
				}
				return c.Delete(ctx, obj, opts...)
			},
			SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
				if sub == "eviction" {
					var o client.SubResourceCreateOptions
					o.ApplyOptions(opts)
					switch {
					case len(o.DryRun) == 0:
						w.evictions++
					case obj.GetName() == protectedPod:
						return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
					default:
						w.dryEvictions++
						return nil // what kube-apiserver answers; the fake client would evict for real
					}
				}
				return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
			},
		}).Build()
	watcher := &Watcher{Client: c, Events: store, Policy: policy.Default, Recorder: events.NewFakeRecorder(100), Log: logr.Discard(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Remediation: Remediation{Enabled: true, PerMinute: 100, OwnerWindow: 10 * time.Minute}}
	watcher.init()
	return watcher, w
}

// misplacedPod is a Windows pod remediation may evict on every other count: a ReplicaSet's, its build
// chosen by wincompat from its 2019 image's tag, bound to a 2022 node.
func misplacedPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID(name + "-uid"),
			Annotations:     map[string]string{policy.AnnotationVersion: "v1", policy.AnnotationBuildSource: policy.SourceImage, policy.AnnotationBuild: "10.0.17763"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: types.UID(name + "-rs"), Controller: new(true)}}},
		Spec: corev1.PodSpec{NodeName: "win-2022", OS: &corev1.PodOS{Name: corev1.Windows},
			Containers: []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/servercore:ltsc2019"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func failingState(p *corev1.Pod) *corev1.Pod {
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: osMismatch}}}}
	return p
}

func running(p *corev1.Pod) *corev1.Pod {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	return p
}

// countingIndexer counts the Events the watcher reads from its store.
type countingIndexer struct {
	toolscache.Indexer
	counts *writes
}

func (c *countingIndexer) ByIndex(index, key string) ([]any, error) {
	objs, err := c.Indexer.ByIndex(index, key)
	c.counts.eventLists++
	c.counts.eventsListed += len(objs)
	return objs, err
}

// kubeletEvent is a Warning Event about p, as the kubelet writes one or anyone who may create Events
// forges one.
func kubeletEvent(p *corev1.Pod, name, reason, message string) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace}, Type: corev1.EventTypeWarning,
		Reason: reason, Message: message, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
}

// TestRemediationActsOnPodsOwnStates: issue 40, finding 3. A pod is deleted only when its own container
// states, which only its node writes, say it failed; never on an Event, never when it is Ready, never a
// Job's pod, and only after its PodDisruptionBudget allowed an eviction in dry run. It is never evicted
// for real: the chart's admission policy can judge a delete by the pod, an eviction only by its
// namespace.
func TestRemediationActsOnPodsOwnStates(t *testing.T) {
	jobPod := failingState(misplacedPod("job"))
	jobPod.OwnerReferences[0].APIVersion, jobPod.OwnerReferences[0].Kind = "batch/v1", "Job"
	readyButFailedBefore := running(misplacedPod("ready"))
	readyButFailedBefore.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Reason: "StartError", Message: osMismatch, ExitCode: 128}}
	for name, tc := range map[string]struct {
		pod        *corev1.Pod
		event      bool // a Warning Event Failed with the runtime's words about it
		wantDelete bool
	}{
		"a forged Event about a Running, Ready pod":    {running(misplacedPod("healthy")), true, false},
		"an Event alone about a pod that is not Ready": {misplacedPod("event-only"), true, false},
		"a Ready pod whose last state failed":          {readyButFailedBefore, false, false},
		"a Job's pod":                                  {jobPod, false, false},
		"its own state, but its budget is spent":       {failingState(misplacedPod(protectedPod)), false, false},
		"its own state, not Ready":                     {failingState(misplacedPod("misplaced")), false, true},
	} {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.pod}
			if tc.event {
				objs = append(objs, kubeletEvent(tc.pod, "forged", "Failed", "0xc0370101"))
			}
			w, did := newTestWatcher(t, objs...)
			if _, err := w.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tc.pod)}); err != nil {
				t.Fatal(err)
			}
			if did.evictions != 0 {
				t.Errorf("evicted the pod %d times: the chart's policy cannot tell which pod an eviction names", did.evictions)
			}
			if got := did.deletes == 1 && did.dryEvictions == 1; got != tc.wantDelete || did.deletes > did.dryEvictions {
				t.Errorf("%d deletes after %d evictions in dry run, want deleted %v (and never without its budget asked)", did.deletes, did.dryEvictions, tc.wantDelete)
			}
		})
	}
}

// TestWorkPerEventIsConstant: issue 40, finding 10. Each new Event about a Windows pod re-read and
// copied all that pod's Events, on the watcher's one worker: n Events cost n² copies. The watcher reads
// a pod's Events once, then learns of each new one from the Event itself, and still sees what it says.
func TestWorkPerEventIsConstant(t *testing.T) {
	ctx := context.Background()
	pod := misplacedPod("flooded")
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	const before, after = 50, 200
	objs := []client.Object{pod}
	for i := range before {
		objs = append(objs, kubeletEvent(pod, fmt.Sprintf("noise-%d", i), "Failed", "Error: ImagePullBackOff"))
	}
	w, did := newTestWatcher(t, objs...)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pod)}
	if _, err := w.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	seeded := did.eventsListed
	for i := range after {
		e := kubeletEvent(pod, fmt.Sprintf("more-%d", i), "Failed", "Error: ImagePullBackOff")
		if i == after-1 {
			e = kubeletEvent(pod, "sandbox", "FailedCreatePodSandBox", osMismatch)
		}
		if err := w.Events.Add(keptEvent(e)); err != nil {
			t.Fatal(err)
		}
		for _, r := range w.eventRequests(ctx, e) {
			if _, err := w.Reconcile(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if more := did.eventsListed - seeded; more > after {
		t.Errorf("%d more Events read for %d new ones: every new Event re-reads the pod's", more, after)
	}
	w.mu.Lock()
	cause, found := w.causes[req.NamespacedName]
	w.mu.Unlock()
	if !found || cause != CauseOSMismatch {
		t.Errorf("the last Event's failure not seen: cause %q, found %v", cause, found)
	}
}
