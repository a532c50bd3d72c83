package server

import (
	"context"
	"encoding/json"
	"maps"
	"sync/atomic"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook"
)

// OptInPath is where the webhook pods-opt-in.wincompat.io sends Windows pods created in namespaces
// whose wincompat.io/enabled label has a value other than "true" or "false" (deploy/webhook).
const OptInPath = "/warn-opt-in"

// optInCheck answers pods-opt-in.wincompat.io. A namespace labelled wincompat.io/enabled=yes (True, 1,
// on, ...) is not opted in, so no other webhook of wincompat sees its pods, and a Windows pod with a
// chart's Linux-only defaults is then refused by the API server's own validation, whose message says
// nothing of the label. This check adds one admission warning per label mistake (the label, its value,
// the fix), which the API server returns to the client even when it then refuses the pod. It never
// changes, refuses or delays the pod on its own account: an error of any kind allows it without a
// word, and its webhook is failurePolicy Ignore, so such namespaces never depend on wincompat.
type optInCheck struct {
	policy     *atomic.Pointer[policy.Policy]
	namespaces webhook.NamespaceReader
	// live reads a namespace the cache has not seen yet; nil for none.
	live webhook.NamespaceReader
}

func (c optInCheck) Handle(ctx context.Context, req admission.Request) admission.Response {
	allowed := admission.Allowed("")
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Pod" || req.Kind.Group != "" || req.SubResource != "" {
		return allowed
	}
	ns, err := webhook.ReadNamespace(ctx, c.namespaces, c.live, req.Namespace)
	if err != nil {
		return allowed
	}
	labels := ns.Labels
	mistakes := policy.NamespaceOptInMistakes(labels)
	if len(mistakes) == 0 {
		return allowed
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return allowed
	}
	// The pod is named only if fixing the labels would bring it into scope as a Windows pod: not when
	// the policy excludes the namespace or the pod is labelled skip, nor for a pod that only mentions
	// the OS label (the webhook's condition is a superset of the policy's Windows test).
	fixed := policy.Namespace{Name: req.Namespace, Labels: maps.Clone(labels)}
	for _, m := range mistakes {
		fixed.Labels[m.FixKey] = m.FixValue
	}
	pol := c.policy.Load()
	if !pol.IsWindows(&pod.Spec, fixed) || pol.Scope(pod.Labels, fixed) != policy.InScope {
		return allowed
	}
	for _, m := range mistakes {
		allowed.Warnings = append(allowed.Warnings, optInWarning(req.Namespace, m))
	}
	return allowed
}

// optInWarning is the warning of one mistake: what wincompat did not do, the label, and the fix.
func optInWarning(ns string, m policy.OptInMistake) string {
	return "wincompat: left this Windows pod unchanged: in namespace " + ns + ", " + m.String() + " (" + m.Command(ns) + ")"
}
