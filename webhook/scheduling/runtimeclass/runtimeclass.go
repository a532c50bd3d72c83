// Package runtimeclass keeps one RuntimeClass per Windows build of the policy's catalog, so that a pod
// naming windows-2022 lands on a Windows Server 2022 node without its author knowing node labels or
// taints. It runs in `wincompat serve` on the elected leader only; every replica serves admission.
package runtimeclass

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/inventory"
)

// Managed RuntimeClasses carry this label; wincompat never changes or deletes one without it.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "wincompat"
	buildLabel     = "wincompat.io/build"
)

// resync repairs drift the watches could miss (a lost event), at a cost of one cached list.
const resync = 10 * time.Minute

// Desired returns the RuntimeClasses the policy asks for. present lists the Windows builds that have at
// least one node; it matters only when the policy keeps classes for present builds alone.
func Desired(p *policy.Policy, present []string) []nodev1.RuntimeClass {
	var out []nodev1.RuntimeClass
	for _, b := range p.Builds {
		if b.RuntimeClass == "" {
			continue
		}
		if p.RuntimeClassesFor == policy.RuntimeClassesForPresent && !slices.Contains(present, b.Number) {
			continue
		}
		var tolerations []corev1.Toleration
		for _, t := range p.WindowsNodeTaints {
			tolerations = append(tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect})
		}
		out = append(out, nodev1.RuntimeClass{
			ObjectMeta: metav1.ObjectMeta{
				Name:   b.RuntimeClass,
				Labels: map[string]string{ManagedByLabel: ManagedByValue, buildLabel: b.Number},
			},
			Handler:    p.RuntimeClassHandler,
			Scheduling: &nodev1.Scheduling{NodeSelector: p.RuntimeClassNodeSelector(b), Tolerations: tolerations},
		})
	}
	return out
}

// Reconciler converges the cluster's RuntimeClasses on Desired. All events map to one request: the
// whole catalog is small, and reconciling it as a unit keeps the logic obvious.
type Reconciler struct {
	Client   client.Client
	Policy   func() *policy.Policy
	Recorder events.EventRecorder
	Log      logr.Logger
	// Conflicts is set to the number of catalog classes blocked by an unmanaged class of the same name.
	Conflicts prometheus.Gauge
	// Trigger, when set, asks for a reconcile (the policy's catalog changed).
	Trigger <-chan event.GenericEvent
}

var catalogRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "catalog"}}

// SetupWithManager registers the controller; it runs only on the leader.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toCatalog := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{catalogRequest}
	})
	// One reconcile at start, so the catalog appears even in a cluster with no Node or RuntimeClass to
	// send an event (a webhook hosted outside the cluster).
	start := make(chan event.GenericEvent, 1)
	start <- event.GenericEvent{}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("runtimeclasses").
		// The name is process-wide in controller-runtime; a second manager in the same process (tests,
		// an in-process restart) would otherwise be refused.
		WithOptions(controller.Options{SkipNameValidation: new(true)}).
		Watches(&nodev1.RuntimeClass{}, toCatalog).
		// A node's heartbeat, or a label or taint of no consequence here, is no reason to reconcile:
		// on 5,000 nodes those updates never stop.
		Watches(&corev1.Node{}, toCatalog, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				old, okOld := e.ObjectOld.(*corev1.Node)
				updated, okNew := e.ObjectNew.(*corev1.Node)
				return !okOld || !okNew || inventory.FactsChanged(old, updated)
			}})).
		WatchesRawSource(source.Channel(start, toCatalog))
	if r.Trigger != nil {
		b = b.WatchesRawSource(source.Channel(r.Trigger, toCatalog))
	}
	return b.Complete(r)
}

