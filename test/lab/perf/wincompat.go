package perf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// Wincompat says how StartWincompat runs `wincompat serve` for a load tool.
type Wincompat struct {
	// Bin is the wincompat binary; WorkDir gets its kubeconfig and its log, wincompat.log.
	Bin, WorkDir string
	// Env is added to the environment, such as GOMAXPROCS=1.
	Env []string
	// Flags come after the shared ones (serving certificate, port, kubeconfig, loopback addresses, no
	// RuntimeClass management, no misplaced watcher), so that one of them may override a shared one.
	Flags []string
	// Self is the name the calling program is metered under, as its generator.
	Self string
	// Log is the name of its log in WorkDir; wincompat.log when empty.
	Log string
}

// StartWincompat runs `wincompat serve` on the port envtest pointed cp's webhook configurations at, with
// the serving certificate envtest made for 127.0.0.1, no RuntimeClass management (nothing but admission
// should use the server's core), metrics and probes on loopback ports. It waits until the server is
// ready and returns it with a meter of it, the caller, kube-apiserver and etcd: the control plane is
// measured too, so that what it does is not counted as other work.
func StartWincompat(ctx context.Context, cp *controlplane.ControlPlane, w Wincompat) (*Server, *Meter, error) {
	kubeconfig, err := cp.KubeConfig("wincompat", "system:masters")
	if err != nil {
		return nil, nil, err
	}
	kubeconfigPath := filepath.Join(w.WorkDir, "wincompat.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return nil, nil, err
	}
	var ports [2]int
	for i := range ports {
		if ports[i], err = controlplane.FreePort(); err != nil {
			return nil, nil, err
		}
	}
	args := []string{"serve",
		"--cert-dir", cp.Webhook.CertDir, "--bind-address", "127.0.0.1", "--port", strconv.Itoa(cp.Webhook.Port), "--kubeconfig", kubeconfigPath,
		"--manage-runtimeclasses=false", "--watch-misplaced=false",
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(ports[0]),
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(ports[1]),
	}
	// The last of a repeated flag wins: a caller that measures the watcher turns it back on.
	args = append(args, w.Flags...)
	fmt.Printf("wincompat: %s %s %s\n", strings.Join(w.Env, " "), w.Bin, strings.Join(args, " "))
	logName := w.Log
	if logName == "" {
		logName = "wincompat.log"
	}
	server, err := StartServer(w.Bin, args, w.Env, filepath.Join(w.WorkDir, logName))
	if err != nil {
		return nil, nil, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := server.WaitReady(readyCtx, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])); err != nil {
		return nil, nil, errors.Join(err, server.Stop(10*time.Second))
	}
	meter := &Meter{
		Pids:       map[string]int{"wincompat": server.Pid, w.Self: os.Getpid()},
		MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]),
	}
	children, err := load.Children(os.Getpid())
	if err != nil {
		return nil, nil, errors.Join(err, server.Stop(10*time.Second))
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if pid, ok := children[name]; ok {
			meter.Pids[name] = pid
		}
	}
	return server, meter, nil
}

// PodWebhookTimeout reads the timeoutSeconds of wincompat's pod webhook from its configuration
// (deploy/webhook/mutatingwebhookconfiguration.yaml): how long the API server waits for an answer.
func PodWebhookTimeout(path string) (int32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var wc admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.Unmarshal(b, &wc); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	for _, w := range wc.Webhooks {
		if w.Name == "pods.wincompat.io" && w.TimeoutSeconds != nil {
			return *w.TimeoutSeconds, nil
		}
	}
	return 0, fmt.Errorf("%s: no timeoutSeconds for pods.wincompat.io", path)
}
