package audit

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// TestWarnModeAfterEnforce: objects enforce mode rewrote before their namespace moved to warn mode
// are not would-change: enforce mode would change nothing more, and their readiness warnings are the
// run-time findings of their record. An object warn mode left as it came still is, with its
// readiness warnings beside the changes.
func TestWarnModeAfterEnforce(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{
		policy.LabelEnabled: "true", policy.LabelMode: policy.ModeWarn}}}
	rewritten := readyPod(t, "rewritten", nil)
	deploy, _ := readyDeployment(t)
	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "web"}, Spec: readySpec()}
	freshDeploy := &appsv1.Deployment{ObjectMeta: meta("fresh", "uid-fresh"), Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: readySpec()}}}
	rep := run(t, Options{}, []client.Object{ns, rewritten, deploy, fresh, freshDeploy}...)
	got := findings(rep, WouldChange)
	if len(got) != 2 || !strings.HasPrefix(got[0], WouldChange+" Deployment/fresh: ") || !strings.HasPrefix(got[1], WouldChange+" Pod/fresh: ") {
		t.Fatalf("would-change findings:\n%s", strings.Join(got, "\n"))
	}
	for _, f := range got {
		for _, want := range []string{"inject metadata.labels", "warn spec.containers[app].resources.limits.memory"} {
			if !strings.Contains(f, want) {
				t.Errorf("a fresh object's would-change lacks %q: %s", want, f)
			}
		}
	}
	if runTime := findings(rep, "run-time-memory-no-limit"); len(runTime) == 0 {
		t.Errorf("the rewritten objects' recorded readiness warnings are not reported: %v", rep.Findings)
	}
	for _, row := range rep.Namespaces {
		if row.Namespace == "web" && row.WouldChange != 2 {
			t.Errorf("namespace web counts %d would-change objects, want 2", row.WouldChange)
		}
	}
}
