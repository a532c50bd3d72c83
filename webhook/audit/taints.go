package audit

import (
	"fmt"

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
	// tolerated marks, by node name and index into its taints, the taints some Windows pod tolerates.
	tolerated map[string][]bool
}

// comparisonOperators is the TaintTolerationComparisonOperators feature gate (Gt and Lt tolerations),
// off by default in Kubernetes 1.36.
const comparisonOperators = false

// hardTaint: the effects that keep pods off a node (PreferNoSchedule only discourages).
func hardTaint(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// pod records which Windows node taints a Windows pod tolerates. A daemon pod tolerates whatever its
// node carries, so it says nothing of where workloads can go: the caller leaves those out.
func (w *windowsTaints) pod(spec *corev1.PodSpec) {
	w.podsSeen = true
	if w.tolerated == nil {
		w.tolerated = map[string][]bool{}
	}
	for _, n := range w.nodes.readyWindows {
		tolerated, ok := w.tolerated[n.Name]
		if !ok {
			tolerated = make([]bool, len(n.Spec.Taints))
			w.tolerated[n.Name] = tolerated
		}
		for i := range n.Spec.Taints {
			if !tolerated[i] && schedulingcorev1.TolerationsTolerateTaint(logr.Discard(), spec.Tolerations, &n.Spec.Taints[i], comparisonOperators) {
				tolerated[i] = true
			}
		}
	}
}

// finish reports the hard taints of ready Windows nodes that no Windows pod tolerates. Kubernetes' own
// node-state taints (not-ready lingering on a node that turned ready, a cordon) say nothing of the
// operating system, and no workload should tolerate them: the policy's taint rule leaves them out.
func (w *windowsTaints) finish() {
	if !w.podsSeen {
		return
	}
	for _, n := range w.nodes.readyWindows {
		for i, t := range n.Spec.Taints {
			if hardTaint(&t) && !w.tolerated[n.Name][i] && w.pol.WindowsNodeTaint(t) != policy.TaintNodeState {
				w.out.finding(WindowsTaintUntolerated, "", "Node/"+n.Name, fmt.Sprintf("taint %s is tolerated by no Windows pod: none can be scheduled there; if it marks the operating system, add it to the policy's windowsNodeTaints", t.ToString()))
			}
		}
	}
}
