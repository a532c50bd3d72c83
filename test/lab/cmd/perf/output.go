package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/wincompat/wincompat/test/lab/perf"
)

// printPhase prints one line as a phase ends, so a long run shows progress.
func printPhase(name string, p perf.Phase) {
	w := p.Processes["wincompat"]
	fmt.Printf("  %-44s %8.0f/s  p50 %6.3f  p99 %7.3f  p99.9 %7.3f ms  errors %d  wincompat %.2f cores %4.0f µs/op  RSS peak %.0f MiB  other work %.2f cores\n",
		name, p.Throughput, p.Latency.P50, p.Latency.P99, p.Latency.P999, p.Errors+p.Missed, w.Cores, w.CPUMicrosPerOp, w.RSSPeakMiB, p.OtherCores)
}

// goals evaluates the goals of issues 7 (reviews), 13 (image resolution) and 29 (the engines) on r; a
// goal whose figures were not measured is left out.
func goals(r *perf.Results) []perf.Goal {
	var out []perf.Goal
	if r.Reviews != nil && len(r.Reviews.Scenarios) > 0 {
		s := r.Reviews.Scenarios[0] // the chart pod
		f := s.Fixed
		out = append(out,
			perf.Goal{
				Goal:     fmt.Sprintf("one core, HTTPS keep-alive, %s: ≥5,000 reviews/s with p99 ≤2 ms at %.0f%% of the measured maximum", s.Name, 100*r.Reviews.LoadFraction),
				Measured: fmt.Sprintf("maximum %.0f/s; at %.0f/s: p99 %.3f ms", s.Max.Throughput, f.Throughput, f.Latency.P99),
				Met:      f.Throughput >= 5000 && f.Latency.P99 <= 2,
			},
			perf.Goal{
				Goal:     fmt.Sprintf("%s: no errors", s.Name),
				Measured: fmt.Sprintf("%d errors, %d missed at the maximum; %d errors, %d missed at the fixed rate", s.Max.Errors, s.Max.Missed, f.Errors, f.Missed),
				Met:      s.Max.Errors+s.Max.Missed+f.Errors+f.Missed == 0,
			})
		peak := max(s.Max.Processes["wincompat"].RSSPeakMiB, f.Processes["wincompat"].RSSPeakMiB)
		out = append(out, perf.Goal{
			Goal:     fmt.Sprintf("%s: wincompat's RSS ≤64 MiB", s.Name),
			Measured: fmt.Sprintf("peak %.1f MiB", peak),
			Met:      peak <= 64,
		})
	}
	if r.APIServer != nil {
		for _, k := range r.APIServer.Kinds {
			if k.Name == "windows-mutated" {
				continue // not a goal: without wincompat the API server rejects those pods
			}
			measured := fmt.Sprintf("%d creators at full speed: %.1f%% of the throughput, p50 %+.3f ms", r.APIServer.Creators, 100*k.Max.ThroughputRatio, k.Max.P50AddedMs)
			if k.Fixed != nil {
				measured += fmt.Sprintf("; at %.0f pods/s: p50 %+.3f ms", r.APIServer.Rate, k.Fixed.P50AddedMs)
			}
			out = append(out, perf.Goal{
				Goal:     fmt.Sprintf("kube-apiserver, %s pods: with wincompat ≥95%% of the throughput without, p50 added ≤2 ms", k.Name),
				Measured: measured,
				Met:      k.Max.ThroughputRatio >= 0.95 && k.Max.P50AddedMs <= 2 && (k.Fixed == nil || k.Fixed.P50AddedMs <= 2),
			})
		}
	}
	out = append(out, imageGoals(r)...)
	return append(out, engineGoals(r)...)
}