// Reconcile creates missing classes, repairs edited ones, removes managed classes the catalog no longer
// lists, and leaves every class it does not manage alone.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	p := r.Policy()
	present, err := presentBuilds(ctx, r.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	var existing nodev1.RuntimeClassList
	if err := r.Client.List(ctx, &existing); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing RuntimeClasses: %w", err)
	}
	byName := map[string]*nodev1.RuntimeClass{}
	for i := range existing.Items {
		byName[existing.Items[i].Name] = &existing.Items[i]
	}
	desired := Desired(p, present)
	conflicts := 0
	for i := range desired {
		want := &desired[i]
		have, ok := byName[want.Name]
		delete(byName, want.Name)
		switch {
		case !ok:
			if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return reconcile.Result{}, fmt.Errorf("creating RuntimeClass %s: %w", want.Name, err)
			}
			r.Log.Info("created RuntimeClass", "name", want.Name, "build", want.Labels[buildLabel])
		case have.Labels[ManagedByLabel] != ManagedByValue:
			conflicts++
			r.Log.Info("RuntimeClass exists and is not managed by wincompat; leaving it alone", "name", want.Name)
			r.Recorder.Eventf(have, nil, corev1.EventTypeWarning, "NotManaged", "Reconcile",
				"wincompat would manage RuntimeClass %s for Windows build %s, but it exists without %s=%s; wincompat leaves it alone and will not set it on pods unless its scheduling matches",
				want.Name, want.Labels[buildLabel], ManagedByLabel, ManagedByValue)
		case have.Handler != want.Handler:
			// The handler is immutable: replace the class.
			if err := r.Client.Delete(ctx, have, client.Preconditions{UID: &have.UID}); err != nil && !apierrors.IsNotFound(err) {
				return reconcile.Result{}, fmt.Errorf("replacing RuntimeClass %s: %w", want.Name, err)
			}
			if err := r.Client.Create(ctx, want); err != nil {
				return reconcile.Result{}, fmt.Errorf("replacing RuntimeClass %s: %w", want.Name, err)
			}
			r.Log.Info("replaced RuntimeClass with a new handler", "name", want.Name, "handler", want.Handler)
		case !equality.Semantic.DeepEqual(have.Scheduling, want.Scheduling) || !labelsInclude(have.Labels, want.Labels) || have.Overhead != nil:
			repaired := have.DeepCopy()
			repaired.Scheduling, repaired.Overhead = want.Scheduling, nil
			if repaired.Labels == nil {
				repaired.Labels = map[string]string{}
			}
			maps.Copy(repaired.Labels, want.Labels)
			if err := r.Client.Update(ctx, repaired); err != nil {
				return reconcile.Result{}, fmt.Errorf("repairing RuntimeClass %s: %w", want.Name, err)
			}
			r.Log.Info("repaired RuntimeClass", "name", want.Name)
		}
	}
	for _, stale := range byName {
		if stale.Labels[ManagedByLabel] != ManagedByValue {
			continue
		}
		if err := r.Client.Delete(ctx, stale, client.Preconditions{UID: &stale.UID}); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("deleting RuntimeClass %s: %w", stale.Name, err)
		}
		r.Log.Info("deleted RuntimeClass the catalog no longer asks for", "name", stale.Name)
	}
	if r.Conflicts != nil {
		r.Conflicts.Set(float64(conflicts))
	}
	return reconcile.Result{RequeueAfter: resync}, nil
}

func labelsInclude(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// presentBuilds lists the Windows builds that have at least one node, ready or not: a node that is
// briefly NotReady should not make its RuntimeClass disappear.
func presentBuilds(ctx context.Context, c client.Reader) ([]string, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.UnsafeDisableDeepCopy, client.MatchingLabels{corev1.LabelOSStable: string(corev1.Windows)}); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var builds []string
	for _, n := range nodes.Items {
		if b := n.Labels[corev1.LabelWindowsBuild]; b != "" && !slices.Contains(builds, b) {
			builds = append(builds, b)
		}
	}
	slices.Sort(builds)
	return builds, nil
}
