package audit

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// coverage says which pods and templates are Windows, as the webhook judges them, and whether wincompat
// saw each Windows pod; when it did not, why, by the policy's scope rule.
type coverage struct {
	pol        *policy.Policy
	namespaces *namespaces
	out        *sink
}

// isWindows is the policy's Windows test, with the namespace's labels (wincompat.io/default-os).
func (c *coverage) isWindows(spec *corev1.PodSpec, ns string) bool {
	return c.pol.IsWindows(spec, c.namespaces.facts(ns))
}

// windowsPod: a Windows pod, or one wincompat recorded itself on (it judged the pod Windows).
func (c *coverage) windowsPod(p *corev1.Pod) bool {
	_, recorded := p.Annotations[policy.AnnotationVersion]
	_, byPolicy := p.Annotations[policy.AnnotationAdmissionPolicy]
	return recorded || byPolicy || c.isWindows(&p.Spec, p.Namespace)
}

// pod reports a Windows pod wincompat did not record itself on, and says whether it did. warnMode: the
// pod's namespace is in warn mode, where objects carry no record on purpose.
func (c *coverage) pod(p *corev1.Pod, obj string, warnMode bool) (covered bool) {
	_, recorded := p.Annotations[policy.AnnotationVersion]
	switch _, byPolicy := p.Annotations[policy.AnnotationAdmissionPolicy]; {
	case recorded:
	case warnMode:
		// Not changed on purpose: the would-change finding says what enforce mode would do.
	case byPolicy && policy.Gated(p):
		// Waiting for the leader, which decides its build as the webhook would have (and stamps
		// wincompat.io/version): the gated-pod finding says so.
	case byPolicy:
		detail := "admitted by wincompat's admission policies while the webhook did not answer: valid and on a Windows node, but no build was chosen (no windows-build pin or RuntimeClass); pods created now get one"
		if why := releasedWhy(p); why != "" {
			detail = "admitted by wincompat's admission policies behind wincompat's scheduling gate while the webhook did not answer, then released without a build decision (" + why + "): no build was chosen (no windows-build pin or RuntimeClass); pods created now get one"
		}
		c.out.finding(WithoutBuildDecision, p.Namespace, obj, detail)
	default:
		c.out.finding(NotCovered, p.Namespace, obj, c.whyNotCovered(p))
	}
	return recorded
}

// whyNotCovered explains a Windows pod without wincompat's marks by the policy's scope rule.
func (c *coverage) whyNotCovered(p *corev1.Pod) string {
	ns := c.namespaces.facts(p.Namespace)
	if !c.namespaces.known(p.Namespace) {
		// A namespace created after they were listed: its labels are unknown, so none is blamed.
		ns.Labels = map[string]string{policy.LabelEnabled: "true"}
	}
	switch c.pol.Scope(p.Labels, ns) {
	case policy.ExcludedNamespace:
		return "namespace " + p.Namespace + " is in the policy's excludedNamespaces: wincompat never changes its objects"
	case policy.NamespaceNotEnabled:
		return "its namespace is not labelled " + policy.LabelEnabled + "=true"
	case policy.SkipLabelled:
		return "the pod is labelled " + policy.LabelSkip + "=true"
	default:
		return "created while wincompat was not running, or before the namespace was labelled"
	}
}

// releasedWhy is why wincompat's gate was removed from a pod without a build decision, as its record
// says (policy.Release: uninstalled, the namespace opted out, not a Windows pod); "" when it was not.
// A pod whose build the leader decided carries wincompat.io/version and is never asked.
func releasedWhy(p *corev1.Pod) string {
	record, ok := p.Annotations[policy.AnnotationChanges]
	if !ok {
		return ""
	}
	changes, err := policy.DecodeChanges(record)
	if err != nil {
		return ""
	}
	for _, c := range slices.Backward(changes) {
		if c.Rule == policy.RuleBuildGate && c.Action == policy.Warn && c.Path == "spec.schedulingGates" {
			return c.Reason
		}
	}
	return ""
}
