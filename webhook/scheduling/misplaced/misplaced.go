// Package misplaced closes the loop after admission: it watches Windows pods in opted-in namespaces for
// the runtime's OS and build failures (the table of causes.go, read from container states and the
// kubelet's Warning Events), reports each such pod once with an Event naming the cause and the fix,
// keeps the wincompat_misplaced_pods gauge, and, when the operator opts in, deletes an eligible pod once
// so that its controller makes it again and admission places it right. It runs on the leader only.
package misplaced

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/truncate"
	"github.com/wincompat/wincompat/webhook/scheduling/inventory"
)

// Event reasons wincompat records on a misplaced pod and, when it deletes one, on its controller.
const (
	ReasonMismatch = "WindowsBuildMismatch"
	ReasonDeleted  = "WindowsBuildMismatchDeleted"
)

// Remediation is the opt-in deletion of misplaced pods.
type Remediation struct {
	Enabled bool
	// PerMinute is how many pods may be deleted per minute, cluster-wide (a token bucket of that size).
	PerMinute int
	// OwnerWindow: a controller whose pod was deleted has no other pod deleted within it, so a
	// controller whose new pods fail again is reported, not churned.
	OwnerWindow time.Duration
}

// Watcher is the controller. Client reads pods and namespaces from the leader manager's cache and
// deletes pods directly; Live reads the pods the cache does not hold (sweep.go).
type Watcher struct {
	Client client.Client
	Live   client.Reader
	// Nodes are the facts of the cluster's Windows nodes, kept by the inventory every replica has; nil
	// for none.
	Nodes       func() *inventory.Snapshot
	Policy      func() *policy.Policy
	Recorder    events.EventRecorder
	Log         logr.Logger
	Metrics     *Metrics
	Remediation Remediation
	// Events are the Events the watcher reads, indexed by pod and by deleted controller; SetupWithManager
	// fills it from its own informer (events.go).
	Events toolscache.Indexer
	// Now is the clock of the owner window; time.Now when nil.
	Now func() time.Time

	eventsSynced func() bool

	mu       sync.Mutex
	causes   map[types.NamespacedName]Cause
	counts   map[Cause]int                      // of causes, so that the gauge costs the same for 1 pod or 10,000
	swept    map[types.NamespacedName]types.UID // Windows pods without LabelOS, found by the last sweep
	sweeps   chan event.GenericEvent
	reported map[types.NamespacedName]types.UID  // the pods reported, so that each is reported once
	deleted  map[types.UID]time.Time             // controllers, by UID, and when one of their pods was deleted
	events   map[types.NamespacedName]*podEvents // what the Events of each pod judged tell
	limiter  *rate.Limiter
}

// podEvents is what the Events about one pod (of this UID) tell: the first failure of the table, and
// whether wincompat reported the pod. Read from the cache once per pod, then kept by eventRequests from
// each new Event, so that an Event costs the same however many came before it.
type podEvents struct {
	uid      types.UID
	failure  PodFailure
	failed   bool
	reported bool
}

func (pe *podEvents) add(e *corev1.Event) {
	if !pe.failed {
		pe.failure, pe.failed = EventFailure(e.Reason, e.Message)
	}
	pe.reported = pe.reported || e.Reason == ReasonMismatch
}

// Indexes of the Event cache: a pod's Events, and wincompat's records of deletions by controller.
const (
	eventIndex   = "involvedObject.uid"
	deletedIndex = "related.uid"
)

func (w *Watcher) init() {
	w.causes = map[types.NamespacedName]Cause{}
	w.counts = map[Cause]int{}
	w.swept = map[types.NamespacedName]types.UID{}
	w.sweeps = make(chan event.GenericEvent)
	w.reported = map[types.NamespacedName]types.UID{}
	w.deleted = map[types.UID]time.Time{}
	w.events = map[types.NamespacedName]*podEvents{}
	if w.Now == nil {
		w.Now = time.Now
	}
	if w.Remediation.Enabled {
		per := max(w.Remediation.PerMinute, 1)
		w.limiter = rate.NewLimiter(rate.Every(time.Minute/time.Duration(per)), per)
	}
	w.Metrics.reset()
}

