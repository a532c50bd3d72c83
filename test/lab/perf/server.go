package perf

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wincompat/wincompat/test/controlplane"
)

// Server is `wincompat serve` (or a peer) running as a child process, as it runs in a cluster: its own address
// space, garbage collector and scheduler, so that its CPU time and memory can be read from /proc.
type Server struct {
	Pid     int
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error
}

// StartServer runs bin with args and the extra environment env (such as GOMAXPROCS=1), its output in
// logPath.
func StartServer(bin string, args, env []string, logPath string) (*Server, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	s := &Server{LogPath: logPath, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	// A process group of its own: a Ctrl-C reaches only this program, which stops the server before
	// the API server it talks to. Should this program die without stopping it, the kernel stops it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	s.Pid = s.cmd.Process.Pid
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// name is the program's for messages: "wincompat serve", or a peer's.
func (s *Server) name() string {
	if len(s.cmd.Args) > 1 && s.cmd.Args[1] == "serve" {
		return filepath.Base(s.cmd.Path) + " serve"
	}
	return filepath.Base(s.cmd.Path)
}

// WaitReady polls url (its /readyz) until it answers 200, the server exits or ctx ends.
func (s *Server) WaitReady(ctx context.Context, url string) error {
	hc := &http.Client{Timeout: time.Second}
	for {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%s exited: %v; the end of its log (%s):\n%s", s.name(), s.err, s.LogPath, controlplane.TailLines(s.LogPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w; the end of its log (%s):\n%s", s.name(), url, ctx.Err(), s.LogPath, controlplane.TailLines(s.LogPath, 20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM, which lets the server finish what is in flight, and SIGKILL after grace.
func (s *Server) Stop(grace time.Duration) error {
	select {
	case <-s.exited:
		return fmt.Errorf("%s had exited: %v; the end of its log (%s):\n%s", s.name(), s.err, s.LogPath, controlplane.TailLines(s.LogPath, 20))
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return nil
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", s.name(), grace)
	}
}

// Running reports whether the server has not exited (crashed, killed by the OOM killer, or stopped).
func (s *Server) Running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// ExitError is how the server exited, once it has (nil while it runs or after a clean exit).
func (s *Server) ExitError() error {
	select {
	case <-s.exited:
		return s.err
	default:
		return nil
	}
}
