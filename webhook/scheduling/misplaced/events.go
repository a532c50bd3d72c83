package misplaced

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// The Events the watcher reads come from an informer of its own, not the manager's cache: anyone who
// may create Events anywhere chooses how many there are, and a store keeps every object its watch
// delivers (a transform can shrink one, never drop it). So its list and watch drop, as they arrive,
// every Event the watcher does not read: those of another reason, and those of namespaces that are not
// opted in. The API server filters Warnings about pods (a field selector); what is left is kept bounded
// (keptEvent).
//
// An Event dropped because its namespace was not opted in then is not read again when the namespace
// opts in: the kubelet writes its Warnings again while a pod keeps failing, and remediation reads the
// pod's own container states, never an Event.

// eventSelector: the kubelet's Warnings about pods.
var eventSelector = fields.SelectorFromSet(fields.Set{"type": corev1.EventTypeWarning, "involvedObject.kind": "Pod"}).String()

// eventIndexers find a pod's Events, and wincompat's records of deletions by controller.
var eventIndexers = toolscache.Indexers{
	eventIndex: func(o any) ([]string, error) {
		if e, ok := o.(*corev1.Event); ok {
			return []string{string(e.InvolvedObject.UID)}, nil
		}
		return nil, nil
	},
	deletedIndex: func(o any) ([]string, error) {
		if e, ok := o.(*corev1.Event); ok && e.Reason == ReasonDeleted && e.Related != nil {
			return []string{string(e.Related.UID)}, nil
		}
		return nil, nil
	},
}

// newEventInformer is an informer of the Events keep accepts, kept as keptEvent bounds them.
func newEventInformer(cs kubernetes.Interface, keep func(*corev1.Event) bool) toolscache.SharedIndexInformer {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = eventSelector
			list, err := cs.CoreV1().Events(metav1.NamespaceAll).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			list.Items = slices.DeleteFunc(list.Items, func(e corev1.Event) bool { return !keep(&e) })
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = eventSelector
			w, err := cs.CoreV1().Events(metav1.NamespaceAll).Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			// A deletion always passes: the Event may have been kept while its namespace was opted in, and
			// one the store never held costs nothing.
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				e, ok := ev.Object.(*corev1.Event)
				return ev, !ok || ev.Type == watch.Bookmark || ev.Type == watch.Error || ev.Type == watch.Deleted || keep(e)
			}), nil
		},
	}
	// The client says whether it serves the initial list as a watch (a fake one does not); the filter
	// applies to both forms.
	inf := toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(lw, cs), &corev1.Event{}, 0, eventIndexers)
	_ = inf.SetTransform(func(obj any) (any, error) {
		if e, ok := obj.(*corev1.Event); ok {
			return keptEvent(e), nil
		}
		return obj, nil
	})
	return inf
}

// keepEvent: the watcher reads e's reason, about a pod that can exist, in a namespace that opted in.
// Of the failure reasons, only an Event whose message tells a failure of the table is kept: BackOff and
// Failed are written about every crashing Linux pod too, and the watcher reads nothing else of them.
func (w *Watcher) keepEvent(e *corev1.Event) bool {
	if !readEvent(e) {
		return false
	}
	if _, failed := EventFailure(e.Reason, e.Message); FailureEventReason(e.Reason) && !failed {
		return false
	}
	return w.optedIn(context.Background(), e.Namespace)
}

// eventsBy lists the Events the index maps to key.
func (w *Watcher) eventsBy(index, key string) ([]*corev1.Event, error) {
	objs, err := w.Events.ByIndex(index, key)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Event, 0, len(objs))
	for _, o := range objs {
		if e, ok := o.(*corev1.Event); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// syncedInformer is the Events' source of the controller, which starts its workers only once it has
// synced: a pod judged before the Events are listed would not know that wincompat already reported it,
// and a new leader would report it again. controller-runtime waits only for sources that say how.
type syncedInformer struct{ *source.Informer }

var _ source.SyncingSource = syncedInformer{}

func (s syncedInformer) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.Informer.Informer.HasSynced) {
		return fmt.Errorf("the Events informer did not sync: %w", context.Cause(ctx))
	}
	return nil
}
