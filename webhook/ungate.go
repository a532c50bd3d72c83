package webhook

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
)

// Ungate decides the build of a stored pod wincompat gated (policy.Ungate) and returns the JSON patch
// that writes the decision onto raw, the pod as the API server returned it. It is the leader's
// counterpart of MutateResolving, with the same guarantee: raw is never re-encoded, so fields our
// types do not know survive. facts.Images holds what the registry said; overdue, when not "", says why
// the gate goes without every answer. A pod without wincompat's gate gets an empty patch.
func Ungate(pol *policy.Policy, raw []byte, facts policy.Facts, overdue string) (Result, error) {
	pod := &corev1.Pod{}
	// Not strict: the API server wrote it.
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
		return Result{}, &DecodeError{Kind: "Pod", Err: err}
	}
	before := pod.DeepCopy()
	decision := pol.Ungate(pod, facts, overdue)
	res := Result{Decision: decision, Name: pod.Name, Kind: "Pod", Record: before.Annotations[policy.AnnotationChanges]}
	if !policy.Gated(before) {
		return res, nil
	}
	var err error
	res.Patch, err = patch.Objects(before, pod, raw)
	return res, err
}

// Release returns the JSON patch that removes wincompat's gate and label from raw, the pod as read, and
// records why (policy.Release): nothing else changes. A pod without the gate gets an empty patch.
func Release(raw []byte, why string) (patch.Patch, error) {
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
		return nil, &DecodeError{Kind: "Pod", Err: err}
	}
	before := pod.DeepCopy()
	if policy.Release(pod, why) == nil {
		return nil, nil
	}
	return patch.Objects(before, pod, raw)
}

// PodPatcher patches pods: a controller-runtime client, or anything that patches as one.
type PodPatcher interface {
	Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error
}

// WritePod sends ops to the pod read as read, as one JSON patch tested against the resourceVersion read:
// a pod changed since (by its owner, another leader, the scheduler's condition) is not overwritten with
// a decision made from what it was, and not half-ungated: the API server applies all of it or none.
func WritePod(ctx context.Context, c PodPatcher, read *corev1.Pod, ops patch.Patch) error {
	guarded := append(patch.Patch{{Op: "test", Path: "/metadata/resourceVersion", Value: read.ResourceVersion}}, ops...)
	data, err := guarded.MarshalJSON()
	if err != nil {
		return err
	}
	target := &corev1.Pod{}
	target.Name, target.Namespace = read.Name, read.Namespace
	return c.Patch(ctx, target, client.RawPatch(types.JSONPatchType, data))
}

// PodChanged says a WritePod failed because the pod is no longer the one read. The API server answers a
// failed test operation 422 with the JSON patch library's words, and a conflict of its own 409.
func PodChanged(err error) bool {
	return apierrors.IsConflict(err) || strings.Contains(err.Error(), "testing value /metadata/resourceVersion failed")
}
