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
	"strings"
	"syscall"
	"time"
)

// component is a running control-plane process beside the API server and etcd: kube-scheduler, or
// Kubernetes' controllers (test/cmd/controllers). Each runs from bin/k8s as a client of the API server with a kubeconfig of its own.
type component struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has exited; then err is its Wait error
	err     error
}

// startComponent runs bin/k8s/<name> with args (given the path of its kubeconfig, a system:masters user
// of cp's API server) and its log (stdout and stderr) in work, and returns once readyURL answers 200.
// On error nothing is left running.
func startComponent(cp *ControlPlane, work, name string, args func(kubeconfig string) []string, readyURL string) (*component, error) {
	dir, err := BinDir()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, name)
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		root, _ := RepoRoot()
		return nil, fmt.Errorf("%s missing from %s: run `make k8s` in %s to build the test control plane", name, dir, root)
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	// system:masters, like the admin config: the component's own RBAC role would do, but nothing here
	// bootstraps it, and what is under test is what it does, not its permissions.
	kubeconfigPath := filepath.Join(work, "kubeconfig")
	if err := cp.WriteKubeConfig(kubeconfigPath, "e2e-"+name, "system:masters"); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &component{name: name, logPath: filepath.Join(work, name+".log"), exited: make(chan struct{})}
	logFile, err := os.Create(c.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor

	c.cmd = exec.Command(bin, args(kubeconfigPath)...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	// Like envtest's etcd and API server, a process group of its own, so that a Ctrl-C in the terminal
	// reaches only the program that started it, which stops it in order; and killed with its parent, so
	// that it is not left behind when that program dies without cleaning up.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.exited)
	}()

	// kube-scheduler's certificate is self-signed, hence InsecureSkipVerify; /readyz is on its
	// always-allowed paths.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-c.exited:
			return nil, fmt.Errorf("%s exited before it was ready: %v; %s", name, c.err, c.logTail())
		default:
		}
		if resp, err := hc.Get(readyURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("%s not ready at %s after 30s; %s", name, readyURL, c.logTail())
			return nil, errors.Join(err, c.stop())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the process: SIGTERM, and SIGKILL after 10 s. One that had already exited is an error (pods
// would have stayed Pending, objects undeleted, without it): say so rather than let a test time out with
// no explanation.
func (c *component) stop() error {
	select {
	case <-c.exited:
		return fmt.Errorf("%s exited while the control plane ran: %v; %s", c.name, c.err, c.logTail())
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	return nil
}

func (c *component) logTail() string {
	return fmt.Sprintf("the end of its output (%s):\n%s", c.logPath, tail(c.logPath, 8<<10))
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
