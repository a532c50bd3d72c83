package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// replicaFigures are one replica's at one size.
type replicaFigures struct {
	HeapMiB, RSSMiB, PeakRSSMiB float64
	// SampledMaxRSSMiB is the largest VmRSS or VmHWM read every 100 ms from start to stop (the leader's
	// until it was killed).
	SampledMaxRSSMiB float64
	ReadySeconds     float64
	Review           load.Percentiles
	// AfterFailoverHeapMiB is the follower's live heap once it leads and has synced.
	AfterFailoverHeapMiB float64
}

// stage is one size of one run.
type stage struct {
	Pods, Nodes, Events, WindowsPods int
	FillSeconds                      float64
	Leader, Follower                 replicaFigures
	LeaderSyncSeconds                float64
	FailoverSeconds                  float64
	// SyncFromGauge: the leader's sync was read from wincompat_leader_synced, not from its log.
	SyncFromGauge          bool
	Misplaced              misplacedCheck
	MisplacedAfterFailover misplacedCheck
	Audit                  auditResult
}

type runResult struct {
	Baseline stage
	Sizes    []stage
	// LabelStamped: `wincompat mutate` stamped policy.LabelOS itself (else the lab added it).
	LabelStamped bool
}

type goal struct {
	name, measured string
	met            bool
}

type labReport struct {
	Version  string
	Runs     []runResult
	Baseline stage
	Sizes    []stage // medians over the runs
	LimitMiB float64
	slopes   map[string]fit
	goals    []goal
	failures []string
}

// fit is a least-squares line through (pods, MiB): MiB per 1,000 pods, and the value at 150,000 pods.
type fit struct{ PerThousand, At150k float64 }

const extrapolateTo = 150000

