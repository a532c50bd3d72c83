package e2eutil

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
)

// InstallHybridPolicies installs what the chart installs for engine hybrid with pol: the admission
// policies, their bindings and their params (wincompat serve writes none of them).
func InstallHybridPolicies(t *testing.T, c client.Client, pol *policy.Policy) admissionpolicy.Rendering {
	t.Helper()
	r := admissionpolicy.Render(pol, admissionpolicy.Options{Version: "e2e-hybrid"})
	InstallAdmissionPolicies(context.Background(), t, c, r)
	return r
}

// WaitForWindowsNodes waits until the scheduler binds every pod, fails for any bound elsewhere or left
// unschedulable, and returns how many are on a Windows node.
func (cl *Cluster) WaitForWindowsNodes(t *testing.T, ns string, pods []*corev1.Pod) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		onWindows, undecided := 0, 0
		for _, p := range pods {
			var got corev1.Pod
			if err := cl.C.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
				t.Fatal(err)
			}
			switch {
			case got.Spec.NodeName == "win2022-0":
				onWindows++
			case got.Spec.NodeName != "":
				t.Fatalf("pod %s bound to %s, not a Windows node", p.Name, got.Spec.NodeName)
			case Unschedulable(&got):
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

// SetWebhookFailurePolicy sets every webhook of wincompat's configuration to fp, except the opt-in
// hint, which only warns and which the chart renders Ignore in every configuration.
func SetWebhookFailurePolicy(t *testing.T, cl *Cluster, fp admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := cl.C.Get(context.Background(), client.ObjectKey{Name: WebhookConfigName}, &cfg); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Webhooks {
		if cfg.Webhooks[i].Name == optInHintWebhook {
			continue
		}
		cfg.Webhooks[i].FailurePolicy = &fp
	}
	if err := cl.C.Update(context.Background(), &cfg); err != nil {
		t.Fatal(err)
	}
	// The API server reads webhook configurations from its informer.
	time.Sleep(time.Second)
}

// optInHintWebhook is the webhook that only warns of a mistyped opt-in label.
const optInHintWebhook = "pods-opt-in.wincompat.io"
