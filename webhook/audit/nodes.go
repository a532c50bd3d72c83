package audit

import (
	"slices"
	"strings"

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

	// What the pods and templates are judged against, worked out once from readyWindows when the first
	// is judged (every node is read before any pod), so that each is judged in time of its own size,
	// not of the number of Windows nodes.
	grouped bool
	// groups are the ready Windows nodes sorted into pools (nodeGroup).
	groups []*nodeGroup
	// distinguishing are the label keys left out of the groups' likeness (distinguishingValues).
	distinguishing map[string]bool
	// readyBuilds are the ready Windows nodes' builds by node name, as the misplaced pods' placement reads them.
	readyBuilds map[string]string
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

// nodeGroup is ready Windows nodes alike for the scheduler: the same taints, and the same labels but the
// distinguishing ones. A pod's tolerations and a node affinity that reads no distinguishing label judge
// every node of a group as they judge its first.
type nodeGroup struct {
	taints []corev1.Taint
	nodes  []*corev1.Node // by name
}

// distinguishingValues: a label key with more values than this among the ready Windows nodes (the
// hostname, a cloud's instance ID) tells nodes apart rather than sorting them into pools, and grouping
// by it would leave a group per node. The bound only decides how fast a pod is judged, never how.
const distinguishingValues = 16

// windowsGroups sorts the ready Windows nodes into groups, once.
func (n *nodes) windowsGroups() []*nodeGroup {
	if n.grouped {
		return n.groups
	}
	n.grouped = true
	values := map[string]map[string]bool{}
	for _, node := range n.readyWindows {
		for k, v := range node.Labels {
			if values[k] == nil {
				values[k] = map[string]bool{}
			}
			values[k][v] = true
		}
	}
	n.distinguishing = map[string]bool{}
	for k, vs := range values {
		if len(vs) > distinguishingValues {
			n.distinguishing[k] = true
		}
	}
	byLikeness := map[string]*nodeGroup{}
	for _, node := range n.readyWindows {
		key := n.likeness(node)
		g := byLikeness[key]
		if g == nil {
			g = &nodeGroup{taints: node.Spec.Taints}
			byLikeness[key] = g
			n.groups = append(n.groups, g)
		}
		g.nodes = append(g.nodes, node)
	}
	for _, g := range n.groups {
		slices.SortFunc(g.nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	}
	return n.groups
}

// likeness is what nodes of one group share: their taints (in any order) and their labels but the
// distinguishing ones.
func (n *nodes) likeness(node *corev1.Node) string {
	parts := make([]string, 0, len(node.Spec.Taints)+len(node.Labels))
	for i := range node.Spec.Taints {
		// Taints and labels cannot be confused: a label value has no ':', a taint always has one.
		parts = append(parts, node.Spec.Taints[i].ToString())
	}
	for k, v := range node.Labels {
		if !n.distinguishing[k] {
			parts = append(parts, k+"="+v)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "\x00")
}

// readsDistinguishing reports whether spec's required node affinity (its nodeSelector included) reads a
// distinguishing label or a field of the node: then the nodes of a group are judged one by one.
func (n *nodes) readsDistinguishing(spec *corev1.PodSpec) bool {
	for k := range spec.NodeSelector {
		if n.distinguishing[k] {
			return true
		}
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(term.MatchFields) > 0 {
			return true
		}
		for _, e := range term.MatchExpressions {
			if n.distinguishing[e.Key] {
				return true
			}
		}
	}
	return false
}

// readyWindowsBuilds are the ready Windows nodes' builds by name, worked out once.
func (n *nodes) readyWindowsBuilds() map[string]string {
	if n.readyBuilds == nil {
		n.readyBuilds = map[string]string{}
		for _, node := range n.readyWindows {
			if b := node.Labels[corev1.LabelWindowsBuild]; b != "" {
				n.readyBuilds[node.Name] = b
			}
		}
	}
	return n.readyBuilds
}
