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
)

// linuxSide reports the other direction of a mixed cluster: workloads and pods that choose no operating
// system yet may be placed on ready Windows nodes, judged as the scheduler and the DaemonSet controller
// judge them.
type linuxSide struct {
	pol         *policy.Policy
	nodes       *nodes
	cluster     *clusterFacts
	controllers *controllers
	out         *sink
	// classesNoted: the note that the cluster's RuntimeClasses could not be read is given once.
	classesNoted bool
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
// (nodeSelector included) and the NoSchedule and NoExecute taints. Judged once per group of alike nodes
// (nodeGroup), so that a template costs the same whatever the number of Windows nodes; node by node
// only within the groups whose taints it tolerates, when its affinity reads what tells nodes apart.
func (l *linuxSide) reachableWindowsNodes(spec *corev1.PodSpec, daemon bool) reach {
	pod := &corev1.Pod{Spec: *spec}
	if daemon {
		pod.Spec.Tolerations = append(slices.Clone(spec.Tolerations), daemonTolerations...)
		if spec.HostNetwork {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	spec = &pod.Spec
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	groups := l.nodes.windowsGroups()
	oneByOne := l.nodes.readsDistinguishing(spec)
	var r reach
	for _, g := range groups {
		if _, untolerated := schedulingcorev1.FindMatchingUntoleratedTaint(logr.Discard(), g.taints, spec.Tolerations, hardTaint, comparisonOperators); untolerated {
			continue
		}
		if !oneByOne {
			if ok, _ := affinity.Match(g.nodes[0]); ok {
				r.add(g.nodes)
			}
			continue
		}
		for _, n := range g.nodes {
			if ok, _ := affinity.Match(n); ok {
				r.add([]*corev1.Node{n})
			}
		}
	}
	return r
}

// reach are nodes a pod may be placed on: how many, and the first few by name, which is all a finding
// names of them.
type reach struct {
	count int
	first []string
}

// add counts nodes, sorted by name.
func (r *reach) add(nodes []*corev1.Node) {
	r.count += len(nodes)
	for _, n := range nodes[:min(shownNodes, len(nodes))] {
		r.first = append(r.first, n.Name)
	}
	slices.Sort(r.first)
	r.first = r.first[:min(shownNodes, len(r.first))]
}

// linuxFix is what the Linux-side findings advise.
const linuxFix = "label its namespace " + policy.LabelDefaultOS + "=linux (or set linuxByDefault), or give it a kubernetes.io/os nodeSelector"

// linuxTemplate reports a workload that is not Windows and chooses no operating system, when its pods
// can reach Windows nodes. A workload controlled by another that this run read is left to its
// controller, which says what pods will be made: an old ReplicaSet's template is a past revision of its
// Deployment's, a Job's a copy of its CronJob's at the time, and each would repeat or contradict it.
func (l *linuxSide) template(ctx context.Context, kind string, t templateOf) {
	if l.controllers.controlledByRead(&t.meta) {
		return
	}
	reachable := l.unpinnedReach(ctx, &t.tpl.Spec, kind == "DaemonSet")
	if reachable.count == 0 {
		return
	}
	obj, where := kind+"/"+t.meta.Name, reachable.String()
	if kind == "DaemonSet" {
		l.out.finding(DaemonSetOnWindows, t.meta.Namespace, obj, fmt.Sprintf("chooses no operating system and targets Windows %s: the DaemonSet controller makes a pod for each, which fails there; %s", where, linuxFix))
		return
	}
	l.out.finding(NoOSPin, t.meta.Namespace, obj, fmt.Sprintf("chooses no operating system and its pods may be scheduled onto Windows %s; %s", where, linuxFix))
}

// linuxPod reports a pod that chooses no operating system and that the scheduler may still place on a
// Windows node: not bound yet, and controlled by no workload the audit reads (a bare pod, or one an
// operator's custom resource made), since those are judged by their template. A bound pod has been
// placed; what recreates it is what matters, and a workload's template says that.
func (l *linuxSide) pod(ctx context.Context, p *corev1.Pod) {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil && auditedKind(ref) {
		// Its controller's template made it and is judged. Pods are read before workloads, so whether
		// that controller is read too cannot be known here, as it is for templates.
		return
	}
	reachable := l.unpinnedReach(ctx, &p.Spec, false)
	if reachable.count == 0 {
		return
	}
	l.out.finding(NoOSPin, p.Namespace, "Pod/"+p.Name, fmt.Sprintf("chooses no operating system and, not scheduled yet, may be placed onto Windows %s; %s, then create it again", reachable.String(), linuxFix))
}

// unpinnedReach are the ready Windows nodes a pod of spec may be placed on when spec chooses no
// operating system; none when it chooses one, or when nodes could not be read.
func (l *linuxSide) unpinnedReach(ctx context.Context, spec *corev1.PodSpec, daemon bool) reach {
	if !l.nodes.known || len(l.nodes.readyWindows) == 0 {
		return reach{}
	}
	if l.pol.OSSignal(spec, nil) != "" {
		return reach{}
	}
	if spec.RuntimeClassName != nil {
		// Only a class outside the catalog needs the cluster's RuntimeClasses, so they are read only then.
		cluster := l.cluster.get(ctx)
		if cluster == nil && !l.classesNoted {
			l.classesNoted = true
			l.out.note("RuntimeClasses: " + l.cluster.why() + "; one outside the policy's catalog was not taken as choosing an operating system")
		}
		if l.pol.OSSignal(spec, cluster) != "" {
			return reach{}
		}
	}
	return l.reachableWindowsNodes(spec, daemon)
}

// shownNodes is how many nodes a finding names; the rest are counted.
const shownNodes = 3

// String names the first nodes and counts the rest: "nodes a, b, c and 4 more".
func (r reach) String() string {
	what := "node " + r.first[0]
	if r.count > 1 {
		what = "nodes " + strings.Join(r.first, ", ")
	}
	if r.count > shownNodes {
		what += fmt.Sprintf(" and %d more", r.count-shownNodes)
	}
	return what
}

func nodeList(names []string) string {
	slices.Sort(names)
	return reach{count: len(names), first: names[:min(shownNodes, len(names))]}.String()
}
