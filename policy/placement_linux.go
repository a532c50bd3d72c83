package policy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The other direction of a mixed cluster: pods and pod templates that say nothing about their
// operating system are scheduled onto Windows nodes as readily as onto Linux ones (the scheduler and the
// DaemonSet controller read node constraints, not spec.os), and fail there. In namespaces that ask for
// it, wincompat pins them to Linux.

// linuxByDefault says why objects with no OS signal in ns are pinned to Linux, "" when they are not. A
// namespace labelled default-os=linux is named explicitly, so the cluster-wide setting's exclusions
// do not apply to it. kube-system is excluded from the cluster-wide setting even when a policy's own list
// leaves it out: its add-ons (CNI, kube-proxy, CSI node plugins) are often built for both systems and
// select their nodes themselves, and a list written for other namespaces must not pin them by accident.
func (p *Policy) linuxByDefault(ns Namespace) string {
	switch ns.Labels[LabelDefaultOS] {
	case string(corev1.Linux):
		return reasonLinuxLabel
	case "":
		if p.LinuxByDefault && ns.Name != metav1.NamespaceSystem && !slices.Contains(p.LinuxByDefaultExcludedNamespaces, ns.Name) {
			return reasonLinuxPolicy
		}
	}
	return ""
}

// Why objects are pinned to Linux (linuxByDefault), and the reason recorded with the pin.
const (
	reasonLinuxLabel  = "namespace is labelled " + LabelDefaultOS + "=linux"
	reasonLinuxPolicy = "policy linuxByDefault pins every namespace not labelled " + LabelDefaultOS
)

func linuxPinReason(why string) string { return why + "; the object chose no operating system" }

// OSSignal says how a pod spec already chooses its operating system, "" when it does not: spec.os, an
// OS key in the nodeSelector or in required node affinity (whatever its operator), or a RuntimeClass
// that selects an OS (a catalog class, or a cluster class whose nodeSelector names kubernetes.io/os).
func (p *Policy) OSSignal(spec *corev1.PodSpec, cluster *Cluster) string {
	if spec.OS != nil {
		return "spec.os.name is " + string(spec.OS.Name)
	}
	for _, l := range nodeOSLabels {
		if _, ok := spec.NodeSelector[l]; ok {
			return "nodeSelector names " + l
		}
	}
	for _, t := range requiredTerms(spec) {
		for _, e := range t.MatchExpressions {
			if slices.Contains(nodeOSLabels, e.Key) {
				return "required node affinity names " + e.Key
			}
		}
	}
	if spec.RuntimeClassName != nil {
		name := *spec.RuntimeClassName
		if slices.ContainsFunc(p.Builds, func(b Build) bool { return b.RuntimeClass == name }) {
			return "RuntimeClass " + name + " is a Windows class of the catalog"
		}
		if cluster != nil {
			for _, l := range nodeOSLabels {
				if os, ok := cluster.RuntimeClasses[name].NodeSelector[l]; ok {
					return "RuntimeClass " + name + " selects " + l + "=" + os
				}
			}
		}
	}
	return ""
}

func requiredTerms(spec *corev1.PodSpec) []corev1.NodeSelectorTerm {
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	return spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
}

// decideLinux pins an object with no OS signal to Linux where the namespace (or the policy) asks for it.
// handled is false when the object is not the Linux side's: the Windows decisions then take it.
func (p *Policy) decideLinux(meta *metav1.ObjectMeta, spec *corev1.PodSpec, facts Facts, pod bool) (d Decision, handled bool) {
	if facts.Operation == Update && pod {
		return Decision{}, false // pods/ephemeralcontainers: the node is already chosen
	}
	why := p.linuxByDefault(facts.Namespace)
	if why == "" || p.OSSignal(spec, facts.Cluster) != "" {
		return Decision{}, false
	}
	if meta.Labels[LabelSkip] == "true" {
		return Decision{Skipped: "object is labelled " + LabelSkip + "=true"}, true
	}
	if pod {
		if ref := metav1.GetControllerOfNoCopy(meta); ref != nil && ref.Kind == "DaemonSet" {
			// The DaemonSet controller made it for one node and binds it there by node affinity; pin the
			// DaemonSet's template instead.
			return Decision{Skipped: "pod belongs to DaemonSet " + ref.Name + ", which chose its node"}, true
		}
		if spec.NodeName != "" {
			return Decision{Skipped: "pod is already bound to node " + spec.NodeName}, true
		}
	}
	rec := &recorder{}
	reason := linuxPinReason(why)
	if len(spec.NodeSelector) == 0 && len(requiredTerms(spec)) > 0 {
		// Kept in the form the object uses: its own terms, each narrowed to Linux.
		requireInEveryTerm(spec, corev1.NodeSelectorRequirement{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Linux)}}, reason, RuleLinuxByDefault, rec)
	} else {
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[corev1.LabelOSStable] = string(corev1.Linux)
		rec.add(Change{Action: Inject, Path: "spec.nodeSelector[" + corev1.LabelOSStable + "]", To: jsonValue(corev1.Linux), Reason: reason, Rule: RuleLinuxByDefault})
	}
	key := AnnotationTemplateChanges
	if pod {
		key = AnnotationChanges
	}
	record := recordChanges(meta, key, rec.changes)
	return Decision{Linux: true, Changes: rec.changes, changesJSON: record}, true
}
