package perf

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// RunPeakRSS runs cmd to its end and returns its peak resident set in bytes, read from /proc/PID/status
// (VmHWM) every 5 ms while it runs. Not rusage's Maxrss: Go starts a child with vfork, so the child runs
// in its parent's memory until it execs, and Linux keeps the larger of that memory's peak and the
// program's own; a lab that filled a cluster first would read its own peak there, not the child's.
func RunPeakRSS(cmd *exec.Cmd) (int64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	var peak atomic.Int64
	exited, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if kb, ok := vmHWM(cmd.Process.Pid); ok {
				peak.Store(max(peak.Load(), kb*1024))
			}
			select {
			case <-exited:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	close(exited)
	<-sampled
	return peak.Load(), err
}

// vmHWM is the process's peak resident set in KiB.
func vmHWM(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}