func linearFit(xs, ys []float64) (fit, bool) {
	if len(xs) < 2 {
		return fit{}, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	slope := sxy / sxx
	return fit{PerThousand: slope * 1000, At150k: my + slope*(extrapolateTo-mx)}, true
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianStage is each figure's median over the runs' same stage.
func medianStage(ss []stage) stage {
	m := ss[0]
	med := func(f func(*stage) *float64) {
		var v []float64
		for i := range ss {
			v = append(v, *f(&ss[i]))
		}
		*f(&m) = median(v)
	}
	for _, f := range []func(*stage) *float64{
		func(s *stage) *float64 { return &s.FillSeconds }, func(s *stage) *float64 { return &s.LeaderSyncSeconds },
		func(s *stage) *float64 { return &s.FailoverSeconds },
		func(s *stage) *float64 { return &s.Audit.Seconds }, func(s *stage) *float64 { return &s.Audit.PeakRSSMiB },
	} {
		med(f)
	}
	for _, r := range []func(*stage) *replicaFigures{func(s *stage) *replicaFigures { return &s.Leader }, func(s *stage) *replicaFigures { return &s.Follower }} {
		for _, f := range []func(*replicaFigures) *float64{
			func(x *replicaFigures) *float64 { return &x.HeapMiB }, func(x *replicaFigures) *float64 { return &x.RSSMiB },
			func(x *replicaFigures) *float64 { return &x.PeakRSSMiB }, func(x *replicaFigures) *float64 { return &x.SampledMaxRSSMiB },
			func(x *replicaFigures) *float64 { return &x.ReadySeconds }, func(x *replicaFigures) *float64 { return &x.AfterFailoverHeapMiB },
			func(x *replicaFigures) *float64 { return &x.Review.P50 }, func(x *replicaFigures) *float64 { return &x.Review.P99 },
		} {
			med(func(s *stage) *float64 { return f(r(s)) })
		}
	}
	// Over the limit at any moment of any run counts: the largest, not the median.
	for _, s := range ss {
		m.Leader.SampledMaxRSSMiB = max(m.Leader.SampledMaxRSSMiB, s.Leader.SampledMaxRSSMiB)
		m.Follower.SampledMaxRSSMiB = max(m.Follower.SampledMaxRSSMiB, s.Follower.SampledMaxRSSMiB)
	}
	return m
}

func summarize(runs []runResult, c config, limitMiB float64) *labReport {
	rep := &labReport{Runs: runs, LimitMiB: limitMiB, slopes: map[string]fit{}}
	var bases []stage
	for _, r := range runs {
		bases = append(bases, r.Baseline)
	}
	rep.Baseline = medianStage(bases)
	for k := range c.sizes {
		var ss []stage
		for _, r := range runs {
			ss = append(ss, r.Sizes[k])
		}
		rep.Sizes = append(rep.Sizes, medianStage(ss))
	}
	var xs []float64
	for _, s := range rep.Sizes {
		xs = append(xs, float64(s.Pods))
	}
	for name, f := range series {
		var ys []float64
		for i := range rep.Sizes {
			ys = append(ys, f(&rep.Sizes[i]))
		}
		if fi, ok := linearFit(xs, ys); ok {
			rep.slopes[name] = fi
		}
	}
	rep.judge(runs)
	return rep
}

// series are the memory figures plotted and fitted against pods.
var series = map[string]func(*stage) float64{
	"leader heap":   func(s *stage) float64 { return s.Leader.HeapMiB },
	"follower heap": func(s *stage) float64 { return s.Follower.HeapMiB },
	"leader RSS":    func(s *stage) float64 { return s.Leader.RSSMiB },
	"follower RSS":  func(s *stage) float64 { return s.Follower.RSSMiB },
	// The peak, not the RSS at the end, is what meets the memory limit.
	"leader peak RSS": func(s *stage) float64 { return s.Leader.PeakRSSMiB },
}

var seriesOrder = []string{"leader heap", "follower heap", "leader RSS", "follower RSS", "leader peak RSS"}

// judge holds the medians against issue 41's goals, and every run against the lab's own checks, whose
// failure means a figure does not measure what it claims.
func (rep *labReport) judge(runs []runResult) {
	first, last := rep.Sizes[0], rep.Sizes[len(rep.Sizes)-1]
	if f, ok := rep.slopes["leader heap"]; ok {
		rep.goals = append(rep.goals, goal{"leader live heap at 150,000 pods (linear) ≤ 96 MiB",
			fmt.Sprintf("%.1f MiB (%.2f MiB per 1,000 pods)", f.At150k, f.PerThousand), f.At150k <= 96})
	} else {
		rep.goals = append(rep.goals, goal{"leader live heap at 150,000 pods (linear) ≤ 96 MiB", "not judged: a line needs two sizes", false})
	}
	if len(rep.Sizes) > 1 {
		growth := (last.Follower.HeapMiB - first.Follower.HeapMiB) / first.Follower.HeapMiB
		rep.goals = append(rep.goals, goal{fmt.Sprintf("follower live heap grows ≤ 10%% from %d to %d pods", first.Pods, last.Pods),
			fmt.Sprintf("%+.1f%% (%.1f → %.1f MiB)", 100*growth, first.Follower.HeapMiB, last.Follower.HeapMiB), growth <= 0.10})
	}
	for _, who := range []struct {
		name string
		f    func(*stage) replicaFigures
	}{{"leader", func(s *stage) replicaFigures { return s.Leader }}, {"follower", func(s *stage) replicaFigures { return s.Follower }}} {
		base, big := who.f(&rep.Baseline).Review.P50, who.f(&last).Review.P50
		rep.goals = append(rep.goals, goal{fmt.Sprintf("%s: Windows pod review p50 at %d nodes ≤ 1.1× at %d nodes", who.name, last.Nodes, rep.Baseline.Nodes),
			fmt.Sprintf("%.2f against %.2f ms: %.2f×", big, base, big/base), big <= 1.1*base})
	}
	var failovers []string
	for _, r := range runs {
		failovers = append(failovers, fmt.Sprintf("%.1f", r.Sizes[len(r.Sizes)-1].FailoverSeconds))
	}
	rep.goals = append(rep.goals, goal{fmt.Sprintf("failover at %d pods: the new leader synced within 30 s", last.Pods),
		fmt.Sprintf("%.1f s (runs: %s)", last.FailoverSeconds, strings.Join(failovers, ", ")), last.FailoverSeconds <= 30})
	var worst float64
	for _, r := range runs {
		for _, s := range append([]stage{r.Baseline}, r.Sizes...) {
			worst = max(worst, s.Leader.SampledMaxRSSMiB, s.Follower.SampledMaxRSSMiB)
		}
	}
	rep.goals = append(rep.goals, goal{fmt.Sprintf("no replica over the memory limit (%.0f MiB) at any moment", rep.LimitMiB),
		fmt.Sprintf("largest RSS %.1f MiB", worst), worst <= rep.LimitMiB})

	for i, r := range runs {
		big := r.Sizes[len(r.Sizes)-1]
		for _, m := range []struct {
			when string
			c    misplacedCheck
		}{{"", big.Misplaced}, {" after failover", big.MisplacedAfterFailover}} {
			c := m.c
			if c.LabelledReported != c.Labelled || c.Duplicates != 0 || int(c.Gauge) != c.LabelledReported+c.LegacyReported || c.Labelled == 0 {
				rep.failures = append(rep.failures, fmt.Sprintf("run %d at %d pods%s: misplaced pods lost: %d of %d reported once (%d more than once), gauge %.0f against %d reported",
					i+1, big.Pods, m.when, c.LabelledReported, c.Labelled, c.Duplicates, c.Gauge, c.LabelledReported+c.LegacyReported))
			}
		}
		for _, s := range append([]stage{r.Baseline}, r.Sizes...) {
			if s.Audit.WindowsPods != s.WindowsPods {
				rep.failures = append(rep.failures, fmt.Sprintf("run %d at %d pods: the audit counted %d Windows pods of %d: it did not read the whole cluster",
					i+1, s.Pods, s.Audit.WindowsPods, s.WindowsPods))
			}
		}
	}
}

func (rep *labReport) allChecksPassed() bool { return len(rep.failures) == 0 }

func yes(b bool) string {
	if b {
		return "met"
	}
	return "NOT MET"
}

func stageRow(s stage, label string) string {
	return fmt.Sprintf("%s\t%d\t%d\t%d\t%.1f\t%.1f / %.1f\t%.1f\t%.1f / %.1f\t%.1f / %.1f\t%.1f\t%.2f / %.2f\t%.2f / %.2f\t%.1f\t%.1f / %.1f\t%.1f\t%.0f\t%d/%d, %d/%d\t",
		label, s.Pods, s.Nodes, s.Events, s.Leader.HeapMiB, s.Leader.RSSMiB, s.Leader.PeakRSSMiB, s.Follower.HeapMiB, s.Follower.RSSMiB, s.Follower.PeakRSSMiB,
		s.Leader.ReadySeconds, s.Follower.ReadySeconds, s.LeaderSyncSeconds, s.Leader.Review.P50, s.Leader.Review.P99, s.Follower.Review.P50, s.Follower.Review.P99,
		s.FailoverSeconds, s.Leader.SampledMaxRSSMiB, s.Follower.SampledMaxRSSMiB, s.Audit.Seconds, s.Audit.PeakRSSMiB,
		s.Misplaced.LabelledReported, s.Misplaced.Labelled, s.Misplaced.LegacyReported, s.Misplaced.Legacy)
}

const header = "stage\tpods\tnodes\tEvents\tleader heap\tleader RSS / peak\tfollower heap\tfollower RSS / peak\tready L / F s\tleader synced s\treview L p50 / p99 ms\treview F p50 / p99 ms\tfailover s\tmax RSS L / F (F leads after failover)\taudit s\taudit MiB\tmisplaced reported (legacy)\t"

// printStages prints the table of the stages: the baseline, then each filled size.
func printStages(out io.Writer, baseline stage, sizes []stage) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, header)
	fmt.Fprintln(tw, stageRow(baseline, "before"))
	for _, s := range sizes {
		fmt.Fprintln(tw, stageRow(s, "filled"))
	}
	tw.Flush()
}

