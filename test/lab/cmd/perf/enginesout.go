package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/wincompat/wincompat/test/lab/perf"
)

// spread is a figure over the rounds: its median and range.
type spread struct{ median, min, max float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Sorted(slices.Values(xs))
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{m, s[0], s[len(s)-1]}
}

func (s spread) format(verb string) string {
	return fmt.Sprintf(verb+" ("+verb+"–"+verb+")", s.median, s.min, s.max)
}

// perRound applies f to the phases of each round.
func perRound(phases []perf.Phase, f func(perf.Phase) float64) []float64 {
	out := make([]float64, len(phases))
	for i, p := range phases {
		out[i] = f(p)
	}
	return out
}

// addedP50 is, round by round, how much an engine's p50 at the fixed rate exceeds no mutation's in
// the same round.
func addedP50(r *perf.EngineResults, name string) []float64 {
	en, none := findEngine(r, name), findEngine(r, engineNone)
	if en == nil || none == nil {
		return nil
	}
	out := make([]float64, min(len(en.Fixed), len(none.Fixed)))
	for i := range out {
		out[i] = en.Fixed[i].Latency.P50 - none.Fixed[i].Latency.P50
	}
	return out
}

// throughputRatio is, round by round, engine a's pods/s at full speed over engine b's.
func throughputRatio(r *perf.EngineResults, a, b string) []float64 {
	ea, eb := findEngine(r, a), findEngine(r, b)
	if ea == nil || eb == nil {
		return nil
	}
	out := make([]float64, min(len(ea.Max), len(eb.Max)))
	for i := range out {
		if eb.Max[i].Throughput > 0 {
			out[i] = ea.Max[i].Throughput / eb.Max[i].Throughput
		}
	}
	return out
}

func findEngine(r *perf.EngineResults, name string) *perf.Engine {
	for i := range r.Engines {
		if r.Engines[i].Name == name {
			return &r.Engines[i]
		}
	}
	return nil
}

// engineProcesses are the processes whose CPU per pod the engine table shows.
var engineProcesses = []string{"kube-apiserver", "etcd", "wincompat", "kyverno"}

func printEngines(out io.Writer, r *perf.EngineResults) {
	fmt.Fprintf(out, "\nengines: the Windows chart pod through kube-apiserver, %d creators at full speed, then %.0f pods/s; %d rounds of %gs phases, interleaved; median (min–max) over the rounds; latency in ms, CPU in µs per pod at full speed\n",
		r.Creators, r.Rate, r.Rounds, r.PhaseSeconds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "engine\tpods/s at full speed\tof none's\tp50 at fixed rate\tp50 added\t")
	for _, name := range engineProcesses {
		fmt.Fprintf(tw, "%s CPU\t", name)
	}
	fmt.Fprintln(tw, "other cores, max\t")
	for _, en := range r.Engines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t", en.Name,
			spreadOf(perRound(en.Max, func(p perf.Phase) float64 { return p.Throughput })).format("%.0f"),
			spreadOf(scale(throughputRatio(r, en.Name, engineNone), 100)).format("%.0f%%"),
			spreadOf(perRound(en.Fixed, func(p perf.Phase) float64 { return p.Latency.P50 })).format("%.2f"),
			spreadOf(addedP50(r, en.Name)).format("%+.2f"))
		for _, name := range engineProcesses {
			if _, ok := en.Max[0].Processes[name]; !ok {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%s\t", spreadOf(perRound(en.Max, func(p perf.Phase) float64 { return p.Processes[name].CPUMicrosPerOp })).format("%.0f"))
		}
		other := slices.Max(append(perRound(en.Max, func(p perf.Phase) float64 { return p.OtherCores }), perRound(en.Fixed, func(p perf.Phase) float64 { return p.OtherCores })...))
		fmt.Fprintf(tw, "%.2f\t\n", other)
	}
	tw.Flush()
}

func scale(xs []float64, by float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * by
	}
	return out
}

