package policy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// nodeOSLabels are the node labels that pin an operating system; the beta one still appears in old
// charts. Not LabelOS, wincompat's own label on the Windows pods it admits.
var nodeOSLabels = []string{corev1.LabelOSStable, "beta.kubernetes.io/os"}

// NodeOSLabels are the node labels that pin an operating system, in the order wincompat reads them. The
// webhooks' matchConditions and the admission policies' CEL are generated from this list.
func NodeOSLabels() []string { return slices.Clone(nodeOSLabels) }

// osSet is a set of operating systems a pod may run on, as far as its node constraints tell.
type osSet struct{ linux, windows bool }

var anyOS = osSet{linux: true, windows: true}

func (s osSet) and(o osSet) osSet { return osSet{s.linux && o.linux, s.windows && o.windows} }
func (s osSet) or(o osSet) osSet  { return osSet{s.linux || o.linux, s.windows || o.windows} }

func osOf(value string) osSet {
	return osSet{linux: value == string(corev1.Linux), windows: value == string(corev1.Windows)}
}

// allowedOS is the set of operating systems the pod's nodeSelector and required node affinity admit.
// Terms of required affinity are alternatives; expressions inside one term must all hold.
func allowedOS(spec *corev1.PodSpec) osSet {
	allowed := anyOS
	for _, l := range nodeOSLabels {
		if v, ok := spec.NodeSelector[l]; ok {
			allowed = allowed.and(osOf(v))
		}
	}
	terms := requiredTerms(spec)
	if len(terms) == 0 {
		return allowed
	}
	var union osSet
	for _, t := range terms {
		term := anyOS
		for _, e := range t.MatchExpressions {
			if slices.Contains(nodeOSLabels, e.Key) {
				term = term.and(requirementOS(e))
			}
		}
		union = union.or(term)
	}
	return allowed.and(union)
}

func requirementOS(e corev1.NodeSelectorRequirement) osSet {
	var in osSet
	for _, v := range e.Values {
		in = in.or(osOf(v))
	}
	switch e.Operator {
	case corev1.NodeSelectorOpIn:
		return in
	case corev1.NodeSelectorOpNotIn:
		return osSet{linux: !in.linux, windows: !in.windows}
	case corev1.NodeSelectorOpDoesNotExist:
		return osSet{}
	default: // Exists, Gt, Lt say nothing about which OS.
		return anyOS
	}
}

// LabelPodSecurityEnforce is Pod Security admission's namespace label; "restricted" makes wincompat
// adjust Windows pods to pass it (policy podSecurityRestricted).
const LabelPodSecurityEnforce = "pod-security.kubernetes.io/enforce"

// Reasons recorded with an inferred spec.os (the admission policies render them too).
const (
	ReasonPinnedToWindows  = "pod is pinned to Windows nodes"
	ReasonDefaultOSWindows = "namespace is labelled " + LabelDefaultOS + "=windows"
)

// windowsTrigger decides whether a pod spec is a Windows pod, setting spec.os when the
// decision was inferred. It returns why not, or "".
func (p *Policy) windowsTrigger(spec *corev1.PodSpec, ns Namespace, rec *recorder) string {
	skip, inferred := p.windowsReason(spec, ns)
	if inferred != "" {
		p.setWindowsOS(spec, rec, inferred)
	}
	return skip
}

// windowsReason returns why the pod is not a Windows pod ("" when it is) and, when it is one only by
// inference, the reason to record with spec.os.
func (p *Policy) windowsReason(spec *corev1.PodSpec, ns Namespace) (skip, inferred string) {
	if spec.OS != nil {
		if spec.OS.Name == corev1.Windows {
			return "", ""
		}
		return "spec.os.name is " + string(spec.OS.Name), ""
	}
	allowed := allowedOS(spec)
	switch {
	case allowed == osSet{windows: true} && p.InferOSFromNodeSelector:
		return "", ReasonPinnedToWindows
	case allowed.windows && ns.Labels[LabelDefaultOS] == string(corev1.Windows):
		return "", ReasonDefaultOSWindows
	case !allowed.windows:
		return "pod is pinned to Linux nodes", ""
	default:
		return "pod declares no spec.os", ""
	}
}

func (p *Policy) setWindowsOS(spec *corev1.PodSpec, rec *recorder, reason string) {
	spec.OS = &corev1.PodOS{Name: corev1.Windows}
	rec.add(Change{Action: Inject, Path: "spec.os.name", To: jsonValue(corev1.Windows), Reason: reason, Rule: RuleWindowsOS})
}

// HostProcess reports whether the pod runs Windows HostProcess containers. The API server requires all
// containers to agree, so the pod-level value or any container's decides.
func HostProcess(spec *corev1.PodSpec) bool {
	if sc := spec.SecurityContext; sc != nil && hostProcessSet(sc.WindowsOptions) {
		return true
	}
	found := false
	forEachContainer(spec, func(_ containerAt, c *corev1.Container) {
		if c.SecurityContext != nil && hostProcessSet(c.SecurityContext.WindowsOptions) {
			found = true
		}
	})
	return found
}

func hostProcessSet(wo *corev1.WindowsSecurityContextOptions) bool {
	return wo != nil && wo.HostProcess != nil && *wo.HostProcess
}