// SetupWithManager registers the controller and its Event informer (events.go) with the leader's
// manager.
func (w *Watcher) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	w.init()
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("a client for Events: %w", err)
	}
	events := newEventInformer(cs, w.keepEvent)
	w.Events, w.eventsSynced = events.GetIndexer(), events.HasSynced
	// keepEvent reads namespaces from the manager's cache: the informer starts once it has synced, so
	// that no Event of an opted-in namespace is dropped as if it were not.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil // stopping
		}
		events.RunWithContext(ctx)
		return nil
	})); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		w.sweepEvery(ctx, sweepInterval)
		return nil
	})); err != nil {
		return err
	}
	toPod := handler.EnqueueRequestsFromMapFunc(w.eventRequests)
	// A replica that stops leading stops counting: the gauge is the leader's, and a stale count on a
	// former leader would hold the alert's max up.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		w.Metrics.reset()
		return nil
	})); err != nil {
		return err
	}
	// Only Windows pods (the cache keeps nothing else of the others) are judged.
	windows := predicate.NewPredicateFuncs(func(o client.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && windowsPod(p)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("misplaced-pods").
		WithOptions(controller.Options{SkipNameValidation: new(true)}).
		For(&corev1.Pod{}, builder.WithPredicates(windows)).
		WatchesRawSource(syncedInformer{&source.Informer{Informer: events, Handler: toPod}}).
		WatchesRawSource(source.Channel(w.sweeps, &handler.EnqueueRequestForObject{})).
		Complete(w)
}

// HasSynced reports whether the Events informer has listed what exists; false before SetupWithManager.
func (w *Watcher) HasSynced() bool { return w.eventsSynced != nil && w.eventsSynced() }

// eventRequests maps an Event to the pod it tells a failure of, and adds it to what the watcher knows
// of that pod's Events once it has read them.
func (w *Watcher) eventRequests(_ context.Context, o client.Object) []reconcile.Request {
	e, ok := o.(*corev1.Event)
	if !ok || e.InvolvedObject.Kind != "Pod" {
		return nil
	}
	key := types.NamespacedName{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name}
	w.mu.Lock()
	if pe, ok := w.events[key]; ok && pe.uid == e.InvolvedObject.UID {
		pe.add(e)
	}
	w.mu.Unlock()
	if !FailureEventReason(e.Reason) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// podEventsOf is what pod's Events tell, read from the cache the first time the pod is judged. The
// informer updates its store before it calls eventRequests, and both hold w.mu: an Event is either in
// the list read here or added to the result afterwards.
func (w *Watcher) podEventsOf(ctx context.Context, pod *corev1.Pod) (podEvents, error) {
	key := client.ObjectKeyFromObject(pod)
	w.mu.Lock()
	defer w.mu.Unlock()
	if pe, ok := w.events[key]; ok && pe.uid == pod.UID {
		return *pe, nil
	}
	list, err := w.eventsBy(eventIndex, string(pod.UID))
	if err != nil {
		return podEvents{}, err
	}
	pe := &podEvents{uid: pod.UID}
	for _, e := range list {
		pe.add(e)
	}
	// A pod without Events (most) is not remembered: reading its empty index again costs nothing, and
	// an entry for every Windows pod would grow the leader with them.
	if len(list) > 0 {
		w.events[key] = pe
	}
	return *pe, nil
}

// Reconcile judges one pod.
func (w *Watcher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod, err := w.pod(ctx, req.NamespacedName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			w.forget(req.NamespacedName, "")
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	pol := w.Policy()
	failure, fromStatus, nodeBuild, pl, reported, ok, err := w.judge(ctx, pol, pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !ok {
		w.forget(req.NamespacedName, pod.UID)
		return reconcile.Result{}, nil
	}
	fix := Explain(failure, pod.Spec.NodeName, nodeBuild, pl)
	if w.record(req.NamespacedName, pod.UID, failure.Row.Cause) && !reported {
		w.Log.Info("misplaced Windows pod", "pod", req.NamespacedName, "cause", failure.Row.Cause, "node", pod.Spec.NodeName)
		w.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonMismatch, "Detect", "%s", truncate.EventNote(fix))
	}
	// An Event is written by anyone who may create Events in the namespace: it is reported, never acted on.
	if !w.Remediation.Enabled || !fromStatus {
		return reconcile.Result{}, nil
	}
	return w.remediate(ctx, pod, fix)
}

// judge says whether pod failed for one of the table's reasons: in scope, bound to a node, a failure in
// its container states (fromStatus: written by its node alone) or its Events, corroborated where the row
// needs it. reported: an Event of wincompat's already says so (a leader before this one recorded it).
func (w *Watcher) judge(ctx context.Context, pol *policy.Policy, pod *corev1.Pod) (f PodFailure, fromStatus bool, nodeBuild string, pl Placement, reported, ok bool, err error) {
	if pod.Spec.NodeName == "" || !windowsPod(pod) {
		return
	}
	var ns corev1.Namespace
	if err = w.Client.Get(ctx, types.NamespacedName{Name: pod.Namespace}, &ns); err != nil {
		err = client.IgnoreNotFound(err)
		return
	}
	if pol.Scope(pod.Labels, policy.Namespace{Name: ns.Name, Labels: ns.Labels}) != policy.InScope {
		return
	}
	pe, err := w.podEventsOf(ctx, pod)
	if err != nil {
		return
	}
	f, fromStatus = PodStatusFailure(pod)
	if !fromStatus {
		if !pe.failed {
			return
		}
		f = pe.failure
	}
	reported = pe.reported
	nodes := w.nodes()
	nodeBuild = nodes.Builds[pod.Spec.NodeName]
	pl = PlacementOf(pol, pod, nodeBuild, nodes.ReadyBuilds)
	return f, fromStatus, nodeBuild, pl, reported, Corroborated(f, pl), nil
}

// remediate deletes pod once, when it is eligible, the bucket has a token and its controller had no pod
// deleted within the window; a pod that must wait is asked about again when a token is due.
//
// The pod's PodDisruptionBudget is asked first, by an eviction in dry run, then the pod is deleted with
// preconditions on the UID and resourceVersion that were judged. A real eviction would keep the budget
// without the short race between the two, but an eviction request shows admission the Eviction alone,
// never the pod, and the API server then deletes without asking admission again: the chart's
// ValidatingAdmissionPolicy could hold the account's evictions only to a namespace, so a stolen token
// could evict any pod there. A delete shows it the pod, and the policy allows deleting only a pod
// remediation would pick; evictions it allows only in dry run.
func (w *Watcher) remediate(ctx context.Context, pod *corev1.Pod, fix string) (reconcile.Result, error) {
	if why := RemediationBlock(pod); why != "" {
		w.Log.V(1).Info("misplaced pod left alone", "pod", client.ObjectKeyFromObject(pod), "why", why)
		return reconcile.Result{}, nil
	}
	owner := metav1.GetControllerOfNoCopy(pod)
	w.mu.Lock()
	now := w.Now()
	for uid, at := range w.deleted {
		if now.Sub(at) >= w.Remediation.OwnerWindow {
			delete(w.deleted, uid)
		}
	}
	_, recent := w.deleted[owner.UID]
	if !recent {
		before, err := w.deletedBefore(ctx, pod.Namespace, owner.UID, now)
		if err != nil {
			w.mu.Unlock()
			return reconcile.Result{}, err
		}
		if recent = before; recent {
			w.deleted[owner.UID] = now // from now: longer than from the Event, whose time is another leader's clock
		}
	}
	if recent {
		w.mu.Unlock()
		w.Metrics.deletion(outcomeOwnerWindow)
		return reconcile.Result{}, nil
	}
	r := w.limiter.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		w.mu.Unlock()
		w.Metrics.deletion(outcomeRateLimited)
		return reconcile.Result{RequeueAfter: delay}, nil
	}
	w.deleted[owner.UID] = now
	w.mu.Unlock()
	uid, version := pod.UID, pod.ResourceVersion
	judged := metav1.Preconditions{UID: &uid, ResourceVersion: &version}
	eviction := &policyv1.Eviction{DeleteOptions: &metav1.DeleteOptions{Preconditions: &judged}}
	err := w.Client.SubResource("eviction").Create(ctx, pod, eviction, client.DryRunAll)
	if err == nil {
		err = w.Client.Delete(ctx, pod, client.Preconditions(judged))
	}
	if err != nil {
		w.mu.Lock()
		delete(w.deleted, owner.UID)
		w.mu.Unlock()
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			return reconcile.Result{}, nil // gone, changed since it was judged, or replaced: judged anew
		case apierrors.IsTooManyRequests(err):
			// Its PodDisruptionBudget allows no disruption now; the budget's owner decides, not wincompat.
			w.Metrics.deletion(outcomeBudget)
			return reconcile.Result{RequeueAfter: budgetRetry}, nil
		}
		return reconcile.Result{}, err
	}
	w.Metrics.deletion(outcomeDeleted)
	w.Log.Info("deleted misplaced Windows pod for its controller to make again", "pod", client.ObjectKeyFromObject(pod), "controller", owner.Kind+"/"+owner.Name)
	note := "deleted so that " + owner.Kind + " " + owner.Name + " makes it again and admission places it: " + fix
	ref := &corev1.ObjectReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, Namespace: pod.Namespace, UID: owner.UID}
	// The pod's Event names its controller as related: the record a later leader reads the window from.
	w.Recorder.Eventf(pod, ref, corev1.EventTypeWarning, ReasonDeleted, "Delete", "%s", truncate.EventNote(note))
	w.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonDeleted, "Delete", "%s", truncate.EventNote("deleted pod "+pod.Name+": "+fix))
	return reconcile.Result{}, nil
}