// imageGoals: the warm cache costs within 5% of the tags-only review, a cold cache on a slow registry is
// answered within the deadline plus 100 ms, and in gate mode the slow registry costs admission nothing.
func imageGoals(r *perf.Results) []perf.Goal {
	if r.Images == nil {
		return nil
	}
	var out []perf.Goal
	hit, hitOK := imagePhase(r.Images, "image-hit", "max")
	if r.Reviews != nil && len(r.Reviews.Scenarios) > 0 && hitOK {
		tags := r.Reviews.Scenarios[0] // the chart pod, its build from the image tag
		perHit, perTag := hit.Processes["wincompat"].CPUMicrosPerOp, tags.Max.Processes["wincompat"].CPUMicrosPerOp
		out = append(out, perf.Goal{
			Goal: fmt.Sprintf("image-hit: wincompat's CPU per review at the maximum within 5%% of %s's (build from the tag, no resolver)", tags.Name),
			Measured: fmt.Sprintf("%.0f µs against %.0f µs (%+.1f%%); %.0f/s against %.0f/s",
				perHit, perTag, 100*(perHit/perTag-1), hit.Throughput, tags.Max.Throughput),
			Met: perHit <= 1.05*perTag,
		})
	}
	for _, p := range r.Images.Phases {
		switch p.Scenario {
		case "image-slow":
			limit := r.Images.LookupTimeoutMs + 100
			out = append(out, perf.Goal{
				Goal:     fmt.Sprintf("image-slow: every review answered within the %.0f ms deadline + 100 ms on a registry %.0f ms slower than it", r.Images.LookupTimeoutMs, r.Images.SlowRegistryDelayMs-r.Images.LookupTimeoutMs),
				Measured: fmt.Sprintf("max %.1f ms, p50 %.1f ms, p99 %.1f ms, %d errors, %d missed", p.Latency.Max, p.Latency.P50, p.Latency.P99, p.Errors, p.Missed),
				Met:      p.Latency.Max <= limit && p.Errors+p.Missed == 0 && p.OK > 0,
			})
		case "image-slow-gate":
			// The registry's delay must not reach admission at all: a review as fast as any that reads
			// nothing from it (its pod is gated; the run fails if the registry was asked).
			out = append(out, perf.Goal{
				Goal:     fmt.Sprintf("image-slow-gate: every review answered within 100 ms on a registry %.0f ms late, in gate mode", r.Images.SlowRegistryDelayMs),
				Measured: fmt.Sprintf("max %.1f ms, p50 %.2f ms, p99 %.2f ms, %d errors, %d missed", p.Latency.Max, p.Latency.P50, p.Latency.P99, p.Errors, p.Missed),
				Met:      p.Latency.Max <= 100 && p.Errors+p.Missed == 0 && p.OK > 0,
			})
		}
	}
	return out
}

func imagePhase(r *perf.ImageResults, scenario, load string) (perf.ImagePhase, bool) {
	for _, p := range r.Phases {
		if p.Scenario == scenario && p.Load == load {
			return p, true
		}
	}
	return perf.ImagePhase{}, false
}

