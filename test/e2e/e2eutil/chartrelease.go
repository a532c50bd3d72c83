package e2eutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/test/controlplane"
)

// ChartRelease is the chart installed as a user installs it (bin/helm against the real API server, as
// an administrator) with wincompat running as a user's cluster would run the chart's Deployment: a
// replica process with the Deployment's own arguments, the chart's ServiceAccount's identity, and the
// policy ConfigMap as a file. The only change to what the chart renders is the network path: a
// post-renderer points the webhooks' clientConfig at the replica's loopback port, as a Service would
// route to its pod.
type ChartRelease struct {
	t              *testing.T
	c              client.Client
	admin          string // kubeconfig of helm's user
	serviceAccount string // kubeconfig of the chart's ServiceAccount
	postRenderer   string
	policyFile     string
	port           int // the webhook port the post-renderer names
	bin            string
}

func NewChartRelease(t *testing.T, cl *Cluster) *ChartRelease {
	t.Helper()
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &ChartRelease{t: t, c: cl.C, port: port, policyFile: filepath.Join(dir, "policy.yaml"), postRenderer: filepath.Join(dir, "to-loopback.sh"),
		bin: BuildWincompat(t)}
	script := fmt.Sprintf("#!/bin/sh\nexec sed -E 's#service: \\{name: [^,]+, namespace: [^,]+, path: ([^,]+), port: 443\\}#url: \"https://127.0.0.1:%d\\1\"#'\n", port)
	if err := os.WriteFile(r.postRenderer, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r.admin = WriteKubeConfig(t, cl, "chart-admin", "system:masters")
	r.serviceAccount = WriteKubeConfig(t, cl, "system:serviceaccount:"+OwnNamespace+":wincompat", "system:serviceaccounts", "system:serviceaccounts:"+OwnNamespace)
	return r
}

// Helm runs `helm ARGS... wincompat` against the control plane, with the post-renderer on install and
// upgrade, and returns its output (stdout and stderr).
func (r *ChartRelease) Helm(args ...string) (string, error) {
	r.t.Helper()
	args = append(args, "--namespace", OwnNamespace, "--kubeconfig", r.admin)
	if args[0] == "upgrade" || args[0] == "install" {
		args = append(args, "--post-renderer", r.postRenderer)
	}
	out, stderr, err := RunHelm(r.t, args...)
	return string(out) + stderr, err
}

// Upgrade is `helm upgrade --install wincompat deploy/helm/wincompat` with more arguments.
func (r *ChartRelease) Upgrade(extra ...string) (string, error) {
	r.t.Helper()
	return r.Helm(append([]string{"upgrade", "--install", "wincompat", "deploy/helm/wincompat"}, extra...)...)
}

// SyncPolicyFile writes the policy ConfigMap's content to the replica's policy file, at once, as the
// kubelet swaps a ConfigMap volume, and returns it.
func (r *ChartRelease) SyncPolicyFile() string {
	r.t.Helper()
	content := PolicyConfigMap(r.t, r.c, "wincompat-policy")
	if err := os.WriteFile(r.policyFile+".tmp", []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(r.policyFile+".tmp", r.policyFile); err != nil {
		r.t.Fatal(err)
	}
	return content
}

// Replica is a wincompat serve process with the arguments of the chart's Deployment as installed now,
// on loopback ports (the webhook's is the post-renderer's), not started yet. Its cleanup stops it.
func (r *ChartRelease) Replica() *Replica {
	t := r.t
	t.Helper()
	var d appsv1.Deployment
	if err := r.c.Get(context.Background(), client.ObjectKey{Namespace: OwnNamespace, Name: "wincompat"}, &d); err != nil {
		t.Fatal(err)
	}
	rep := &Replica{Bin: r.bin, WorkDir: t.TempDir(), Port: r.port}
	for _, p := range []*int{&rep.ProbePort, &rep.MetricsP} {
		var err error
		if *p, err = controlplane.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		name, _, _ := strings.Cut(arg, "=")
		switch name {
		case "--port":
			arg = "--port=" + strconv.Itoa(rep.Port)
		case "--metrics-bind-address":
			arg = "--metrics-bind-address=127.0.0.1:" + strconv.Itoa(rep.MetricsP)
		case "--health-probe-bind-address":
			arg = "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(rep.ProbePort)
		case "--policy":
			arg = "--policy=" + r.policyFile
		}
		rep.Args = append(rep.Args, arg)
	}
	rep.Args = append(rep.Args, "--bind-address=127.0.0.1", "--tls-san=127.0.0.1", "--namespace="+OwnNamespace, "--kubeconfig="+r.serviceAccount,
		"--shutdown-delay=0")
	t.Cleanup(func() {
		if rep.Server != nil && rep.Exited() == nil {
			_ = rep.Stop(10 * time.Second)
		}
	})
	return rep
}
