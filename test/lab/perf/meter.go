package perf

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// Meter reads what the processes involved spend during a phase, and what wincompat counted. Besides
// the processes by name, it reports the whole machine's busy time as "machine": what that exceeds
// their sum by went to processes outside the measurement.
type Meter struct {
	// Pids of the processes to read, by the name they are reported under.
	Pids map[string]int
	// MetricsURL is wincompat's /metrics.
	MetricsURL string
}

// Span is a phase being measured.
type Span struct {
	m      *Meter
	start  time.Time
	procs  map[string]load.Proc
	admits Admissions
}

// Start restarts every process's peak RSS, so that the phase's peak is its own, and takes the first
// reading.
func (m *Meter) Start(ctx context.Context) (*Span, error) {
	s := &Span{m: m}
	for name, pid := range m.Pids {
		if err := load.ResetPeakRSS(pid); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	var err error
	if s.procs, err = m.read(); err != nil {
		return nil, err
	}
	if s.admits, err = ScrapeAdmissions(ctx, m.MetricsURL); err != nil {
		return nil, err
	}
	s.start = time.Now()
	return s, nil
}

// End takes the second reading and returns the phase with r's figures.
func (s *Span) End(ctx context.Context, r *load.Result) (Phase, error) {
	wall := time.Since(s.start)
	procs, err := s.m.read()
	if err != nil {
		return Phase{}, err
	}
	admits, err := ScrapeAdmissions(ctx, s.m.MetricsURL)
	if err != nil {
		return Phase{}, err
	}
	p := Phase{Summary: r.Summarize(), Wincompat: admits.Sub(s.admits), Processes: map[string]Usage{}}
	for name, after := range procs {
		p.Processes[name] = UsageBetween(s.procs[name], after, wall, r.OK)
	}
	p.setOtherCores()
	return p, nil
}

// machine is the name the machine's busy time is reported under.
const machine = "machine"

func (m *Meter) read() (map[string]load.Proc, error) {
	busy, err := load.MachineCPU()
	if err != nil {
		return nil, err
	}
	out := map[string]load.Proc{machine: {CPU: busy}}
	for name, pid := range m.Pids {
		p, err := load.ReadProc(pid)
		if err != nil {
			return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
		}
		out[name] = p
	}
	return out, nil
}

// MergePhases adds up rounds of the same phase: results are the rounds' load results, phases what End
// returned for them, in the same order.
func MergePhases(results []*load.Result, phases []Phase) (Phase, error) {
	if len(results) != len(phases) || len(phases) == 0 {
		return Phase{}, errors.New("MergePhases: one phase per result, at least one")
	}
	merged := load.Merge(results...)
	m := Phase{Summary: merged.Summarize(), Wincompat: Admissions{ByResult: map[string]float64{}}, Processes: map[string]Usage{}}
	var wall float64
	for _, p := range phases {
		wall += p.ElapsedSeconds
		m.Connections += p.Connections
		m.Warnings += p.Warnings
		m.Wincompat.Count += p.Wincompat.Count
		m.Wincompat.HandlerSeconds += p.Wincompat.HandlerSeconds
		for k, v := range p.Wincompat.ByResult {
			m.Wincompat.ByResult[k] += v
		}
		for k, v := range p.Wincompat.ImageLookups {
			if m.Wincompat.ImageLookups == nil {
				m.Wincompat.ImageLookups = map[string]float64{}
			}
			m.Wincompat.ImageLookups[k] += v
		}
		for k, v := range p.Wincompat.Gated {
			if m.Wincompat.Gated == nil {
				m.Wincompat.Gated = map[string]float64{}
			}
			m.Wincompat.Gated[k] += v
		}
	}
	for _, name := range slices.Sorted(maps.Keys(phases[0].Processes)) {
		var u Usage
		for _, p := range phases {
			pu := p.Processes[name]
			u.CPUSeconds += pu.CPUSeconds
			u.RSSPeakMiB = max(u.RSSPeakMiB, pu.RSSPeakMiB)
			u.RSSEndMiB = pu.RSSEndMiB
		}
		if wall > 0 {
			u.Cores = u.CPUSeconds / wall
		}
		if merged.OK > 0 {
			u.CPUMicrosPerOp = u.CPUSeconds * 1e6 / float64(merged.OK)
		}
		m.Processes[name] = u
	}
	m.setOtherCores()
	return m, nil
}
