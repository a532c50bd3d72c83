package webhook

// Issue 15, hybrid mode: the MutatingAdmissionPolicies of the static part, installed as the chart
// installs them (wincompat serve --engine=hybrid writes none: issue 40), do it in the API server; the
// webhook, failurePolicy Ignore as hybrid installs it, adds what needs the cluster. With every replica gone, Windows pods are still admitted valid and scheduled
// onto Windows nodes, only without the build decision; in webhook-only mode (failurePolicy Fail, no
// admission policy) the same stream fails. Pods admitted after wincompat is back get the build again.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/audit"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

func TestHybridEngine(t *testing.T) {
	ctx := context.Background()
	cl := e2eutil.StartClusterWith(t, []controlplane.Option{controlplane.WithScheduler()}, func(o *server.Options) { o.Engine = server.EngineHybrid })
	e2eutil.RequireAdmissionPolicies(t, cl.Cfg)
	cl.AddNode(t, e2eutil.TestNode{Name: "linux-0", OS: "linux", Build: ""})
	cl.AddNode(t, e2eutil.TestNode{Name: "win2022-0", OS: "windows", Build: e2eutil.Build2022})
	const ns = "hybrid"
	cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})

	// The chart's policies, bindings and params.
	installed := e2eutil.InstallHybridPolicies(t, cl.C, policy.Default())
	e2eutil.SetWebhookFailurePolicy(t, cl, admissionregistrationv1.Ignore) // as hybrid installs the webhook

	// Up: the webhook adds the build on top of the admission policy's work.
	up := e2eutil.WindowsChartPod(ns, "while-up", "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "app")
	if err := cl.C.Create(ctx, up); err != nil {
		t.Fatal(err)
	}
	if up.Annotations[policy.AnnotationBuild] != e2eutil.Build2022 {
		t.Errorf("with wincompat up, the pod has build %q, want %s", up.Annotations[policy.AnnotationBuild], e2eutil.Build2022)
	}

	// A mistyped opt-in: the admission policies' bindings select wincompat.io/enabled=true alone, as the
	// webhooks that mutate do, so the API server refuses the pod's Linux-only fields; the hint comes
	// from the webhook in this engine too, with the refusal.
	const mistyped = "hybrid-yes"
	cl.NewNamespace(t, mistyped, map[string]string{policy.LabelEnabled: "True"})
	cl.Warnings.Take()
	err := cl.C.Create(ctx, e2eutil.WindowsChartPod(mistyped, "mistyped", "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "app"))
	if !apierrors.IsInvalid(err) {
		t.Errorf("a Windows chart pod where the enable label is mistyped: want the API server's refusal, got %v", err)
	}
	if got := e2eutil.WincompatWarnings(cl.Warnings.Take()); len(got) != 1 || !strings.Contains(got[0], "label wincompat.io/enabled=True does not opt the namespace in") {
		t.Errorf("hybrid engine, mistyped opt-in: wincompat's warnings %q, want the opt-in hint", got)
	}

	cl.StopServing()
	const stream = 30
	created, failed := createStream(t, cl, ns, "hybrid-down", stream)
	if failed > 0 {
		t.Errorf("hybrid, every replica down: %d of %d Windows pod creations failed, want 0", failed, stream)
	}
	bound := cl.WaitForWindowsNodes(t, ns, created)
	for _, p := range created {
		if p.Annotations[policy.AnnotationAdmissionPolicy] == "" || p.Annotations[policy.AnnotationVersion] != "" || p.Annotations[policy.AnnotationChanges] == "" {
			t.Errorf("pod %s admitted while down carries no record: %v", p.Name, p.Annotations)
		}
		if p.Annotations[policy.AnnotationBuild] != "" {
			t.Errorf("pod %s admitted while down has a build %q: only the webhook decides builds", p.Name, p.Annotations[policy.AnnotationBuild])
		}
		// The leader watches only pods so labelled: these are the ones it must not miss.
		if p.Labels[policy.LabelOS] != string(corev1.Windows) {
			t.Errorf("pod %s admitted while down is labelled %s=%q, want windows", p.Name, policy.LabelOS, p.Labels[policy.LabelOS])
		}
	}
	// The audit names them.
	rep, err := audit.Run(ctx, cl.C, audit.Options{Namespaces: []string{ns}})
	if err != nil {
		t.Fatal(err)
	}
	without := 0
	for _, f := range rep.Findings {
		if f.Kind == audit.WithoutBuildDecision {
			without++
		}
	}
	if without != len(created) {
		t.Errorf("audit: %d %s findings, want %d (the pods admitted while down)", without, audit.WithoutBuildDecision, len(created))
	}
	t.Logf("hybrid, every replica down: %d of %d Windows pods created (valid: the API server's Windows validation passed), %d bound to the Windows node, none with a build decision", len(created), stream, bound)

	// Webhook-only mode beside it: failurePolicy Fail and no admission policy.
	e2eutil.SetWebhookFailurePolicy(t, cl, admissionregistrationv1.Fail)
	if err := cl.C.DeleteAllOf(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}, client.MatchingLabels{"app.kubernetes.io/managed-by": "wincompat"}); err != nil {
		t.Fatal(err)
	}
	_, failedWebhook := createStream(t, cl, ns, "webhook-down", stream)
	t.Logf("webhook-only, every replica down: %d of %d Windows pod creations failed", failedWebhook, stream)
	if failedWebhook != stream {
		t.Errorf("webhook-only with no replica: %d of %d creations failed, want all (failurePolicy Fail)", failedWebhook, stream)
	}

	// Back up in hybrid mode (helm upgrade installs the bindings again), and new pods get the build.
	cl.Serve(t, func(o *server.Options) { o.Engine = server.EngineHybrid })
	e2eutil.SetWebhookFailurePolicy(t, cl, admissionregistrationv1.Ignore)
	for i := range installed.Bindings {
		b := installed.Bindings[i].DeepCopy()
		b.ResourceVersion, b.UID = "", ""
		e2eutil.Create(ctx, t, cl.C, b)
	}
	waitForManaged(t, cl, &admissionregistrationv1.MutatingAdmissionPolicyBindingList{}, len(admissionpolicy.Names()))
	later := e2eutil.WindowsChartPod(ns, "after-restart", "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "app")
	if err := cl.C.Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	if later.Annotations[policy.AnnotationBuild] != e2eutil.Build2022 {
		t.Errorf("a pod admitted after the restart has build %q, want %s", later.Annotations[policy.AnnotationBuild], e2eutil.Build2022)
	}
}

// waitForManaged waits until list holds n objects labelled as wincompat's.
func waitForManaged(t *testing.T, cl *e2eutil.Cluster, list client.ObjectList, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := cl.C.List(context.Background(), list, client.MatchingLabels{"app.kubernetes.io/managed-by": "wincompat"}); err != nil {
			t.Fatal(err)
		}
		got, _ := apimeta.ExtractList(list)
		if len(got) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %T items after 30s, want %d", len(got), list, n)
		}
	}
}

// createStream creates n Windows chart pods one after another and returns those stored and the
// number refused.
func createStream(t *testing.T, cl *e2eutil.Cluster, ns, prefix string, n int) ([]*corev1.Pod, int) {
	t.Helper()
	var created []*corev1.Pod
	failed := 0
	for i := range n {
		p := e2eutil.WindowsChartPod(ns, fmt.Sprintf("%s-%d", prefix, i), "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "app", "sidecar")
		if err := cl.C.Create(context.Background(), p); err != nil {
			failed++
			continue
		}
		created = append(created, p)
	}
	return created, failed
}
