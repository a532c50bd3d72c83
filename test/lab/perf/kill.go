package perf

import (
	"fmt"
	"syscall"
)

// Kill sends SIGKILL, as a failed node or the OOM killer ends a process: nothing is finished or
// released (a leader's Lease stays held until it expires). It returns once the process has exited.
func (s *Server) Kill() error {
	select {
	case <-s.exited:
		return fmt.Errorf("%s had exited before SIGKILL: %v", s.name(), s.err)
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-s.exited
	return nil
}