func printRun(out io.Writer, r runResult) {
	printStages(out, r.Baseline, r.Sizes)
	how := "wincompat_leader_synced"
	if !r.Baseline.SyncFromGauge {
		how = "the Lease and the leader's log (no wincompat_leader_synced on /metrics)"
	}
	fmt.Fprintf(out, "leader sync read from %s; policy.LabelOS stamped by wincompat mutate: %v\n", how, r.LabelStamped)
}

func printReport(out io.Writer, rep *labReport) {
	fmt.Fprintf(out, "\n== wincompat %s: medians of %d run(s); memory in MiB\n", rep.Version, len(rep.Runs))
	printStages(out, rep.Baseline, rep.Sizes)
	fmt.Fprintln(out, "\nper 1,000 pods (least squares over the filled sizes), and at 150,000 pods:")
	for _, name := range seriesOrder {
		if f, ok := rep.slopes[name]; ok {
			fmt.Fprintf(out, "  %-14s %+7.3f MiB per 1,000 pods → %7.1f MiB at 150,000\n", name, f.PerThousand, f.At150k)
		}
	}
	fmt.Fprintln(out, "\ngoals of issue 41:")
	for _, g := range rep.goals {
		fmt.Fprintf(out, "  %-7s %s: %s\n", yes(g.met), g.name, g.measured)
	}
	fmt.Fprintln(out, "\nthe README's table (medians):")
	fmt.Fprintln(out, "| pods | nodes | Events | leader heap | leader RSS (peak) | follower heap | follower RSS (peak) | ready s | leader synced s | review p50 / p99 ms, leader | follower | failover s | audit s | audit peak RSS |")
	fmt.Fprintln(out, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, s := range append([]stage{rep.Baseline}, rep.Sizes...) {
		fmt.Fprintf(out, "| %d | %d | %d | %.1f | %.1f (%.1f) | %.1f | %.1f (%.1f) | %.1f | %.1f | %.2f / %.2f | %.2f / %.2f | %.1f | %.1f | %.0f |\n",
			s.Pods, s.Nodes, s.Events, s.Leader.HeapMiB, s.Leader.RSSMiB, s.Leader.PeakRSSMiB, s.Follower.HeapMiB, s.Follower.RSSMiB, s.Follower.PeakRSSMiB,
			max(s.Leader.ReadySeconds, s.Follower.ReadySeconds), s.LeaderSyncSeconds, s.Leader.Review.P50, s.Leader.Review.P99,
			s.Follower.Review.P50, s.Follower.Review.P99, s.FailoverSeconds, s.Audit.Seconds, s.Audit.PeakRSSMiB)
	}
	for _, f := range rep.failures {
		fmt.Fprintln(out, "CHECK FAILED:", f)
	}
}
