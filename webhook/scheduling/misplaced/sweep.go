package misplaced

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/wincompat/wincompat/policy"
)

// The leader's cache holds the pods labelled policy.LabelOS=windows alone: both engines stamp that on
// every Windows pod they admit, and a cache of every pod would grow with the cluster's Linux majority.
// Windows pods without the label (created before wincompat was installed, or before their namespace
// opted in) are found by a sweep instead: at the start of each term and every sweepInterval, each
// Windows node's unlabelled pods are listed (the API server serves a list by spec.nodeName from an
// index of its watch cache), a page at a time. The watcher keeps the keys of those that are Windows
// pods in opted-in namespaces and reads each, when it judges it, from the API server. A pod that is not
// bound to a Windows node is never misplaced on one, so no other pod is listed.

// sweepInterval is how often the unlabelled Windows pods are looked for again. Their number only falls
// (every new Windows pod is labelled), and a pod that fails is found within it.
const sweepInterval = 10 * time.Minute

// sweepPage is the pods one list call returns.
const sweepPage = 500

// unlabelled selects pods without policy.LabelOS.
func unlabelled() (labels.Selector, error) {
	r, err := labels.NewRequirement(policy.LabelOS, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*r), nil
}

// sweepEvery sweeps now and then every interval until ctx ends.
func (w *Watcher) sweepEvery(ctx context.Context, interval time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := w.sweep(ctx); err != nil && ctx.Err() == nil {
			w.Log.Error(err, "looking for Windows pods without the label "+policy.LabelOS+"; trying again at the next sweep")
		}
	}, interval)
}

// sweep finds the unlabelled Windows pods in opted-in namespaces on Windows nodes, keeps their keys and
// asks for each to be judged. Keys it does not find again are dropped.
func (w *Watcher) sweep(ctx context.Context) error {
	sel, err := unlabelled()
	if err != nil {
		return err
	}
	found := map[types.NamespacedName]types.UID{}
	for node := range w.nodes().Builds {
		for cont := ""; ; {
			var pods corev1.PodList
			err := w.Live.List(ctx, &pods, client.MatchingLabelsSelector{Selector: sel},
				client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", node)},
				client.Limit(sweepPage), client.Continue(cont))
			if err != nil {
				return err
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if windowsPod(p) && w.optedIn(ctx, p.Namespace) {
					found[client.ObjectKeyFromObject(p)] = p.UID
				}
			}
			if cont = pods.Continue; cont == "" {
				break
			}
		}
	}
	w.mu.Lock()
	w.swept = found
	w.mu.Unlock()
	for key := range found {
		select {
		case w.sweeps <- event.GenericEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// pod reads the pod to judge: from the cache, or, for a pod the last sweep found, from the API server,
// kept as the cache would keep it.
func (w *Watcher) pod(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := w.Client.Get(ctx, key, &pod)
	if err == nil || !apierrors.IsNotFound(err) {
		return &pod, err
	}
	w.mu.Lock()
	_, swept := w.swept[key]
	w.mu.Unlock()
	if !swept || w.Live == nil {
		return nil, err
	}
	if err := w.Live.Get(ctx, key, &pod); err != nil {
		return nil, err
	}
	return keptPod(&pod), nil
}

func (w *Watcher) optedIn(ctx context.Context, namespace string) bool {
	var ns corev1.Namespace
	if err := w.Client.Get(ctx, types.NamespacedName{Name: namespace}, &ns); err != nil {
		return false
	}
	return ns.Labels[policy.LabelEnabled] == "true"
}
