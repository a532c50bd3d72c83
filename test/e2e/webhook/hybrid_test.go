package webhook

// Issue 15, hybrid mode: the MutatingAdmissionPolicies of the static part, installed as the chart
// installs them (wincompat serve --engine=hybrid writes none: issue 40), do it in the API server; the
// webhook, failurePolicy Ignore as hybrid installs it, adds what needs the cluster. With every replica
// gone, Windows pods are still admitted valid, and wait behind wincompat's scheduling gate with no
// build; in webhook-only mode (failurePolicy Fail, no admission policy) the same stream
// fails. Once a replica is back, its leader decides the gated pods' build and removes the gate, and the
// scheduler binds them to the Windows node; pods admitted then get the build at admission again.

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
	// The admission policies gated it; the webhook, deciding its build in the same request, removed the
	// gate and its label, and the policies, run again after it, did not add them back.
	if policy.Gated(up) || up.Labels[policy.LabelGated] != "" {
		t.Errorf("with wincompat up, the pod is stored with the gates %v and labels %v", up.Spec.SchedulingGates, up.Labels)
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
	for _, p := range created {
		if p.Annotations[policy.AnnotationAdmissionPolicy] == "" || p.Annotations[policy.AnnotationVersion] != "" || p.Annotations[policy.AnnotationChanges] == "" {
			t.Errorf("pod %s admitted while down carries no record: %v", p.Name, p.Annotations)
		}
		// The leader watches only pods so labelled: these are the ones it must not miss.
		if p.Labels[policy.LabelOS] != string(corev1.Windows) || p.Labels[policy.LabelGated] != "true" {
			t.Errorf("pod %s admitted while down is labelled %v, want %s=windows and %s=true", p.Name, p.Labels, policy.LabelOS, policy.LabelGated)
		}
		// Behind the gate, and with no build of any kind: none could be corrected once stored.
		if !policy.Gated(p) || !schedulingGated(p) {
			t.Errorf("pod %s admitted while down is not gated: gates %v, conditions %v", p.Name, p.Spec.SchedulingGates, p.Status.Conditions)
		}
		if b := p.Annotations[policy.AnnotationBuild] + p.Spec.NodeSelector[corev1.LabelWindowsBuild]; b != "" || p.Spec.RuntimeClassName != nil {
			t.Errorf("pod %s admitted while down has a build %q or RuntimeClass %v: only the webhook and the leader decide builds", p.Name, b, p.Spec.RuntimeClassName)
		}
		if e2eutil.HasChange(e2eutil.DecodeChanges(t, p.Annotations, policy.AnnotationChanges), policy.Inject, "spec.schedulingGates") {
			t.Errorf("pod %s admitted while down records the gate: the admission policies record none", p.Name)
		}
	}
	// The audit names them as waiting for the leader, not as admitted without a build decision.
	if gated, without := auditFindings(t, cl.C, ns); gated != len(created) || without != 0 {
		t.Errorf("audit: %d %s and %d %s findings, want %d and 0 (the pods admitted while down)", gated, audit.GatedPod, without, audit.WithoutBuildDecision, len(created))
	}
	t.Logf("hybrid, every replica down: %d of %d Windows pods created (valid: the API server's Windows validation passed), every one gated with no build", len(created), stream)

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
	// The leader decides the gated pods' build (from the image tag: no registry here) and removes the
	// gate; the scheduler then binds each to the Windows node.
	took := waitPlaced(t, cl, created, e2eutil.Build2022)
	if gated, without := auditFindings(t, cl.C, ns); gated != 0 || without != 0 {
		t.Errorf("audit once the leader placed them: %d %s and %d %s findings, want none", gated, audit.GatedPod, without, audit.WithoutBuildDecision)
	}
	t.Logf("hybrid, back up: the leader placed the %d gated pods on build %s and the scheduler bound them, within %v of the restart", len(created), e2eutil.Build2022, took.Round(time.Millisecond))
	later := e2eutil.WindowsChartPod(ns, "after-restart", "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "app")
	if err := cl.C.Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	if later.Annotations[policy.AnnotationBuild] != e2eutil.Build2022 {
		t.Errorf("a pod admitted after the restart has build %q, want %s", later.Annotations[policy.AnnotationBuild], e2eutil.Build2022)
	}
}

// schedulingGated: the API server marked the pod as held by a scheduling gate when it stored it.
func schedulingGated(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonSchedulingGated {
			return true
		}
	}
	return false
}

// auditFindings are the audit's gated-pod and admitted-without-build-decision findings in ns.
func auditFindings(t *testing.T, c client.Client, ns string) (gated, without int) {
	t.Helper()
	rep, err := audit.Run(context.Background(), c, audit.Options{Namespaces: []string{ns}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		switch f.Kind {
		case audit.GatedPod:
			gated++
		case audit.WithoutBuildDecision:
			without++
		}
	}
	return gated, without
}

// waitPlaced waits until every pod has lost wincompat's gate and its label, carries the build pin and
// the webhook's marker, and is bound to the Windows node; it returns how long that took. A pod bound
// elsewhere, or found unschedulable once ungated, fails the test.
func waitPlaced(t *testing.T, cl *e2eutil.Cluster, pods []*corev1.Pod, build string) time.Duration {
	t.Helper()
	start := time.Now()
	for deadline := start.Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		waiting := 0
		for _, p := range pods {
			var got corev1.Pod
			if err := cl.C.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
				t.Fatal(err)
			}
			switch {
			case policy.Gated(&got):
				waiting++
			case got.Labels[policy.LabelGated] != "" || got.Annotations[policy.AnnotationVersion] == "" || got.Spec.NodeSelector[corev1.LabelWindowsBuild] != build:
				t.Fatalf("pod %s ungated without the leader's decision: labels %v, annotations %v, nodeSelector %v", got.Name, got.Labels, got.Annotations, got.Spec.NodeSelector)
			case got.Spec.NodeName == "win2022-0":
			case got.Spec.NodeName != "":
				t.Fatalf("pod %s bound to %s, not the Windows node", got.Name, got.Spec.NodeName)
			case e2eutil.Unschedulable(&got) && !schedulingGated(&got):
				t.Fatalf("pod %s is unschedulable once ungated: %v", got.Name, got.Status.Conditions)
			default:
				waiting++
			}
		}
		if waiting == 0 {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d gated pods not placed 90s after wincompat came back", waiting, len(pods))
		}
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
