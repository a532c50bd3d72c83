package gated

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/wincompat/wincompat/policy"
)

// The cache holds the pods labelled policy.LabelGated=true alone: a label is the only filter the API
// server applies to a pod watch by content. A pod that keeps wincompat's gate without the label
// (someone removed or changed it) would wait for ever; a sweep finds those: at the start of each term
// and every sweepInterval, the pods not bound to a node (a gated pod never is; the API server serves a
// list by spec.nodeName from an index of its watch cache) and not labelled are listed a page at a time,
// and each that carries wincompat's gate is handled like a cached one.

// sweepInterval is how often pods gated without the label are looked for.
const sweepInterval = 10 * time.Minute

// sweepPage is the pods one list call returns.
const sweepPage = 500

// unlabelled selects pods whose policy.LabelGated is not "true", missing included.
func unlabelled() (labels.Selector, error) {
	r, err := labels.NewRequirement(policy.LabelGated, selection.NotEquals, []string{"true"})
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*r), nil
}

// sweepEvery sweeps now and then every interval until ctx ends.
func (c *Controller) sweepEvery(ctx context.Context, interval time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.sweep(ctx); err != nil && ctx.Err() == nil {
			c.Log.Error(err, "looking for pods gated without the label "+policy.LabelGated+"; trying again at the next sweep")
		}
	}, interval)
}

// sweep asks for every unbound pod that carries wincompat's gate without its label to be handled.
func (c *Controller) sweep(ctx context.Context) error {
	sel, err := unlabelled()
	if err != nil {
		return err
	}
	var found []client.ObjectKey
	for cont := ""; ; {
		var pods corev1.PodList
		err := c.Live.List(ctx, &pods, client.MatchingLabelsSelector{Selector: sel},
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", "")},
			client.Limit(sweepPage), client.Continue(cont))
		if err != nil {
			return err
		}
		for i := range pods.Items {
			if policy.Gated(&pods.Items[i]) {
				found = append(found, client.ObjectKeyFromObject(&pods.Items[i]))
			}
		}
		if cont = pods.Continue; cont == "" {
			break
		}
	}
	for _, key := range found {
		select {
		case c.sweeps <- event.GenericEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
