package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/wincompat/wincompat/policy"
)

// Kinds of finding on the Linux side of a mixed cluster.
const (
	// NoOSPin: a workload, or a pod no workload the audit reads controls and not scheduled yet, that
	// chooses no operating system and whose pods the scheduler may place on Windows nodes (their taints
	// tolerated, or absent: the AKS default).
	NoOSPin = "no-os-pin"
	// DaemonSetOnWindows: a DaemonSet that is not Windows, yet targets Windows nodes: the DaemonSet
	// controller makes a pod for each, and each fails there.
	DaemonSetOnWindows = "daemonset-on-windows"
	// WindowsTaintUntolerated: a ready Windows node's taint that no Windows pod (DaemonSet pods aside)
	// tolerates.
	WindowsTaintUntolerated = "windows-taint-untolerated"
)

// windowsNode is what the Linux-side findings need of a ready Windows node.
type windowsNode struct {
	node *corev1.Node // labels and taints only
	// tolerated marks, by index into node.Spec.Taints, the taints some Windows pod tolerates.
	tolerated []bool
}

func (a *auditor) keepWindowsNode(n *corev1.Node) {
	kept := &corev1.Node{}
	kept.Name, kept.Labels, kept.Spec.Taints = n.Name, n.Labels, n.Spec.Taints
	a.windowsNodes = append(a.windowsNodes, &windowsNode{node: kept, tolerated: make([]bool, len(n.Spec.Taints))})
}

// comparisonOperators is the TaintTolerationComparisonOperators feature gate (Gt and Lt tolerations),
// off by default in Kubernetes 1.36.
const comparisonOperators = false

