package load

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Proc is what /proc says of a process at one moment.
type Proc struct {
	// CPU is user plus system time since the process started.
	CPU time.Duration
	// RSS is the resident set now (VmRSS); PeakRSS the largest since start or the last ResetPeakRSS
	// (VmHWM), so a phase's peak needs no sampling.
	RSS, PeakRSS int64
	// RSSAnon is the anonymous part of RSS (RssAnon: heap, stacks), without the pages of the binary and
	// other files, which a container's memory limit reclaims before it kills: what an OOM kill counts.
	RSSAnon int64
}

// ReadProc reads the CPU time and resident memory of process pid from /proc.
func ReadProc(pid int) (Proc, error) {
	var p Proc
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, err
	}
	// The command name (field 2) is in parentheses and may hold spaces; utime and stime are fields 14
	// and 15, that is the 12th and 13th after it.
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(fields) < 13 {
		return p, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return p, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	hz, err := clockTicks()
	if err != nil {
		return p, err
	}
	p.CPU = time.Duration(ticks) * time.Second / time.Duration(hz)

	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, err
	}
	defer status.Close()
	s := bufio.NewScanner(status)
	for s.Scan() {
		key, value, _ := strings.Cut(s.Text(), ":")
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &p.RSS
		case "VmHWM":
			dst = &p.PeakRSS
		case "RssAnon":
			dst = &p.RSSAnon
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return p, fmt.Errorf("/proc/%d/status %s: %w", pid, key, err)
		}
		*dst = kb << 10
	}
	return p, s.Err()
}

// ResetPeakRSS makes the kernel restart pid's peak resident set (VmHWM) from its current size.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// clockTicks is the unit of the CPU times in /proc/PID/stat (sysconf(_SC_CLK_TCK)), which the kernel
// hands every process in its auxiliary vector as AT_CLKTCK.
var clockTicks = sync.OnceValues(func() (int64, error) {
	const atClkTck = 17
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 0, err
	}
	for i := 0; i+16 <= len(auxv); i += 16 {
		if binary.NativeEndian.Uint64(auxv[i:]) == atClkTck {
			return int64(binary.NativeEndian.Uint64(auxv[i+8:])), nil
		}
	}
	return 0, fmt.Errorf("/proc/self/auxv has no AT_CLKTCK")
})

// Children returns the processes whose parent is pid, by command name (/proc/PID/comm).
func Children(pid int) (map[string]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			continue // exited meanwhile
		}
		i := bytes.LastIndexByte(stat, ')')
		j := bytes.IndexByte(stat, '(')
		fields := strings.Fields(string(stat[i+1:]))
		if i < 0 || j < 0 || len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		out[string(stat[j+1:i])] = child
	}
	return out, nil
}

// MachineCPU is the CPU time all processors of the machine have spent busy since boot (user, nice,
// system, irq, softirq and steal time in /proc/stat), to tell how much of a phase's CPU went to
// processes outside the measurement.
func MachineCPU() (time.Duration, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if !s.Scan() {
		return 0, fmt.Errorf("/proc/stat: empty")
	}
	fields := strings.Fields(s.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", s.Text())
	}
	var ticks int64
	// user nice system idle iowait irq softirq steal: all but idle and iowait.
	for i, f := range fields[1:9] {
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += n
	}
	hz, err := clockTicks()
	if err != nil {
		return 0, err
	}
	return time.Duration(ticks) * time.Second / time.Duration(hz), nil
}
