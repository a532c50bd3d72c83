package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/wincompat/wincompat/test/perf"
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

// engineGoals are issue 16's goals on the engine comparison and the reviews; each is met only when
// every round meets it.
func engineGoals(r *perf.Results) []perf.Goal {
	var out []perf.Goal
	if er := r.Engines; er != nil {
		policyAdded, webhookAdded := addedP50(er, engineAdmissionPolicy), addedP50(er, engineWebhook)
		if kyvernoAdded := addedP50(er, engineKyverno); kyvernoAdded != nil && policyAdded != nil && webhookAdded != nil {
			shares := make([]float64, len(kyvernoAdded))
			for i := range shares {
				shares[i] = (webhookAdded[i] - policyAdded[i]) / (kyvernoAdded[i] - policyAdded[i])
			}
			out = append(out, perf.Goal{
				Goal:     "webhook above the floor: (its added p50 − the admission policy's) ≤ 20% of Kyverno's, every round",
				Measured: "per round " + percents(shares),
				Met:      slices.Max(shares) <= 0.2,
			})
		}
		if ratio := throughputRatio(er, engineWebhook, engineAdmissionPolicy); ratio != nil {
			out = append(out, perf.Goal{
				Goal:     "throughput at full speed with the webhook ≥ 95% of the admission policy's, every round",
				Measured: "per round " + percents(ratio),
				Met:      slices.Min(ratio) >= 0.95,
			})
		}
		if ratio := throughputRatio(er, engineHybrid, engineWebhook); ratio != nil && webhookAdded != nil {
			hybridAdded := addedP50(er, engineHybrid)
			met := slices.Min(ratio) >= 0.9
			for i := range hybridAdded {
				met = met && hybridAdded[i] <= webhookAdded[i]+0.1*max(webhookAdded[i], 0)
			}
			out = append(out, perf.Goal{
				Goal:     "hybrid costs no more than the webhook alone: throughput ≥ 90% of it and added p50 ≤ 110% of it, every round",
				Measured: fmt.Sprintf("throughput per round %s; added p50 hybrid %s ms, webhook %s ms", percents(ratio), values(hybridAdded), values(webhookAdded)),
				Met:      met,
			})
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

func values(xs []float64) string { return joinEach(xs, "%+.2f", 1) }

// joinEach formats each of xs, scaled, with verb and joins them with commas.
func joinEach(xs []float64, verb string, scale float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(verb, scale*x)
	}
	return strings.Join(parts, ", ")
}
