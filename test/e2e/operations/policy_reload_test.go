package operations

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestPolicyReload: the policy file (the chart's ConfigMap) changes under a running server: a valid
// change applies without a restart; an invalid one is refused, the last good policy stays, and the
// refusal shows in wincompat_policy_valid.
func TestPolicyReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(content string) {
		t.Helper()
		// Like the kubelet updating a ConfigMap volume: the new content appears at once, whole.
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write("apiVersion: wincompat.io/v1alpha1\nkind: Policy\n")
	cl := e2eutil.StartClusterWith(t, nil, func(o *server.Options) {
		o.PolicyFile, o.PolicyPollInterval = file, 100*time.Millisecond
	})
	toleratedValue := func() string {
		pod := e2eutil.WindowsPod(e2eutil.ReadyNamespace, "reload")
		if err := cl.C.Create(context.Background(), pod, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		for _, tol := range pod.Spec.Tolerations {
			if tol.Key == "os" && tol.Effect == corev1.TaintEffectNoSchedule {
				return tol.Value
			}
		}
		return ""
	}
	waitForValue := func(want string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for toleratedValue() != want {
			if time.Now().After(deadline) {
				t.Fatalf("pods still tolerate os=%s, want os=%s", toleratedValue(), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	valid := func() float64 {
		mfs, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "wincompat_policy_valid" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("wincompat_policy_valid not registered")
		return -1
	}

	if got := toleratedValue(); got != "windows" {
		t.Fatalf("default policy: pods tolerate os=%s", got)
	}
	write("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaints:\n- {key: os, value: Windows, effect: NoSchedule}\n")
	waitForValue("Windows")
	if valid() != 1 {
		t.Error("wincompat_policy_valid is not 1 after a valid change")
	}

	write("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaints: oops\n")
	deadline := time.Now().Add(15 * time.Second)
	for valid() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("an invalid policy file is not reported in wincompat_policy_valid")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := toleratedValue(); got != "Windows" {
		t.Errorf("after an invalid change pods tolerate os=%s; the last good policy (os=Windows) must stay", got)
	}
}
