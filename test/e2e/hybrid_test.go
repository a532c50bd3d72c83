package e2e

// Issue 15, hybrid mode: the MutatingAdmissionPolicies of the static part, installed as the chart
// installs them (wincompat serve --engine=hybrid writes none: issue 40), do it in the API server; the
// webhook, failurePolicy Ignore as hybrid installs it, adds what needs the cluster. With every replica gone, Windows pods are still admitted valid and scheduled
// onto Windows nodes, only without the build decision; in webhook-only mode (failurePolicy Fail, no
// admission policy) the same stream fails. Pods admitted after wincompat is back get the build again.

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/audit"
	"github.com/wincompat/wincompat/webhook/server"
)

func TestHybridEngine(t *testing.T) {
	ctx := context.Background()
	cl := startClusterWith(t, []controlplane.Option{controlplane.WithScheduler()}, func(o *server.Options) { o.Engine = server.EngineHybrid })
	requireAdmissionPolicies(t, cl.cfg)
	cl.addNode(t, testNode{"linux-0", "linux", ""})
	cl.addNode(t, testNode{"win2022-0", "windows", build2022})
	const ns = "hybrid"
	cl.newNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})

	// The chart's policies, bindings and params.
	installed := installHybridPolicies(t, cl.c, policy.Default())
	setWebhookFailurePolicy(t, cl, admissionregistrationv1.Ignore) // as hybrid installs the webhook

	// Up: the webhook adds the build on top of the admission policy's work.
	up := windowsChartPod(ns, "while-up", "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "app")
	if err := cl.c.Create(ctx, up); err != nil {
		t.Fatal(err)
	}
	if up.Annotations[policy.AnnotationBuild] != build2022 {
		t.Errorf("with wincompat up, the pod has build %q, want %s", up.Annotations[policy.AnnotationBuild], build2022)
	}

	cl.stopServing()
	const stream = 30
	created, failed := createStream(t, cl, ns, "hybrid-down", stream)
	if failed > 0 {
		t.Errorf("hybrid, every replica down: %d of %d Windows pod creations failed, want 0", failed, stream)
	}
	bound := cl.waitForWindowsNodes(t, ns, created)
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
	rep, err := audit.Run(ctx, cl.c, audit.Options{Namespaces: []string{ns}})
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
	setWebhookFailurePolicy(t, cl, admissionregistrationv1.Fail)
	if err := cl.c.DeleteAllOf(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}, client.MatchingLabels{"app.kubernetes.io/managed-by": "wincompat"}); err != nil {
		t.Fatal(err)
	}
	_, failedWebhook := createStream(t, cl, ns, "webhook-down", stream)
	t.Logf("webhook-only, every replica down: %d of %d Windows pod creations failed", failedWebhook, stream)
	if failedWebhook != stream {
		t.Errorf("webhook-only with no replica: %d of %d creations failed, want all (failurePolicy Fail)", failedWebhook, stream)
	}

	// Back up in hybrid mode (helm upgrade installs the bindings again), and new pods get the build.
	cl.serve(t, func(o *server.Options) { o.Engine = server.EngineHybrid })
	setWebhookFailurePolicy(t, cl, admissionregistrationv1.Ignore)
	for i := range installed.Bindings {
		b := installed.Bindings[i].DeepCopy()
		b.ResourceVersion, b.UID = "", ""
		create(ctx, t, cl.c, b)
	}
	waitForManaged(t, cl, &admissionregistrationv1.MutatingAdmissionPolicyBindingList{}, len(admissionpolicy.Names()))
	later := windowsChartPod(ns, "after-restart", "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "app")
	if err := cl.c.Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	if later.Annotations[policy.AnnotationBuild] != build2022 {
		t.Errorf("a pod admitted after the restart has build %q, want %s", later.Annotations[policy.AnnotationBuild], build2022)
	}
}

// installHybridPolicies installs what the chart installs for engine hybrid with pol: the admission
// policies, their bindings and their params (wincompat serve writes none of them).
func installHybridPolicies(t *testing.T, c client.Client, pol *policy.Policy) admissionpolicy.Rendering {
	t.Helper()
	r := admissionpolicy.Render(pol, admissionpolicy.Options{Version: "e2e-hybrid"})
	installAdmissionPolicies(context.Background(), t, c, r)
	return r
}

// waitForManaged waits until list holds n objects labelled as wincompat's.
func waitForManaged(t *testing.T, cl *cluster, list client.ObjectList, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := cl.c.List(context.Background(), list, client.MatchingLabels{"app.kubernetes.io/managed-by": "wincompat"}); err != nil {
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
func createStream(t *testing.T, cl *cluster, ns, prefix string, n int) ([]*corev1.Pod, int) {
	t.Helper()
	var created []*corev1.Pod
	failed := 0
	for i := range n {
		p := windowsChartPod(ns, fmt.Sprintf("%s-%d", prefix, i), "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "app", "sidecar")
		if err := cl.c.Create(context.Background(), p); err != nil {
			failed++
			continue
		}
		created = append(created, p)
	}
	return created, failed
}

// waitForWindowsNodes waits until the scheduler binds every pod, fails for any bound elsewhere or left
// unschedulable, and returns how many are on a Windows node.
func (cl *cluster) waitForWindowsNodes(t *testing.T, ns string, pods []*corev1.Pod) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		onWindows, undecided := 0, 0
		for _, p := range pods {
			var got corev1.Pod
			if err := cl.c.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
				t.Fatal(err)
			}
			switch {
			case got.Spec.NodeName == "win2022-0":
				onWindows++
			case got.Spec.NodeName != "":
				t.Fatalf("pod %s bound to %s, not a Windows node", p.Name, got.Spec.NodeName)
			case unschedulable(&got):
				t.Fatalf("pod %s is unschedulable: %v", p.Name, got.Status.Conditions)
			default:
				undecided++
			}
		}
		if undecided == 0 {
			return onWindows
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pods of %s not bound after 60s", undecided, ns)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// setWebhookFailurePolicy sets every webhook of wincompat's configuration to fp.
func setWebhookFailurePolicy(t *testing.T, cl *cluster, fp admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := cl.c.Get(context.Background(), client.ObjectKey{Name: webhookConfigName}, &cfg); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].FailurePolicy = &fp
	}
	if err := cl.c.Update(context.Background(), &cfg); err != nil {
		t.Fatal(err)
	}
	// The API server reads webhook configurations from its informer.
	time.Sleep(time.Second)
}