// engineGoals are issue 29's goals on the engine comparison, each stated against the floor engine or
// the webhook alone, and issue 16's on the reviews. A goal of the engines is met when its median over
// the rounds is, with at least minGoalRounds rounds; every round is shown.
func engineGoals(r *perf.Results) []perf.Goal {
	var out []perf.Goal
	if er := r.Engines; er != nil {
		floorAdded, policyAdded := addedP50(er, engineFloor), addedP50(er, engineAdmissionPolicy)
		webhookAdded, hybridAdded, kyvernoAdded := addedP50(er, engineWebhook), addedP50(er, engineHybrid), addedP50(er, engineKyverno)
		if ratio := throughputRatio(er, engineHybrid, engineWebhook); ratio != nil {
			out = append(out, medianGoal("hybrid: throughput at full speed ≥ 90% of the webhook alone's", ratio, percents, func(m float64) bool { return m >= 0.9 }))
		}
		if ratio := ratios(hybridAdded, webhookAdded); ratio != nil {
			out = append(out, medianGoal("hybrid: added p50 ≤ 1.2× the webhook alone's", ratio, times, func(m float64) bool { return m <= 1.2 }))
		}
		if ratio := throughputRatio(er, engineAdmissionPolicy, engineFloor); ratio != nil {
			out = append(out, medianGoal("generated admission policies: throughput at full speed ≥ 80% of the floor's", ratio, percents, func(m float64) bool { return m >= 0.8 }))
		}
		if ratio := ratios(policyAdded, floorAdded); ratio != nil {
			out = append(out, medianGoal("generated admission policies: added p50 ≤ 1.3× the floor's", ratio, times, func(m float64) bool { return m <= 1.3 }))
		}
		if kyvernoAdded != nil && floorAdded != nil && webhookAdded != nil {
			n := min(len(webhookAdded), len(kyvernoAdded), len(floorAdded))
			above := func(xs []float64) []float64 {
				out := make([]float64, n)
				for i := range out {
					out[i] = xs[i] - floorAdded[i]
				}
				return out
			}
			out = append(out, medianGoal("webhook: its added p50 above the floor's ≤ 40% of Kyverno's above the floor's", ratios(above(webhookAdded), above(kyvernoAdded)), percents, func(m float64) bool { return m <= 0.4 }))
		}
		if ratio := throughputRatio(er, engineWebhook, engineKyverno); ratio != nil {
			out = append(out, medianGoal("webhook: throughput at full speed ≥ 1.5× Kyverno's (Kyverno on every core, wincompat on one)", ratio, times, func(m float64) bool { return m >= 1.5 }))
		}
	}
	if rr := r.Reviews; rr != nil {
		var chart, floor *perf.ReviewScenario
		for i := range rr.Scenarios {
			switch rr.Scenarios[i].Name {
			case "chart-pod":
				chart = &rr.Scenarios[i]
			case "floor":
				floor = &rr.Scenarios[i]
			}
		}
		if chart != nil && floor != nil {
			perCore := func(s *perf.ReviewScenario) float64 {
				return 1e6 / s.Max.Processes["wincompat"].CPUMicrosPerOp
			}
			share := perCore(chart) / perCore(floor)
			out = append(out, perf.Goal{
				Goal:     "served chart-pod reviews per core ≥ 50% of the served floor's",
				Measured: fmt.Sprintf("%.0f against %.0f per core-second: %.0f%%", perCore(chart), perCore(floor), 100*share),
				Met:      share >= 0.5,
			})
		}
		if chart != nil {
			peak := max(chart.Max.Processes["wincompat"].RSSPeakMiB, chart.Fixed.Processes["wincompat"].RSSPeakMiB)
			out = append(out, perf.Goal{
				Goal:     "chart-pod: wincompat's RSS ≤ 48 MiB",
				Measured: fmt.Sprintf("peak %.1f MiB", peak),
				Met:      peak <= 48,
			})
		}
	}
	return out
}

func percents(xs []float64) string { return joinEach(xs, "%.0f%%", 100) }

func times(xs []float64) string { return joinEach(xs, "%.2f×", 1) }

// minGoalRounds is the fewest rounds whose median can meet a goal (issue 29).
const minGoalRounds = 3

// medianGoal is a goal on a figure per round, met when the median is (judged by met) over at least
// minGoalRounds rounds; every round is shown in the order run.
func medianGoal(goal string, perRound []float64, format func([]float64) string, met func(float64) bool) perf.Goal {
	m := spreadOf(perRound).median
	g := perf.Goal{
		Goal:     goal + ", the median of the rounds",
		Measured: fmt.Sprintf("median %s; per round %s", format([]float64{m}), format(perRound)),
		Met:      len(perRound) >= minGoalRounds && met(m),
	}
	if len(perRound) < minGoalRounds {
		g.Measured += fmt.Sprintf(" (fewer than %d rounds: not judged)", minGoalRounds)
	}
	return g
}

// ratios is a[i]/b[i] per round; a round whose b is not above zero (an engine that added nothing, or
// less than the floor) has no ratio, and counts as +Inf, against the goal.
func ratios(a, b []float64) []float64 {
	if a == nil || b == nil {
		return nil
	}
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = math.Inf(1)
		if b[i] > 0 {
			out[i] = a[i] / b[i]
		}
	}
	return out
}

func values(xs []float64) string { return joinEach(xs, "%+.2f", 1) }

// joinEach formats each of xs, scaled, with verb and joins them with commas.
func joinEach(xs []float64, verb string, scale float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(verb, scale*x)
	}
	return strings.Join(parts, ", ")
}