// hardTaint: the effects that keep pods off a node (PreferNoSchedule only discourages).
func hardTaint(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// noteTolerations records which Windows node taints a Windows pod tolerates.
func (a *auditor) noteTolerations(spec *corev1.PodSpec) {
	a.windowsPodsSeen = true
	for _, wn := range a.windowsNodes {
		for i := range wn.node.Spec.Taints {
			if !wn.tolerated[i] && schedulingcorev1.TolerationsTolerateTaint(logr.Discard(), spec.Tolerations, &wn.node.Spec.Taints[i], comparisonOperators) {
				wn.tolerated[i] = true
			}
		}
	}
}

// daemonTolerations are the tolerations the DaemonSet controller gives every daemon pod besides its
// template's (kubernetes pkg/controller/daemon/util AddOrUpdateDaemonPodTolerations, v1.36), so that
// node conditions do not keep daemons off: a cordoned Windows node is still targeted.
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// reachableWindowsNodes are the ready Windows nodes a pod of spec could be placed on, judged as the
// scheduler and the DaemonSet controller (NodeShouldRunDaemonPod) judge it: required node affinity
// (nodeSelector included) and the NoSchedule and NoExecute taints.
func (a *auditor) reachableWindowsNodes(spec *corev1.PodSpec, daemon bool) []string {
	pod := &corev1.Pod{Spec: *spec}
	if daemon {
		pod.Spec.Tolerations = append(slices.Clone(spec.Tolerations), daemonTolerations...)
		if spec.HostNetwork {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	spec = &pod.Spec
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	var names []string
	for _, wn := range a.windowsNodes {
		if ok, _ := affinity.Match(wn.node); !ok {
			continue
		}
		if _, untolerated := schedulingcorev1.FindMatchingUntoleratedTaint(logr.Discard(), wn.node.Spec.Taints, spec.Tolerations, hardTaint, comparisonOperators); untolerated {
			continue
		}
		names = append(names, wn.node.Name)
	}
	return names
}

// linuxFix is what the Linux-side findings advise.
const linuxFix = "label its namespace " + policy.LabelDefaultOS + "=linux (or set linuxByDefault), or give it a kubernetes.io/os nodeSelector"

// linuxTemplate reports a workload that is not Windows and chooses no operating system, when its pods
// can reach Windows nodes. A workload controlled by another that this run read is left to its
// controller, which says what pods will be made: an old ReplicaSet's template is a past revision of its
// Deployment's, a Job's a copy of its CronJob's at the time, and each would repeat or contradict it.
func (a *auditor) linuxTemplate(ctx context.Context, kind string, t templateOf) {
	if a.controlledByRead(&t.meta) {
		return
	}
	reachable := a.unpinnedReach(ctx, &t.tpl.Spec, kind == "DaemonSet")
	if len(reachable) == 0 {
		return
	}
	obj, nodes := kind+"/"+t.meta.Name, nodeList(reachable)
	if kind == "DaemonSet" {
		a.finding(DaemonSetOnWindows, t.meta.Namespace, obj, fmt.Sprintf("chooses no operating system and targets Windows %s: the DaemonSet controller makes a pod for each, which fails there; %s", nodes, linuxFix))
		return
	}
	a.finding(NoOSPin, t.meta.Namespace, obj, fmt.Sprintf("chooses no operating system and its pods may be scheduled onto Windows %s; %s", nodes, linuxFix))
}

// linuxPod reports a pod that chooses no operating system and that the scheduler may still place on a
// Windows node: not bound yet, and controlled by no workload the audit reads (a bare pod, or one an
// operator's custom resource made), since those are judged by their template. A bound pod has been
// placed; what recreates it is what matters, and a workload's template says that.
func (a *auditor) linuxPod(ctx context.Context, p *corev1.Pod) {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil && auditedKind(ref) {
		// Its controller's template made it and is judged. Pods are read before workloads, so whether
		// that controller is read too cannot be known here, as it is for templates.
		return
	}
	reachable := a.unpinnedReach(ctx, &p.Spec, false)
	if len(reachable) == 0 {
		return
	}
	a.finding(NoOSPin, p.Namespace, "Pod/"+p.Name, fmt.Sprintf("chooses no operating system and, not scheduled yet, may be placed onto Windows %s; %s, then create it again", nodeList(reachable), linuxFix))
}

// unpinnedReach are the ready Windows nodes a pod of spec may be placed on when spec chooses no
// operating system; none when it chooses one, or when nodes could not be read.
func (a *auditor) unpinnedReach(ctx context.Context, spec *corev1.PodSpec, daemon bool) []string {
	if !a.nodesKnown || len(a.windowsNodes) == 0 {
		return nil
	}
	if a.pol.OSSignal(spec, nil) != "" {
		return nil
	}
	if spec.RuntimeClassName != nil {
		// Only a class outside the catalog needs the cluster's RuntimeClasses, so they are read only then.
		cluster := a.clusterFacts(ctx)
		if cluster == nil && !a.osClassNoted {
			a.osClassNoted = true
			a.report.Notes = append(a.report.Notes, "RuntimeClasses: "+reason(a.clusterErr)+"; one outside the policy's catalog was not taken as choosing an operating system")
		}
		if a.pol.OSSignal(spec, cluster) != "" {
			return nil
		}
	}
	return a.reachableWindowsNodes(spec, daemon)
}

// finishTaints reports the hard taints of ready Windows nodes that no Windows pod tolerates (DaemonSet
// pods aside: they tolerate what their node carries): Windows workloads cannot be scheduled there.
// Without any such Windows pod there is nothing to say. Kubernetes' own node-state taints (not-ready
// lingering on a node that turned ready, a cordon) say nothing of the operating system, and no
// workload should tolerate them: the policy's taint rule leaves them out.
func (a *auditor) finishTaints() {
	if !a.windowsPodsSeen {
		return
	}
	for _, wn := range a.windowsNodes {
		for i, t := range wn.node.Spec.Taints {
			if hardTaint(&t) && !wn.tolerated[i] && a.pol.WindowsNodeTaint(t) != policy.TaintNodeState {
				a.finding(WindowsTaintUntolerated, "", "Node/"+wn.node.Name, fmt.Sprintf("taint %s is tolerated by no Windows pod: none can be scheduled there; if it marks the operating system, add it to the policy's windowsNodeTaints", t.ToString()))
			}
		}
	}
}

func nodeList(names []string) string {
	slices.Sort(names)
	const shown = 3
	what := "node " + names[0]
	if len(names) > 1 {
		what = "nodes " + strings.Join(names[:min(shown, len(names))], ", ")
	}
	if len(names) > shown {
		what += fmt.Sprintf(" and %d more", len(names)-shown)
	}
	return what
}
