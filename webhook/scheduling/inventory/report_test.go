package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/pagedfake"
)

func reportNode(name, os, build string, ready bool, taints ...corev1.Taint) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelOSStable: os, corev1.LabelArchStable: "amd64"}},
		Spec:   corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
	if build != "" {
		n.Labels[corev1.LabelWindowsBuild] = build
	}
	return n
}

// TestReportPaged: `wincompat nodes` reads nodes page by page (client-go's pager asks 500 at a time)
// and summarises every page, not only the first.
func TestReportPaged(t *testing.T) {
	const build2022, build2019 = "10.0.20348", "10.0.17763"
	osTaint := corev1.Taint{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}
	objs := []client.Object{
		reportNode("linux-0", "linux", "", true),
		reportNode("win2019-bare", "windows", build2019, true),
		reportNode("win-unlabelled", "windows", "", true, osTaint),
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2022", Labels: map[string]string{"app.kubernetes.io/managed-by": "wincompat"}}, Handler: "runhcs-wcow-process"},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2025"}, Handler: "runhcs-wcow-process"},
	}
	// More than a page of 2022 nodes, the last ones with a team's taint.
	for i := range 1234 {
		taints := []corev1.Taint{osTaint}
		if i >= 1200 {
			taints = append(taints, corev1.Taint{Key: "dedicated", Value: "team-a", Effect: corev1.TaintEffectNoSchedule})
		}
		objs = append(objs, reportNode(fmt.Sprintf("win2022-%04d", i), "windows", build2022, i%2 == 0, taints...))
	}
	c, requests := pagedfake.New(objs...)
	rows, findings, err := Report(context.Background(), c, policy.Default())
	if err != nil {
		t.Fatal(err)
	}
	if got := requests["*v1.NodeList"]; got != 3 {
		t.Errorf("%d requests for 1,237 nodes, want 3 pages of 500", got)
	}
	got := map[string]BuildRow{}
	for _, r := range rows {
		got[r.Build] = r
	}
	if r := got[build2022]; r.Nodes != 1234 || r.Ready != 617 || r.ClassState != "managed" ||
		!slices.Equal(r.Taints, []NodeTaint{{"dedicated=team-a:NoSchedule", false}, {"os=windows:NoSchedule", true}}) {
		t.Errorf("2022: %+v", r)
	}
	if r := got[build2019]; r.Nodes != 1 || r.ClassState != "missing" {
		t.Errorf("2019: %+v", r)
	}
	if r := got["10.0.26100"]; r.Nodes != 0 || r.ClassState != "unmanaged" {
		t.Errorf("2025: %+v", r)
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
	if len(findings) != 4 {
		t.Errorf("%d findings, want 4:\n%s", len(findings), all)
	}
}
