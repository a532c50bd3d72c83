package audit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/wincompat/wincompat/policy"
)

// Issue 41: the audit judges each pod and template against the few distinct taints and groups of alike
// Windows nodes, not against every node. These tests hold it to the answers of the node-by-node rule it
// replaced (written out again here), on pools that differ in taints and labels.

// scaleNodes are 42 ready Windows nodes in six pools, each with its hostname and instance ID (labels
// that tell nodes apart), in three zones, and a node that is not ready.
func scaleNodes() []*corev1.Node {
	osTaint := corev1.Taint{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}
	pools := []struct {
		name   string
		nodes  int
		build  string
		taints []corev1.Taint
	}{
		{"a", 12, b2022, []corev1.Taint{osTaint}},
		{"b", 10, b2022, []corev1.Taint{osTaint, {Key: "sku", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}},
		{"c", 10, b2025, []corev1.Taint{{Key: "dedicated", Value: "legacy", Effect: corev1.TaintEffectNoExecute}, osTaint}},
		{"d", 6, b2022, nil}, // AKS's default: no taint
		{"e", 2, b2022, []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, {Key: "soft", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule}}},
		// Pool c's taint with another effect: tolerated apart.
		{"f", 2, b2022, []corev1.Taint{{Key: "dedicated", Value: "legacy", Effect: corev1.TaintEffectNoSchedule}}},
	}
	var out []*corev1.Node
	for _, p := range pools {
		for i := range p.nodes {
			n := node(fmt.Sprintf("%s-%02d", p.name, i), p.build, true)
			n.Labels[corev1.LabelHostname] = n.Name
			n.Labels["cloud.example/instance-id"] = strconv.Itoa(1000 + len(out))
			n.Labels["agentpool"] = p.name
			n.Labels[corev1.LabelTopologyZone] = fmt.Sprintf("zone-%d", i%3)
			n.Spec.Taints = slices.Clone(p.taints)
			if n.Name == "d-03" {
				n.Labels["special"] = "yes" // alone in its group
			}
			out = append(out, n)
		}
	}
	out = append(out, node("not-ready", b2022, false))
	return out
}

func scaleNodeFacts() *nodes {
	n := newNodes()
	for _, node := range scaleNodes() {
		n.add(node)
	}
	n.known = true
	return n
}

// reachNodeByNode is the rule the Linux side used before issue 41: every ready Windows node, one by one.
func reachNodeByNode(n *nodes, spec *corev1.PodSpec, daemon bool) []string {
	pod := &corev1.Pod{Spec: *spec}
	if daemon {
		pod.Spec.Tolerations = append(slices.Clone(spec.Tolerations), daemonTolerations...)
		if spec.HostNetwork {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	var names []string
	for _, node := range n.readyWindows {
		if ok, _ := affinity.Match(node); !ok {
			continue
		}
		if _, untolerated := schedulingcorev1.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, pod.Spec.Tolerations, hardTaint, comparisonOperators); untolerated {
			continue
		}
		names = append(names, node.Name)
	}
	return names
}

func requiredAffinity(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
}

func TestLinuxSideReachLikeNodeByNode(t *testing.T) {
	all := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	osWindows := corev1.Toleration{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.Toleration{Key: "sku", Operator: corev1.TolerationOpExists}
	for _, tc := range []struct {
		name   string
		spec   corev1.PodSpec
		daemon bool
		count  int // as the node-by-node rule counts, so that a case that reaches nothing proves nothing
	}{
		{"no toleration: the untainted pool", corev1.PodSpec{}, false, 6},
		{"the operating-system taint tolerated", corev1.PodSpec{Tolerations: []corev1.Toleration{osWindows}}, false, 18},
		{"every taint tolerated", corev1.PodSpec{Tolerations: all}, false, 42},
		{"two taints tolerated", corev1.PodSpec{Tolerations: []corev1.Toleration{osWindows, gpu}}, false, 28},
		{"a pool's label", corev1.PodSpec{Tolerations: all, NodeSelector: map[string]string{"agentpool": "b"}}, false, 10},
		{"a label one node has", corev1.PodSpec{NodeSelector: map[string]string{"special": "yes"}}, false, 1},
		{"hostnames", corev1.PodSpec{Tolerations: all, Affinity: requiredAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"a-03", "c-02", "d-01"}}}})}, false, 3},
		{"hostnames, taints not tolerated", corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: "a-03"}}, false, 0},
		// A field selector names one node a term.
		{"a field", corev1.PodSpec{Affinity: requiredAffinity(
			corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"d-01"}}}},
			corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"d-04"}}}},
		)}, false, 2},
		{"instance IDs above a bound", corev1.PodSpec{Tolerations: all, Affinity: requiredAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "cloud.example/instance-id", Operator: corev1.NodeSelectorOpGt, Values: []string{"1030"}}}})}, false, 11},
		{"zones, two terms", corev1.PodSpec{Tolerations: []corev1.Toleration{osWindows}, Affinity: requiredAffinity(
			corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"zone-1"}}}},
			corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "agentpool", Operator: corev1.NodeSelectorOpIn, Values: []string{"d"}}}},
		)}, false, 14},
		{"a label some nodes lack", corev1.PodSpec{Tolerations: all, Affinity: requiredAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "special", Operator: corev1.NodeSelectorOpDoesNotExist}}})}, false, 41},
		{"a daemon tolerates the node states", corev1.PodSpec{}, true, 8},
		{"a daemon on the host network", corev1.PodSpec{HostNetwork: true, Tolerations: []corev1.Toleration{osWindows}}, true, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := scaleNodeFacts()
			l := &linuxSide{pol: policy.Default(), nodes: n}
			want := reachNodeByNode(n, &tc.spec, tc.daemon)
			if len(want) != tc.count {
				t.Fatalf("the node-by-node rule reaches %d nodes, the case expects %d: %q", len(want), tc.count, want)
			}
			got := l.reachableWindowsNodes(&tc.spec, tc.daemon)
			if got.count != len(want) || (len(want) > 0 && got.String() != nodeList(want)) {
				t.Errorf("reaches %d nodes (%v), node by node %d (%s)", got.count, got.first, len(want), nodeList(want))
			}
		})
	}
}

