package audit

import (
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"

	"github.com/wincompat/wincompat/policy"
)

// WindowsTaintUntolerated: a ready Windows node's taint that no Windows pod (DaemonSet pods aside)
// tolerates.
const WindowsTaintUntolerated = "windows-taint-untolerated"

// windowsTaints learns, pod by pod, which taints of the ready Windows nodes some Windows pod tolerates,
// and reports at the end the hard ones none does: Windows workloads cannot be scheduled there.
type windowsTaints struct {
	pol   *policy.Policy
	nodes *nodes
	out   *sink
	// podsSeen: some Windows pod (not a daemon's) was read; without one there is nothing to say.
	podsSeen bool
	// open are the distinct taints of ready Windows nodes that could be reported and that no Windows
	// pod read so far tolerates: each pod is judged against these few, not against every node, and
	// once all are tolerated a pod costs nothing. Worked out with the first pod (opened).
	open   []corev1.Taint
	opened bool
	// untolerated are the taints of open, by what a toleration reads of them.
	untolerated map[taintKey]bool
}

// taintKey is what a toleration reads of a taint: two taints alike in these are tolerated alike.
type taintKey struct {
	key, value string
	effect     corev1.TaintEffect
}

func keyOf(t *corev1.Taint) taintKey { return taintKey{t.Key, t.Value, t.Effect} }

// comparisonOperators is the TaintTolerationComparisonOperators feature gate (Gt and Lt tolerations),
// off by default in Kubernetes 1.36.
const comparisonOperators = false

// hardTaint: the effects that keep pods off a node (PreferNoSchedule only discourages).
func hardTaint(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// reportable: a hard taint that says something of where workloads can go. Kubernetes' own node-state
// taints (not-ready lingering on a node that turned ready, a cordon) say nothing of the operating
// system, and no workload should tolerate them: the policy's taint rule leaves them out.
func (w *windowsTaints) reportable(t *corev1.Taint) bool {
	return hardTaint(t) && w.pol.WindowsNodeTaint(*t) != policy.TaintNodeState
}

// pod records which Windows node taints a Windows pod tolerates. A daemon pod tolerates whatever its
// node carries, so it says nothing of where workloads can go: the caller leaves those out.
func (w *windowsTaints) pod(spec *corev1.PodSpec) {
	w.podsSeen = true
	if !w.opened {
		w.opened = true
		w.untolerated = map[taintKey]bool{}
		for _, n := range w.nodes.readyWindows {
			for i := range n.Spec.Taints {
				t := &n.Spec.Taints[i]
				if k := keyOf(t); w.reportable(t) && !w.untolerated[k] {
					w.untolerated[k] = true
					w.open = append(w.open, *t)
				}
			}
		}
	}
	w.open = slices.DeleteFunc(w.open, func(t corev1.Taint) bool {
		if !schedulingcorev1.TolerationsTolerateTaint(logr.Discard(), spec.Tolerations, &t, comparisonOperators) {
			return false
		}
		delete(w.untolerated, keyOf(&t))
		return true
	})
}

// finish reports, node by node, the reportable taints of ready Windows nodes that no Windows pod
// tolerates.
func (w *windowsTaints) finish() {
	if !w.podsSeen {
		return
	}
	for _, n := range w.nodes.readyWindows {
		for _, t := range n.Spec.Taints {
			if w.untolerated[keyOf(&t)] {
				w.out.finding(WindowsTaintUntolerated, "", "Node/"+n.Name, fmt.Sprintf("taint %s is tolerated by no Windows pod: none can be scheduled there; if it marks the operating system, add it to the policy's windowsNodeTaints", t.ToString()))
			}
		}
	}
}