// budgetRetry is how long a pod its PodDisruptionBudget protects waits before it is asked about again.
const budgetRetry = time.Minute

// deletedBefore reports whether wincompat's Events record the deletion of a pod of owner within the
// window: a leader keeps the window of the one before it, for as long as the API server keeps Events.
func (w *Watcher) deletedBefore(ctx context.Context, ns string, owner types.UID, now time.Time) (bool, error) {
	list, err := w.eventsBy(deletedIndex, string(owner))
	if err != nil {
		return false, err
	}
	for _, e := range list {
		if e.Namespace != ns {
			continue
		}
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.LastTimestamp.Time
		}
		if now.Sub(at) < w.Remediation.OwnerWindow {
			return true, nil
		}
	}
	return false, nil
}

// record notes pod as misplaced for cause; true the first time the pod (by UID) is reported.
func (w *Watcher) record(key types.NamespacedName, uid types.UID, cause Cause) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.causes[key]; !ok || old != cause {
		if ok {
			w.count(old, -1)
		}
		w.causes[key] = cause
		w.count(cause, 1)
	}
	first := w.reported[key] != uid
	w.reported[key] = uid
	return first
}

// forget drops a pod that is no longer misplaced; uid "" (the pod is gone) forgets its report and its
// Events too, so that the maps are bounded by the pods that exist. A pod that recovered keeps its report: it is not
// reported twice.
func (w *Watcher) forget(key types.NamespacedName, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cause, ok := w.causes[key]; ok {
		delete(w.causes, key)
		w.count(cause, -1)
	}
	if uid == "" {
		delete(w.reported, key)
		delete(w.events, key)
		delete(w.swept, key)
	}
}

// count moves the gauge of cause by delta. Callers hold w.mu.
func (w *Watcher) count(cause Cause, delta int) {
	w.counts[cause] += delta
	w.Metrics.set(cause, w.counts[cause])
}

// nodes are the Windows nodes' facts now.
func (w *Watcher) nodes() *inventory.Snapshot {
	if w.Nodes == nil {
		return &inventory.Snapshot{}
	}
	return w.Nodes()
}

// windowsPod: wincompat admitted it as a Windows pod, or it says it is one. CacheOptions keeps no more
// than the name of any other pod, so none of this holds for them.
func windowsPod(p *corev1.Pod) bool {
	if _, ok := p.Annotations[policy.AnnotationVersion]; ok {
		return true
	}
	return p.Spec.OS != nil && p.Spec.OS.Name == corev1.Windows || p.Spec.NodeSelector[corev1.LabelOSStable] == string(corev1.Windows)
}
