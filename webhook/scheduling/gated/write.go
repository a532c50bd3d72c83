package gated

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"

	"github.com/wincompat/wincompat/patch"
	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/truncate"
)

// write sends p, the decision, as one JSON patch made against the pod as read and tested against its
// resourceVersion: a pod changed since (by its owner, another leader, the scheduler's condition) is not
// overwritten with a decision made from what it was, and not half-ungated: the API server applies all
// of the patch or none.
func (c *Controller) write(ctx context.Context, read *corev1.Pod, p patch.Patch) error {
	ops := append(patch.Patch{{Op: "test", Path: "/metadata/resourceVersion", Value: read.ResourceVersion}}, p...)
	data, err := ops.MarshalJSON()
	if err != nil {
		return err
	}
	target := &corev1.Pod{}
	target.Name, target.Namespace = read.Name, read.Namespace
	return c.Writer.Patch(ctx, target, client.RawPatch(types.JSONPatchType, data))
}

// releasePatch removes wincompat's gate and label from raw, the pod as read, and records why
// (policy.Release): nothing else changes.
func releasePatch(raw []byte, why string) (patch.Patch, error) {
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
		return nil, err
	}
	before := pod.DeepCopy()
	policy.Release(pod, truncate.AtRune(why, maxWhy))
	return patch.Objects(before, pod, raw)
}

// changed: the write failed because the pod is no longer the one read. The API server answers a failed
// test operation 422 with the JSON patch library's words, and a conflict of its own 409.
func changed(err error) bool {
	return apierrors.IsConflict(err) || strings.Contains(err.Error(), "testing value /metadata/resourceVersion failed")
}
