// Package ungate releases every pod that waits behind wincompat's scheduling gate, for when wincompat
// goes and no leader is left to decide their builds: `wincompat ungate`, which the chart's post-delete
// hook runs once helm has deleted the webhooks and admission policies that gate.
//
// A pod is released with policy.Release: wincompat's gate and label go, the record says why, and every
// other gate the pod carries stays. Its Windows build stays undecided, so the scheduler may place it on
// any Windows node its nodeSelector and affinity allow, as if wincompat had never seen it.
package ungate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook"
)

// Reason is what the record of a released pod says.
const Reason = "wincompat was uninstalled"

// Defaults of Options.
const (
	DefaultPageSize = 500
	// DefaultSettle outlasts the chart's default webhook.timeoutSeconds (3s) and the second the API
	// server takes to drop a deleted admission policy: a review in flight when wincompat's webhook
	// configuration went may still store a gated pod that long after.
	DefaultSettle = 5 * time.Second
)

// Client is what Run needs of the API server: list and patch pods.
type Client interface {
	client.Reader
	Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error
}

// Options of Run. Zero fields take the defaults.
type Options struct {
	// Namespace is the one namespace to release pods in; "" is every namespace.
	Namespace string
	// PageSize is the pods one list request returns at most.
	PageSize int64
	// Settle is how long apart two passes start.
	Settle time.Duration
}

// Result says what Run did.
type Result struct {
	// Released is the number of pods whose gate Run removed.
	Released int
	// Passes is the number of passes over the pods.
	Passes int
}

// Run releases the pods that carry wincompat's gate, in passes over the pods not bound to a node (a
// gated pod never is: the API server refuses spec.nodeName with a gate), Settle apart, until a pass
// that is not the first finds none. So at least Settle passes between the last pod found and the end,
// and a pod stored gated by an admission that was still in flight when the gating stopped is found
// too. A pod that changed between its list and its patch is taken again by the next pass. Run ends
// with ctx, or with an error when a pass could not list or patch (other than a pod that changed or went).
func Run(ctx context.Context, c Client, o Options) (Result, error) {
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	var res Result
	for {
		found, released, err := pass(ctx, c, o)
		res.Passes++
		res.Released += released
		if err != nil {
			return res, err
		}
		if found == 0 && res.Passes > 1 {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("stopped after %d passes, the last of which found %d gated pods: %w", res.Passes, found, context.Cause(ctx))
		case <-time.After(o.Settle):
		}
	}
}

// pass lists the unbound pods a page at a time and releases each that carries the gate: found counts
// those, released those it wrote.
func pass(ctx context.Context, c Client, o Options) (found, released int, err error) {
	unbound := fields.OneTermEqualSelector("spec.nodeName", "")
	var failed []error
	for cont := ""; ; {
		var pods corev1.PodList
		opts := []client.ListOption{client.MatchingFieldsSelector{Selector: unbound}, client.Limit(o.PageSize), client.Continue(cont)}
		if o.Namespace != "" {
			opts = append(opts, client.InNamespace(o.Namespace))
		}
		if err := c.List(ctx, &pods, opts...); err != nil {
			return found, released, fmt.Errorf("listing pods: %w", err)
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if !policy.Gated(pod) {
				continue
			}
			found++
			switch err := release(ctx, c, pod); {
			case err == nil:
				released++
			case apierrors.IsNotFound(err) || webhook.PodChanged(err):
				// Gone, or taken again by the next pass.
			default:
				failed = append(failed, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
		}
		if cont = pods.Continue; cont == "" {
			break
		}
	}
	if len(failed) > 0 {
		err = fmt.Errorf("%d of %d gated pods could not be released: %w", len(failed), found, errors.Join(failed[:min(len(failed), 3)]...))
	}
	return found, released, err
}

// release removes the gate from pod as listed with one JSON patch, tested against the resourceVersion
// read: nothing but the gate, the label and the record changes, and a pod changed since is not written.
func release(ctx context.Context, c Client, pod *corev1.Pod) error {
	raw, err := json.Marshal(pod)
	if err != nil {
		return err
	}
	ops, err := webhook.Release(raw, Reason)
	if err != nil || len(ops) == 0 {
		return err
	}
	return webhook.WritePod(ctx, c, pod, ops)
}
