package policy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The three rules that say which objects are wincompat's and what a Windows node's taint means. The
// webhook decides with them (through Decide) and the audit explains with them, so that the report of
// what wincompat did and the deciding itself cannot drift apart.

// OutOfScope says why wincompat leaves an object's Windows side alone; InScope when it decides on it.
type OutOfScope int

const (
	InScope OutOfScope = iota
	// ExcludedNamespace: the namespace is one of the policy's excludedNamespaces (kube-system by
	// default; the server adds its own namespace).
	ExcludedNamespace
	// NamespaceNotEnabled: the namespace is not labelled wincompat.io/enabled=true.
	NamespaceNotEnabled
	// SkipLabelled: the object is labelled wincompat.io/skip=true.
	SkipLabelled
)

// Scope is the rule of which objects wincompat decides on as Windows ones: objectLabels are the
// object's own (a pod's, or a workload's pod template's). When several reasons hold, the first of
// excluded namespace, unlabelled namespace, skip label is given, as Decide reports it.
func (p *Policy) Scope(objectLabels map[string]string, ns Namespace) OutOfScope {
	switch {
	case slices.Contains(p.ExcludedNamespaces, ns.Name):
		return ExcludedNamespace
	case ns.Labels[LabelEnabled] != "true":
		return NamespaceNotEnabled
	case objectLabels[LabelSkip] == "true":
		return SkipLabelled
	}
	return InScope
}

// inScope reports why an object in this namespace with these labels is left alone ("" when it is not),
// in the words of Decision.Skipped.
func (p *Policy) inScope(meta *metav1.ObjectMeta, ns Namespace) string {
	switch p.Scope(meta.Labels, ns) {
	case ExcludedNamespace:
		return "namespace " + ns.Name + " is excluded by policy"
	case NamespaceNotEnabled:
		return "namespace is not labelled " + LabelEnabled + "=true"
	case SkipLabelled:
		return "object is labelled " + LabelSkip + "=true"
	}
	return ""
}

// IsWindows is the Windows test without its change: spec.os; else a nodeSelector or
// required node affinity that admits only Windows nodes (kubernetes.io/os or the beta label, when the
// policy infers the OS from them); else a namespace labelled wincompat.io/default-os=windows, unless
// the pod is pinned to Linux. It says nothing of scope (Scope).
func (p *Policy) IsWindows(spec *corev1.PodSpec, ns Namespace) bool {
	skip, _ := p.windowsReason(spec, ns)
	return skip == ""
}

// TaintMeaning is what a taint of a Windows node means to Windows pods.
type TaintMeaning int

const (
	// TaintToleratedByWindowsPods: wincompat gives Windows pods a toleration for it (WindowsPodsTolerate):
	// one of the policy's windowsNodeTaints, or an operating-system taint with a Windows value.
	TaintToleratedByWindowsPods TaintMeaning = iota
	// TaintNodeState: one of the taints Kubernetes itself puts on a node to say its state (not ready,
	// unreachable, cordoned, under pressure, not initialised by its cloud provider). It says nothing of
	// the operating system, and no workload should tolerate it to get onto the node.
	TaintNodeState
	// TaintUnknown: anything else, a team's or a platform's. Windows pods do not tolerate it; if it marks
	// the operating system, it belongs in the policy's windowsNodeTaints.
	TaintUnknown
)

// nodeStateTaints are the taint keys the kubelet, the node lifecycle controller, kubectl cordon and the
// cloud controller manager manage (k8s.io/api/core/v1 well_known_taints.go, and k8s.io/cloud-provider
// api for the two node.cloudprovider.kubernetes.io ones). They come and go with the node's state.
var nodeStateTaints = []string{
	corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, corev1.TaintNodeUnschedulable,
	corev1.TaintNodeMemoryPressure, corev1.TaintNodeDiskPressure, corev1.TaintNodePIDPressure,
	corev1.TaintNodeNetworkUnavailable, corev1.TaintNodeOutOfService,
	"node.cloudprovider.kubernetes.io/uninitialized", "node.cloudprovider.kubernetes.io/shutdown",
}

// WindowsNodeTaint is the OS-taint rule applied to a taint found on a Windows node. A taint the policy
// names in windowsNodeTaints is tolerated whatever its key: the policy's author asked for it.
func (p *Policy) WindowsNodeTaint(t corev1.Taint) TaintMeaning {
	switch {
	case p.WindowsPodsTolerate(t):
		return TaintToleratedByWindowsPods
	case slices.Contains(nodeStateTaints, t.Key):
		return TaintNodeState
	}
	return TaintUnknown
}
