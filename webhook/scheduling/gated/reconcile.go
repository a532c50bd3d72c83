package gated

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	sigsjson "sigs.k8s.io/json"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/truncate"
	"github.com/wincompat/wincompat/webhook"
)

// conflictRetry is how soon a pod that changed under the write is read again: the change is made, so
// reading it again at once finds the new version.
const conflictRetry = 100 * time.Millisecond

// Reconcile handles one gated pod: it reads the pod's images, and removes the gate when every one has
// answered or the bound has passed; until then it looks again after a backoff.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	raw, pod, err := c.read(ctx, req.NamespacedName)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	// A gate of anyone else's is never touched, nor a pod that is going away.
	if !policy.Gated(pod) || pod.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	pol := c.Policy()
	facts, err := c.facts(ctx, pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := c.Now()
	waited := age(pod, now)
	left := c.Bound - waited
	facts.Images = c.lookUp(ctx, pol, pod, facts, left)
	pending, failed := answers(facts.Images)
	overdue := ""
	if pending {
		if left > 0 {
			return reconcile.Result{RequeueAfter: retryAfter(waited, left)}, nil
		}
		overdue = fmt.Sprintf("no answer from the registry within %s", c.Bound)
	}
	res, err := webhook.Ungate(pol, raw, facts, overdue)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(res.Patch) == 0 {
		return reconcile.Result{}, nil
	}
	err = webhook.WritePod(ctx, c.Writer, pod, res.Patch)
	if err != nil && left <= 0 && !apierrors.IsNotFound(err) && !webhook.PodChanged(err) {
		// Past the bound a pod is not kept gated because its decision cannot be written (an admission
		// policy or validation refusing a pin): the gate alone goes, the build undecided.
		why := "the write of the build decided was refused: " + err.Error()
		if released, rerr := webhook.Release(raw, truncate.AtRune(why, maxWhy)); rerr == nil && webhook.WritePod(ctx, c.Writer, pod, released) == nil {
			c.Log.Error(err, "gate removed without the build decided, whose write was refused", "pod", req.NamespacedName)
			c.Metrics.ungated(outcomeReleased, waited)
			c.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonReleased, "Ungate", "%s", releasedNote(why))
			return reconcile.Result{}, nil
		}
	}
	if err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return reconcile.Result{}, nil
		case webhook.PodChanged(err):
			// Changed since it was read: decided again from what it is now.
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		c.Log.Error(err, "removing the gate", "pod", req.NamespacedName)
		c.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonUngateFailed, "Ungate", "%s", failedNote(err))
		return reconcile.Result{}, err
	}
	d := res.Decision
	outcome, note, kind, reason := outcomeDecided, "", corev1.EventTypeNormal, ReasonDecided
	switch {
	case !d.Windows:
		outcome, note, reason = outcomeReleased, releasedNote(d.Skipped), ReasonReleased
	case overdue != "" || failed != "":
		why := overdue
		if why == "" {
			why = "no build from the registry, which answered: " + failed
		}
		outcome, note, kind, reason = outcomeFallback, fallbackNote(why, d.Build, d.BuildSource, waited), corev1.EventTypeWarning, ReasonFallback
	default:
		note = decidedNote(d.Build, d.BuildSource, waited)
	}
	c.Metrics.ungated(outcome, waited)
	c.Log.Info("gate removed", "pod", req.NamespacedName, "outcome", outcome, "build", d.Build, "source", d.BuildSource, "waited", waited.Round(time.Millisecond).String())
	c.Recorder.Eventf(pod, nil, kind, reason, "Ungate", "%s", note)
	return reconcile.Result{}, nil
}

// read gets the pod from the API server as raw JSON, which the patch is made against (fields our
// types do not know survive it), and typed.
func (c *Controller) read(ctx context.Context, key types.NamespacedName) ([]byte, *corev1.Pod, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	if err := c.Live.Get(ctx, key, u); err != nil {
		return nil, nil, err
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, nil, err
	}
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
		return nil, nil, fmt.Errorf("decoding pod %s: %w", key, err)
	}
	return raw, pod, nil
}

// facts are what admission would know of the pod now: its namespace and the cluster, as the webhook
// reads them.
func (c *Controller) facts(ctx context.Context, pod *corev1.Pod) (policy.Facts, error) {
	facts := policy.Facts{Operation: policy.Create, Namespace: policy.Namespace{Name: pod.Namespace}, Version: c.Version}
	ns, err := webhook.ReadNamespace(ctx, c.Namespaces, c.Live, pod.Namespace)
	switch {
	case err == nil:
		facts.Namespace.Labels, facts.Namespace.Annotations = ns.Labels, ns.Annotations
	case !apierrors.IsNotFound(err):
		return facts, fmt.Errorf("reading namespace %s: %w", pod.Namespace, err)
	}
	if c.Cluster != nil {
		if facts.Cluster, err = c.Cluster(ctx); err != nil {
			return facts, err
		}
	}
	return facts, nil
}

// lookUp reads the pod's images as admission would have (policy.ImagesToLookUp of a pod being created),
// waiting at most Wait and what is left of the bound; past the bound it gives what is cached. The pod
// was read from the API server, so its namespace is its own: its pull secrets may be used.
func (c *Controller) lookUp(ctx context.Context, pol *policy.Policy, pod *corev1.Pod, facts policy.Facts, left time.Duration) map[string]policy.Image {
	if c.Images == nil {
		return nil
	}
	l := pol.ImagesToLookUp(pod, facts)
	if len(l.Images) == 0 {
		return nil
	}
	req := policy.ImageRequest{Namespace: pod.Namespace, Images: l.Images, Mirrors: pol.RegistryMirrors, PullSecrets: l.PullSecrets, Authenticated: true}
	wait := c.Wait
	if wait <= 0 {
		wait = left
	}
	ctx, cancel := context.WithTimeout(ctx, max(min(wait, left), 0))
	defer cancel()
	return c.Images.Lookup(ctx, req)
}

// answers says whether an image is still pending, and the first error a registry answered with ("" for
// none).
func answers(images map[string]policy.Image) (pending bool, failed string) {
	for _, img := range images {
		switch {
		case img.Pending:
			pending = true
		case img.Err != "" && failed == "":
			failed = img.Err
		}
	}
	return pending, failed
}
