// Package webhook is wincompat's admission plumbing: it turns raw objects into JSON patches with the
// policy, the same way for the admission server and for `wincompat mutate`.
package webhook

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	"github.com/wincompat/wincompat/patch"
	"github.com/wincompat/wincompat/policy"
)

// ImageResolver reads what registries say of images (webhook/scheduling/registry). Lookup waits within
// its own deadline and ctx's; Warm never waits: for workload templates, whose pods come later, it starts
// the lookups not cached and returns the answers that are.
type ImageResolver interface {
	Lookup(ctx context.Context, req policy.ImageRequest) map[string]policy.Image
	Warm(req policy.ImageRequest) map[string]policy.Image
}

// kinds are the objects wincompat mutates, with where their pod spec sits in JSON.
var kinds = map[schema.GroupVersionKind]struct {
	newObject   func() any
	specPointer string
}{
	{Version: "v1", Kind: "Pod"}:                        {func() any { return &corev1.Pod{} }, "/spec"},
	{Version: "v1", Kind: "PodTemplate"}:                {func() any { return &corev1.PodTemplate{} }, "/template/spec"},
	{Version: "v1", Kind: "ReplicationController"}:      {func() any { return &corev1.ReplicationController{} }, "/spec/template/spec"},
	{Group: "apps", Version: "v1", Kind: "Deployment"}:  {func() any { return &appsv1.Deployment{} }, "/spec/template/spec"},
	{Group: "apps", Version: "v1", Kind: "ReplicaSet"}:  {func() any { return &appsv1.ReplicaSet{} }, "/spec/template/spec"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"}: {func() any { return &appsv1.StatefulSet{} }, "/spec/template/spec"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"}:   {func() any { return &appsv1.DaemonSet{} }, "/spec/template/spec"},
	{Group: "batch", Version: "v1", Kind: "Job"}:        {func() any { return &batchv1.Job{} }, "/spec/template/spec"},
	{Group: "batch", Version: "v1", Kind: "CronJob"}:    {func() any { return &batchv1.CronJob{} }, "/spec/jobTemplate/spec/template/spec"},
}

// Supported reports whether wincompat mutates objects of this kind.
func Supported(gvk schema.GroupVersionKind) bool {
	_, ok := kinds[gvk]
	return ok
}

// Result is what MutateResolving decided and the patch that carries it.
type Result struct {
	Decision policy.Decision
	// Patch is empty when nothing changed, and when Decision.Denied refuses the object.
	Patch patch.Patch
	// Name is the object's name, or its generateName followed by "*" (a ReplicaSet's pods have no name
	// at admission), for logs.
	Name string
	// Kind is the kind the raw object declares, empty if it declares none.
	Kind string
	// Record is the object's change record as it arrived, before this pass: in hybrid it holds what
	// the admission policies changed in the same request (policy.RecordNews).
	Record string
	// GateReason says why a pod was left behind the gate (timeout, busy, not-cached); "" when it was not.
	GateReason string
}

// DecodeError says the raw object does not fit its kind's schema (a string where a number belongs, say).
type DecodeError struct {
	Kind string
	Err  error
}

func (e *DecodeError) Error() string { return fmt.Sprintf("decoding %s: %v", e.Kind, e.Err) }
func (e *DecodeError) Unwrap() error { return e.Err }