// untoleratedNodeByNode is the rule the taint finding used before issue 41: each taint of each ready
// Windows node against each Windows pod.
func untoleratedNodeByNode(pol *policy.Policy, n *nodes, pods [][]corev1.Toleration) []string {
	if len(pods) == 0 {
		return nil
	}
	var out []string
	for _, node := range n.readyWindows {
		for _, t := range node.Spec.Taints {
			tolerated := slices.ContainsFunc(pods, func(tol []corev1.Toleration) bool {
				return schedulingcorev1.TolerationsTolerateTaint(logr.Discard(), tol, &t, comparisonOperators)
			})
			if hardTaint(&t) && !tolerated && pol.WindowsNodeTaint(t) != policy.TaintNodeState {
				out = append(out, "Node/"+node.Name+" "+t.ToString())
			}
		}
	}
	return out
}

func TestWindowsTaintsLikeNodeByNode(t *testing.T) {
	osWindows := corev1.Toleration{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		pods [][]corev1.Toleration
		want int
	}{
		{"no Windows pod", nil, 0},
		{"pods tolerate nothing", [][]corev1.Toleration{nil, nil}, 12*1 + 10*2 + 10*2 + 2},
		{"the operating-system taint", [][]corev1.Toleration{{osWindows}}, 10 + 10 + 2},
		{"each taint by some pod", [][]corev1.Toleration{{osWindows}, {{Key: "sku", Operator: corev1.TolerationOpExists}}, {{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "legacy"}}}, 0},
		{"the wrong effect", [][]corev1.Toleration{{osWindows}, {{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}, 20},
		{"the wrong value", [][]corev1.Toleration{{osWindows, {Key: "sku", Operator: corev1.TolerationOpEqual, Value: "cpu"}}}, 22},
		{"everything, late", [][]corev1.Toleration{nil, {osWindows}, {{Operator: corev1.TolerationOpExists}}, nil}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, n := policy.Default(), scaleNodeFacts()
			want := untoleratedNodeByNode(pol, n, tc.pods)
			if len(want) != tc.want {
				t.Fatalf("node by node, %d untolerated taints, the case expects %d: %q", len(want), tc.want, want)
			}
			out := newSink()
			w := &windowsTaints{pol: pol, nodes: n, out: out}
			for _, tol := range tc.pods {
				w.pod(&corev1.PodSpec{Tolerations: tol})
			}
			w.finish()
			var got []string
			for _, f := range out.findings {
				taint, _, _ := strings.Cut(strings.TrimPrefix(f.Detail, "taint "), " ")
				got = append(got, f.Object+" "+taint)
			}
			if !slices.Equal(got, want) {
				t.Errorf("untolerated:\n got %q\nwant %q", got, want)
			}
		})
	}
}
