package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// webhookConfigName is the MutatingWebhookConfiguration in deploy/webhook.
const webhookConfigName = "0100-wincompat"

// podKind is one kind of pod created with the webhook installed (with) and without any webhook
// (without). The two differ only where the API server would reject the pod without wincompat: then
// "without" creates what wincompat would have made of it, the object that ends up stored either way.
type podKind struct {
	name, description string
	with, without     *corev1.Pod
	// result is what wincompat must count each creation under with the webhook installed; "" when the
	// API server must not call it at all.
	result string
}

func (e *env) runAPIServer(ctx context.Context, p *prepared) (*perf.APIResults, error) {
	linux, unchanged, mutated := p.typed.linux, p.typed.unchanged, p.typed.chart
	kinds := []podKind{
		{"linux", "the chart pod for Linux in the opted-in namespace: the webhook's matchConditions keep it from wincompat", linux, linux, ""},
		{"windows-unchanged", "the Windows chart pod as wincompat leaves it: wincompat is called and changes nothing", unchanged, unchanged, "unchanged"},
		{"windows-mutated", "the Windows chart pod with Linux-only fields: wincompat patches it; without the webhook, the pod as patched is created instead (the original would be rejected)", mutated, unchanged, "mutated"},
	}
	sw := e.webhook
	// The rounds of each measurement: of kind, at the maximum or the fixed rate, with the webhook or not.
	type key struct {
		kind      int
		fixed, on bool
	}
	type rounds struct {
		results []*load.Result
		phases  []perf.Phase
	}
	acc := map[key]rounds{}
	type measurement struct {
		name  string
		fixed bool
		run   func(load.Op) *load.Result
	}
	measurements := []measurement{{"max", false, func(op load.Op) *load.Result {
		return load.Closed(ctx, e.creators, e.apiDuration, op)
	}}}
	if e.apiRate > 0 {
		measurements = append(measurements, measurement{fmt.Sprintf("%.0f/s", e.apiRate), true, func(op load.Op) *load.Result {
			return load.Open(ctx, e.creators, e.apiRate, e.apiDuration, time.Second+e.apiDuration/10, op)
		}})
	}
	for round := range e.apiRounds {
		// Alternate which comes first, so that drift over the run (etcd's growing history, the API
		// server's caches) weighs on both sides alike.
		order := []bool{true, false}
		if round%2 == 1 {
			order = []bool{false, true}
		}
		for _, on := range order {
			if err := sw.Set(ctx, on); err != nil {
				return nil, err
			}
			for i, k := range kinds {
				pod, side := k.without, "without"
				if on {
					pod, side = k.with, "with"
				}
				op := perf.CreatePods(e.cs, pod, e.creators, fmt.Sprintf("%s-%d-%s", k.name, round, side), nil)
				load.Closed(ctx, e.creators, e.warmup, op)
				for _, m := range measurements {
					e.warnings.Take()
					span, err := e.meter.Start(ctx)
					if err != nil {
						return nil, err
					}
					res := m.run(op)
					phase, err := span.End(ctx, res)
					if err != nil {
						return nil, err
					}
					phase.Warnings = e.warnings.Take()
					e.checkCreations(k, on, round, phase)
					printPhase(fmt.Sprintf("%s, %s webhook, %s, round %d", k.name, side, m.name, round+1), phase)
					r := acc[key{i, m.fixed, on}]
					r.results, r.phases = append(r.results, res), append(r.phases, phase)
					acc[key{i, m.fixed, on}] = r
					// Every phase starts from the same number of pods.
					if err := perf.DeletePods(ctx, e.cs, namespace); err != nil {
						return nil, fmt.Errorf("deleting the pods of %s: %w", k.name, err)
					}
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
		}
	}
	out := &perf.APIResults{Creators: e.creators, PhaseSeconds: e.apiDuration.Seconds(), Rounds: e.apiRounds, Rate: e.apiRate}
	compare := func(kind int, fixed bool) (perf.Comparison, error) {
		var c perf.Comparison
		with, without := acc[key{kind, fixed, true}], acc[key{kind, fixed, false}]
		var err error
		if c.With, err = perf.MergePhases(with.results, with.phases); err != nil {
			return c, err
		}
		if c.Without, err = perf.MergePhases(without.results, without.phases); err != nil {
			return c, err
		}
		c.Compare()
		return c, nil
	}
	for i, k := range kinds {
		ak := perf.APIKind{Name: k.name, Description: k.description}
		var err error
		if ak.Max, err = compare(i, false); err != nil {
			return nil, err
		}
		if e.apiRate > 0 {
			fixed, err := compare(i, true)
			if err != nil {
				return nil, err
			}
			ak.Fixed = &fixed
		}
		out.Kinds = append(out.Kinds, ak)
	}
	return out, nil
}

// checkCreations compares what wincompat counted with what the kind promises: a call per creation
// under the expected result with the webhook installed (none for Linux pods), no call without it.
func (e *env) checkCreations(k podKind, on bool, round int, p perf.Phase) {
	want, what := 0.0, "no review"
	if on && k.result != "" {
		want, what = float64(p.OK), fmt.Sprintf("%d reviews counted %q", p.OK, k.result)
	}
	if p.Wincompat.Count != want || (want > 0 && p.Wincompat.ByResult[k.result] != want) {
		e.failures = append(e.failures, fmt.Sprintf("%s, webhook installed %v, round %d: %d pods created, want %s, wincompat counted %v (%v)",
			k.name, on, round+1, p.OK, what, p.Wincompat.Count, p.Wincompat.ByResult))
	}
}
