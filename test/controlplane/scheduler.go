package controlplane

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// scheduler is a running bin/k8s/kube-scheduler.
type scheduler struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has exited; then err is its Wait error
	err     error
}

// startScheduler runs bin/k8s/kube-scheduler against cp's API server, with its kubeconfig, certificates
// and log (stdout and stderr) in work. It returns once the scheduler reports ready (its informers have
// synced), so that placement tests time only scheduling. On error nothing is left running.
func startScheduler(cp *ControlPlane, work string) (*scheduler, error) {
	dir, err := BinDir()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "kube-scheduler")
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		root, _ := RepoRoot()
		return nil, fmt.Errorf("kube-scheduler missing from %s: run `make k8s` in %s to build the test control plane", dir, root)
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}

	// system:masters, like the admin config: the scheduler's own RBAC role would do, but nothing here
	// bootstraps it, and what is under test is placement, not the scheduler's permissions.
	kubeconfig, err := cp.KubeConfig("e2e-kube-scheduler", "system:masters")
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler: %w", err)
	}
	kubeconfigPath := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &scheduler{logPath: filepath.Join(work, "kube-scheduler.log"), exited: make(chan struct{})}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor

	s.cmd = exec.Command(bin,
		"--kubeconfig="+kubeconfigPath,
		"--leader-elect=false", // one scheduler, and no Lease to wait for
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(work, "certs"), // its self-signed serving certificate
		// The default client QPS (50) makes binding 400 pods, each with an Event, take seconds for no
		// benefit to the test; a real cluster's scheduler would be tuned the same way at this churn.
		"--kube-api-qps=500", "--kube-api-burst=1000",
	)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// Like envtest's etcd and API server, a process group of its own, so that a Ctrl-C in the terminal
	// reaches only the program that started it, which stops it in order; and killed with its parent, so
	// that it is not left behind when that program dies without cleaning up.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-scheduler: %w", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()

	// Ready once /readyz answers 200, which includes the scheduler's informer sync. /readyz is on the
	// scheduler's always-allowed paths; its certificate is self-signed, hence InsecureSkipVerify.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("kube-scheduler exited before it was ready: %v; %s", s.err, s.logTail())
		default:
		}
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("kube-scheduler not ready at %s after 30s; %s", url, s.logTail())
			return nil, errors.Join(err, s.stop())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the scheduler: SIGTERM, and SIGKILL after 10 s. A scheduler that had already exited is an
// error (pods would have stayed Pending without it): say so rather than let a placement test time out
// with no explanation.
func (s *scheduler) stop() error {
	select {
	case <-s.exited:
		return fmt.Errorf("kube-scheduler exited while the control plane ran: %v; %s", s.err, s.logTail())
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	return nil
}

func (s *scheduler) logTail() string {
	return fmt.Sprintf("the end of its output (%s):\n%s", s.logPath, tail(s.logPath, 8<<10))
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

// TailLines returns the last n lines of a file, or why it could not be read: the end of a process's log
// for an error message.
func TailLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
