package controlplane

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// startScheduler runs bin/k8s/kube-scheduler against env's API server until t ends. It returns once the
// scheduler reports ready (its informers have synced), so that placement tests time only scheduling.
// Its stderr goes to a file in t's temp dir, and its tail is logged when t fails or the scheduler
// exits early.
func startScheduler(t testing.TB, env *envtest.Environment) {
	t.Helper()
	dir, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kube-scheduler")
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		root, _ := RepoRoot()
		t.Fatalf("kube-scheduler missing from %s: run `make k8s` in %s to build the test control plane", dir, root)
	}

	// system:masters, like the admin config: the scheduler's own RBAC role would do, but nothing here
	// bootstraps it, and what is under test is placement, not the scheduler's permissions.
	user, err := env.AddUser(envtest.User{Name: "e2e-kube-scheduler", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("kube-scheduler credentials: %v", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("kube-scheduler kubeconfig: %v", err)
	}
	work := t.TempDir()
	kubeconfigPath := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	stderrPath := filepath.Join(work, "kube-scheduler.log")
	stderr, err := os.Create(stderrPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close() // the child has its own descriptor

	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfigPath,
		"--leader-elect=false", // one scheduler, and no Lease to wait for
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(work, "certs"), // its self-signed serving certificate
		// The default client QPS (50) makes binding 400 pods, each with an Event, take seconds for no
		// benefit to the test; a real cluster's scheduler would be tuned the same way at this churn.
		"--kube-api-qps=500", "--kube-api-burst=1000",
	)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting kube-scheduler: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	logTail := func(why string) {
		t.Logf("kube-scheduler %s; the end of its stderr (%s):\n%s", why, stderrPath, tail(stderrPath, 8<<10))
	}
	gone := false // the process has exited and exited has been drained
	t.Cleanup(func() {
		if gone {
			return
		}
		select {
		case err := <-exited:
			// Pods would stay Pending without it: say so rather than let a placement test time out
			// with no explanation.
			t.Errorf("kube-scheduler exited during the test: %v", err)
			logTail("exited early")
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			logTail("output, as the test failed")
		}
	})

	// Ready once /readyz answers 200, which includes the scheduler's informer sync. /readyz is on the
	// scheduler's always-allowed paths; its certificate is self-signed, hence InsecureSkipVerify.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			gone = true
			logTail("exited before it was ready")
			t.Fatalf("kube-scheduler exited before it was ready: %v", err)
		default:
		}
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			logTail("was not ready after 30s")
			t.Fatalf("kube-scheduler not ready at %s after 30s", url)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort returns a loopback TCP port nobody listens on yet.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n bytes of a file, or why it could not be read.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
