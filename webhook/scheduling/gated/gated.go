// Package gated is the leader's side of gated placement. Admission leaves a Windows pod whose images'
// registry has not answered behind policy.SchedulingGate, with the label policy.LabelGated; this
// controller watches those pods alone, reads their images with the server's resolver off the admission
// path, and removes the gate with the build decided (policy.Ungate): at once when every image answered,
// with the fallback build when the bound passes first. A gate of anyone else is never touched. It runs
// on the leader only; other replicas hold nothing of it.
package gated

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook"
)

// Controller removes wincompat's gate from gated pods.
type Controller struct {
	// Live reads pods and namespaces from the API server: the pod is written with a patch tested
	// against the version read, so it must be the current one.
	Live client.Reader
	// Writer patches pods.
	Writer client.Client
	// Namespaces reads a namespace from the manager's cache (Live when the cache has not seen it).
	Namespaces webhook.NamespaceReader
	// Images is the server's resolver; nil when the server reads no registry (then the images count
	// by their tags, as at admission).
	Images webhook.ImageResolver
	// Cluster gives the cluster's facts, as admission reads them.
	Cluster webhook.ClusterReader
	Policy  func() *policy.Policy
	Version string
	// Bound is how long a pod stays gated without every answer (--gate-timeout).
	Bound time.Duration
	// Wait bounds one read of a pod's images: the resolver's background timeout, past which no
	// lookup it started can answer.
	Wait     time.Duration
	Recorder events.EventRecorder
	Metrics  *Metrics
	Log      logr.Logger
	// Now is the clock of the bound; time.Now when nil.
	Now func() time.Time

	pods   cache.Cache
	synced toolscache.InformerSynced
	sweeps chan event.GenericEvent
}

// Workers is how many gated pods are handled at once. A worker mostly waits: on a read of a pending
// image, up to the resolver's admission budget (reads of one image join one lookup, and the resolver
// bounds the lookups in flight), then on the API server: so at least 16 pods a second are looked at
// while their registry is silent, and an answered pod takes milliseconds.
const Workers = 16

// gaugeEvery is how often the gauges are computed from the cache.
const gaugeEvery = 10 * time.Second

func (c *Controller) init() {
	c.sweeps = make(chan event.GenericEvent)
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Metrics.reset()
}

// SetupWithManager registers the controller, its cache of gated pods and its gauges with the leader's
// manager. The cache is the controller's own: the manager's pod cache selects other pods (the
// misplaced watcher's Windows pods), and one cache holds one selection per kind.
func (c *Controller) SetupWithManager(ctx context.Context, m ctrl.Manager) error {
	c.init()
	pods, err := cache.New(m.GetConfig(), cache.Options{Scheme: m.GetScheme(), Mapper: m.GetRESTMapper(), ByObject: CacheOptions()})
	if err != nil {
		return fmt.Errorf("the gated pods' cache: %w", err)
	}
	inf, err := pods.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("the gated pods' informer: %w", err)
	}
	c.pods, c.synced = pods, inf.HasSynced
	if err := m.Add(leaderOnly(pods)); err != nil {
		return err
	}
	if err := m.Add(manager.RunnableFunc(func(ctx context.Context) error {
		// A replica that stops leading stops counting: a stale count on a former leader would hold the
		// alert's max up.
		defer c.Metrics.reset()
		if !pods.WaitForCacheSync(ctx) {
			return nil
		}
		c.gaugeEvery(ctx, gaugeEvery)
		return nil
	})); err != nil {
		return err
	}
	if err := m.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !pods.WaitForCacheSync(ctx) {
			return nil
		}
		c.sweepEvery(ctx, sweepInterval)
		return nil
	})); err != nil {
		return err
	}
	// The pod leaves the selection when its gate goes: nothing to do then.
	noDeletes := predicate.TypedFuncs[*corev1.Pod]{
		CreateFunc:  func(event.TypedCreateEvent[*corev1.Pod]) bool { return true },
		UpdateFunc:  func(event.TypedUpdateEvent[*corev1.Pod]) bool { return true },
		DeleteFunc:  func(event.TypedDeleteEvent[*corev1.Pod]) bool { return false },
		GenericFunc: func(event.TypedGenericEvent[*corev1.Pod]) bool { return true },
	}
	return ctrl.NewControllerManagedBy(m).
		Named("gated-pods").
		WithOptions(controller.Options{SkipNameValidation: new(true), MaxConcurrentReconciles: Workers}).
		WatchesRawSource(source.Kind(pods, &corev1.Pod{}, &handler.TypedEnqueueRequestForObject[*corev1.Pod]{}, noDeletes)).
		WatchesRawSource(source.Channel(c.sweeps, &handler.EnqueueRequestForObject{})).
		Complete(c)
}

// leaderOnly runs r once this replica leads. A cache says it needs no Lease (the manager starts its
// own caches before the election), so added as it is, every replica would hold the gated pods.
func leaderOnly(r manager.Runnable) manager.Runnable {
	return manager.RunnableFunc(r.Start)
}

// HasSynced reports whether the gated pods' cache has listed what exists; false before SetupWithManager.
func (c *Controller) HasSynced() bool { return c.synced != nil && c.synced() }

// gaugeEvery sets the gauges from the cache now and every interval until ctx ends.
func (c *Controller) gaugeEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		c.gauge(ctx, c.pods)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gauge counts the gated pods of the cache pods.
func (c *Controller) gauge(ctx context.Context, pods client.Reader) {
	var list corev1.PodList
	if err := pods.List(ctx, &list); err != nil {
		return
	}
	now := c.Now()
	waiting, overdue, oldest := 0, 0, time.Duration(0)
	for i := range list.Items {
		p := &list.Items[i]
		if !policy.Gated(p) || p.DeletionTimestamp != nil {
			continue
		}
		a := age(p, now)
		oldest = max(oldest, a)
		if a >= c.Bound {
			overdue++
		} else {
			waiting++
		}
	}
	c.Metrics.set(waiting, overdue, oldest)
}
