package audit

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/webhook/scheduling/inventory"
)

// nodes are what the findings need of the cluster's Windows nodes, read once before any pod: each one's
// build, the builds of ready ones, and the ready ones themselves (labels and taints only).
type nodes struct {
	// known: every node was read; without it, the build findings are skipped.
	known bool
	build map[string]string // node name -> Windows build
	// revision is each Windows node's revision, from status.nodeInfo.kernelVersion, where it reports one.
	revision   map[string]int
	readyBuild map[string]bool
	// readyWindows are the ready Windows nodes, for the Linux-side and taint findings.
	readyWindows []*corev1.Node
	// windows are the names of every Windows node, ready or not, for the CSI drivers registered there.
	windows map[string]bool
}

func newNodes() *nodes {
	return &nodes{build: map[string]string{}, revision: map[string]int{}, readyBuild: map[string]bool{}, windows: map[string]bool{}}
}

func (n *nodes) add(node *corev1.Node) {
	if node.Labels[corev1.LabelOSStable] != string(corev1.Windows) {
		return
	}
	n.windows[node.Name] = true
	ready := inventory.NodeReady(node)
	if ready {
		kept := &corev1.Node{}
		kept.Name, kept.Labels, kept.Spec.Taints = node.Name, node.Labels, node.Spec.Taints
		n.readyWindows = append(n.readyWindows, kept)
	}
	if r, ok := inventory.NodeRevision(node); ok {
		n.revision[node.Name] = r
	}
	if b := node.Labels[corev1.LabelWindowsBuild]; b != "" {
		n.build[node.Name] = b
		if ready {
			n.readyBuild[b] = true
		}
	}
}