// printSummary prints the run's tables.
func printSummary(out io.Writer, r *perf.Results) {
	fmt.Fprintf(out, "\n%s; %d CPUs, %s; kernel %s; load average at start %s; %s; wincompat %s; Kubernetes %s\n",
		r.Date, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.Kernel, r.Machine.LoadAverage, r.Machine.Go, r.Wincompat, r.Kubernetes)
	if rr := r.Reviews; rr != nil {
		fmt.Fprintf(out, "\nreviews, wincompat serve GOMAXPROCS=%d, %d keep-alive connections, %gs phases; latency in ms (open loop: from the scheduled send)\n",
			rr.GOMAXPROCS, rr.Connections, rr.PhaseSeconds)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "review\tbytes\tphase\treviews/s\tp50\tp90\tp99\tp99.9\tmax\terrors\tmissed\tconns\tCPU cores\tCPU µs/review\tRSS peak MiB\tRSS end MiB\tsend lag p99\tgenerator cores\tother cores\t")
		for _, s := range rr.Scenarios {
			for _, ph := range []struct {
				name string
				p    perf.Phase
			}{{"max", s.Max}, {fmt.Sprintf("%.0f/s", s.Fixed.TargetRate), s.Fixed}} {
				w, l := ph.p.Processes["wincompat"], ph.p.Latency
				lag := "-"
				if ph.p.SendLag != nil {
					lag = fmt.Sprintf("%.3f", ph.p.SendLag.P99)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%d\t%.2f\t%.0f\t%.1f\t%.1f\t%s\t%.2f\t%.2f\t\n",
					s.Name, s.BodyBytes, ph.name, ph.p.Throughput, l.P50, l.P90, l.P99, l.P999, l.Max,
					ph.p.Errors, ph.p.Missed, ph.p.Connections, w.Cores, w.CPUMicrosPerOp, w.RSSPeakMiB, w.RSSEndMiB, lag, ph.p.Processes["perf"].Cores, ph.p.OtherCores)
			}
		}
		tw.Flush()
	}
	if a := r.APIServer; a != nil {
		fmt.Fprintf(out, "\npod creation through kube-apiserver, %d creators, %d rounds of %gs per side and load; latency in ms\n", a.Creators, a.Rounds, a.PhaseSeconds)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "pods\tload\twebhook\tpods/s\tp50\tp90\tp99\tp99.9\terrors\tmissed\twincompat calls\tapiserver CPU µs/pod\tetcd CPU µs/pod\twincompat CPU µs/pod\tother cores\t")
		for _, k := range a.Kinds {
			for _, m := range comparisons(a, k) {
				for _, side := range []struct {
					name string
					p    perf.Phase
				}{{"with", m.c.With}, {"without", m.c.Without}} {
					p, l := side.p, side.p.Latency
					fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t\n", k.Name, m.load, side.name, p.Throughput,
						l.P50, l.P90, l.P99, l.P999, p.Errors, p.Missed, p.Wincompat.Count,
						p.Processes["kube-apiserver"].CPUMicrosPerOp, p.Processes["etcd"].CPUMicrosPerOp, p.Processes["wincompat"].CPUMicrosPerOp, p.OtherCores)
				}
			}
		}
		tw.Flush()
		fmt.Fprintln(out, "\nwith/without")
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "pods\tload\tthroughput\tp50 added\tp99 added\t")
		for _, k := range a.Kinds {
			for _, m := range comparisons(a, k) {
				fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%+.3f ms\t%+.3f ms\t\n", k.Name, m.load, 100*m.c.ThroughputRatio, m.c.P50AddedMs, m.c.P99AddedMs)
			}
		}
		tw.Flush()
	}
	if r.Engines != nil {
		printEngines(out, r.Engines)
	}
	if im := r.Images; im != nil {
		fmt.Fprintf(out, "\nimage resolution, a second wincompat serve GOMAXPROCS=%d, %d keep-alive connections, %gs phases, lookup deadline %.0f ms; latency in ms; lookups per review\n",
			im.GOMAXPROCS, im.Connections, im.PhaseSeconds, im.LookupTimeoutMs)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "review\tphase\treviews/s\tp50\tp90\tp99\tp99.9\tmax\terrors\tmissed\thit\tmiss\ttimeout\terror\tgated\tCPU µs/review\tRSS peak MiB\tgenerator+registry cores\tother cores\t")
		for _, p := range im.Phases {
			l, w := p.Latency, p.Processes["wincompat"]
			per := func(result string) float64 {
				if p.OK == 0 {
					return 0
				}
				return p.Wincompat.ImageLookups[result] / float64(p.OK)
			}
			gated := 0.0
			for _, n := range p.Wincompat.Gated {
				gated += n
			}
			if p.OK > 0 {
				gated /= float64(p.OK)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.1f\t%.2f\t%.2f\t\n",
				p.Scenario, p.Load, p.Throughput, l.P50, l.P90, l.P99, l.P999, l.Max, p.Errors, p.Missed,
				per("hit"), per("miss"), per("timeout"), per("error"), gated, w.CPUMicrosPerOp, w.RSSPeakMiB, p.Processes["perf"].Cores, p.OtherCores)
		}
		tw.Flush()
	}
	if len(r.Goals) > 0 {
		fmt.Fprintln(out, "\ngoals (issues 7, 13 and 29)")
		for _, g := range r.Goals {
			verdict := "not met"
			if g.Met {
				verdict = "met"
			}
			fmt.Fprintf(out, "  %-7s %s: %s\n", verdict, g.Goal, g.Measured)
		}
	}
}

type comparison struct {
	load string
	c    *perf.Comparison
}

// comparisons are k's measurements: at the maximum, then at the fixed rate if there was one.
func comparisons(a *perf.APIResults, k perf.APIKind) []comparison {
	out := []comparison{{"max", &k.Max}}
	if k.Fixed != nil {
		out = append(out, comparison{fmt.Sprintf("%.0f/s", a.Rate), k.Fixed})
	}
	return out
}

func joinLines(s []string) string { return strings.Join(s, "\n  ") }

func joinWords(s []string) string { return strings.Join(s, " ") }
