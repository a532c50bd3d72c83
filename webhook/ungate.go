package webhook

import (
	corev1 "k8s.io/api/core/v1"
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