// MutateResolving applies the policy to one raw JSON object of kind gvk and returns the JSON patch to
// apply to raw. It first asks resolver (nil for none) about the images of a Windows pod, or starts the
// lookups for a workload template's, so that the build comes from the images themselves. raw itself is
// never re-encoded: the patch is the difference between the typed object before and after the
// decision, so fields our types do not know are never mentioned and survive. A decision that changes
// nothing costs no diff at all.
func MutateResolving(ctx context.Context, pol *policy.Policy, gvk schema.GroupVersionKind, raw []byte, facts policy.Facts, resolver ImageResolver) (Result, error) {
	k, ok := kinds[gvk]
	if !ok {
		return Result{}, &policy.UnsupportedKindError{Type: gvk.String()}
	}
	obj := k.newObject()
	// Case-sensitive, like the API server: a miscased key is an unknown field to it, and must be to us.
	// A duplicated key is refused: the typed object would merge both values while a JSON patch applies
	// to the last one, so the patch could name fields the raw object does not have. The API server never
	// sends one (it re-encodes what it decoded); only hand-written input can.
	strict, err := sigsjson.UnmarshalStrict(raw, obj, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return Result{}, &DecodeError{Kind: gvk.Kind, Err: err}
	}
	if len(strict) > 0 {
		return Result{}, &DecodeError{Kind: gvk.Kind, Err: strict[0]}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err // the API server gave up on this review
	}
	if resolver != nil {
		if l := pol.ImagesToLookUp(obj, facts); len(l.Images) > 0 {
			req := policy.ImageRequest{Namespace: facts.Namespace.Name, Images: l.Images, Mirrors: pol.RegistryMirrors}
			if callerVerified(ctx) {
				// Whoever reaches the port names the namespace: only the API server, proven by its client
				// certificate, may make wincompat read a namespace's pull secrets.
				req.PullSecrets, req.Authenticated = l.PullSecrets, true
			}
			if l.Wait {
				facts.Images = resolver.Lookup(ctx, req)
			} else {
				// What is cached already lets a template be warned about a Linux-only image at
				// `helm install`, without making workload admission wait on a registry.
				facts.Images = resolver.Warm(req)
			}
		}
	}
	before := obj.(runtime.Object).DeepCopyObject()
	emptyGroups := hasEmptySupplementalGroups(obj)
	record := recordOf(obj)
	decision, err := pol.Decide(obj, facts)
	if err != nil || !decision.Handled() {
		return Result{Decision: decision}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	res := Result{Decision: decision, Name: nameOf(obj), Kind: before.GetObjectKind().GroupVersionKind().Kind, Record: record}
	if decision.Gated {
		res.GateReason = gateReason(facts.Images)
	}
	if decision.Denied != "" {
		return res, nil // refused: the object stays as it came
	}
	if res.Patch, err = patch.Objects(before, obj, raw); err != nil {
		return Result{}, err
	}
	if emptyGroups && !hasEmptySupplementalGroups(obj) {
		// "supplementalGroups: []" is rejected on Windows like any other value, but the typed object
		// marshals an empty list as absent, so the diff cannot see its removal.
		res.Patch = append(res.Patch, patch.Operation{Op: "remove", Path: k.specPointer + "/securityContext/supplementalGroups"})
	}
	return res, nil
}

// recordOf is the change record on a typed object of ours: a pod's, or its pod template's; "" for none.
func recordOf(obj any) string {
	if pod, ok := obj.(*corev1.Pod); ok {
		return pod.Annotations[policy.AnnotationChanges]
	}
	if tpl, err := policy.PodTemplateOf(obj); err == nil && tpl != nil {
		return tpl.Annotations[policy.AnnotationTemplateChanges]
	}
	return ""
}

// storedRecord is the change record of raw, the stored object of an UPDATE, of kind gvk; false when
// raw cannot be read as one.
func storedRecord(gvk schema.GroupVersionKind, raw []byte) (string, bool) {
	k, ok := kinds[gvk]
	if !ok || len(raw) == 0 {
		return "", false
	}
	obj := k.newObject()
	// Not strict: the API server wrote it, and only its annotations are read.
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, obj); err != nil {
		return "", false
	}
	return recordOf(obj), true
}

func podSpecOf(obj any) *corev1.PodSpec {
	if pod, ok := obj.(*corev1.Pod); ok {
		return &pod.Spec
	}
	if tpl, err := policy.PodTemplateOf(obj); err == nil && tpl != nil {
		return &tpl.Spec
	}
	return nil
}

func hasEmptySupplementalGroups(obj any) bool {
	spec := podSpecOf(obj)
	return spec != nil && spec.SecurityContext != nil && spec.SecurityContext.SupplementalGroups != nil &&
		len(spec.SecurityContext.SupplementalGroups) == 0
}

func nameOf(obj any) string {
	meta, ok := obj.(metav1.Object)
	if !ok {
		return ""
	}
	if meta.GetName() == "" && meta.GetGenerateName() != "" {
		return meta.GetGenerateName() + "*"
	}
	return meta.GetName()
}
