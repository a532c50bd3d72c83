package auditing

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/inventory"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestNodesReport: what `wincompat nodes` prints, read from a real API server: per build the node counts,
// taints and RuntimeClass state, and the findings (an untainted Windows node, a Windows node without a
// build label, a build with nodes but no class, a class whose build has no node).
func TestNodesReport(t *testing.T) {
	cl := e2eutil.NewCluster(t)
	ctx := context.Background()
	cl.AddNode(t, e2eutil.TestNode{Name: "linux-0", OS: "linux", Build: ""})
	cl.AddNode(t, e2eutil.TestNode{Name: "win2022-0", OS: "windows", Build: e2eutil.Build2022})
	cl.AddNode(t, e2eutil.TestNode{Name: "win2022-1", OS: "windows", Build: e2eutil.Build2022})
	cl.AddNode(t, e2eutil.TestNode{Name: "win2019-0", OS: "windows", Build: e2eutil.Build2019})
	// An untainted 2019 node, and a Windows node nobody labelled with its build.
	untainted := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win2019-bare", Labels: map[string]string{
		corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: e2eutil.Build2019}}}
	e2eutil.Create(ctx, t, cl.C, untainted)
	e2eutil.Create(ctx, t, cl.C, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-unlabelled", Labels: map[string]string{corev1.LabelOSStable: "windows"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}}})
	// GKE's operating-system taint beside a team's taint: the first is tolerated, the second not.
	e2eutil.Create(ctx, t, cl.C, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win2022-gke", Labels: map[string]string{
		corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: e2eutil.Build2022}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node.kubernetes.io/os", Value: "windows", Effect: corev1.TaintEffectNoSchedule},
			{Key: "dedicated", Value: "team-a", Effect: corev1.TaintEffectNoSchedule},
		}}})
	e2eutil.Create(ctx, t, cl.C, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2022", Labels: map[string]string{"app.kubernetes.io/managed-by": "wincompat"}}, Handler: "runhcs-wcow-process"})
	e2eutil.Create(ctx, t, cl.C, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2025"}, Handler: "runhcs-wcow-process"})

	rows, findings, err := inventory.Report(ctx, cl.C, policy.Default())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]inventory.BuildRow{}
	for _, r := range rows {
		got[r.Build] = r
	}
	for build, want := range map[string]struct {
		nodes, ready int
		state        string
	}{
		e2eutil.Build2019: {2, 1, "missing"}, e2eutil.Build2022: {3, 2, "managed"}, "10.0.26100": {0, 0, "unmanaged"},
	} {
		r := got[build]
		if r.Nodes != want.nodes || r.Ready != want.ready || r.ClassState != want.state {
			t.Errorf("build %s: %d/%d nodes ready, class %s; want %d/%d, %s", build, r.Ready, r.Nodes, r.ClassState, want.ready, want.nodes, want.state)
		}
	}
	var taints []string
	for _, t := range got[e2eutil.Build2022].Taints {
		taints = append(taints, t.String())
	}
	if want := []string{
		// The API server taints a node created without a Ready condition not-ready; wincompat never tolerates it.
		"dedicated=team-a:NoSchedule", "node.kubernetes.io/not-ready:NoSchedule", "node.kubernetes.io/os=windows:NoSchedule (tolerated)", "os=windows:NoSchedule (tolerated)",
	}; !slices.Equal(taints, want) {
		t.Errorf("2022 taints: %q, want %q", taints, want)
	}
	all := strings.Join(findings, "\n")
	for _, want := range []string{
		"node win2019-bare is Windows but has no operating-system taint",
		"node win-unlabelled is Windows but has no node.kubernetes.io/windows-build label",
		"build 10.0.17763 has nodes but no RuntimeClass windows-2019",
		"RuntimeClass windows-2025 is for build 10.0.26100, which has no node",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("findings lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "win2022-0") || strings.Contains(all, "win2022-gke") || strings.Contains(all, "linux-0") {
		t.Errorf("findings name a node that is fine:\n%s", all)
	}
}
