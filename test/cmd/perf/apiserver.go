package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/test/perf"
	"github.com/wincompat/wincompat/test/perf/load"
)

// webhookConfigName is the MutatingWebhookConfiguration in deploy/webhook.
const webhookConfigName = "wincompat"

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
	linux, err := perf.TypedPod(p.linux)
	if err != nil {
		return nil, err
	}
	unchanged, err := perf.TypedPod(p.unchanged)
	if err != nil {
		return nil, err
	}
	mutated, err := perf.TypedPod(p.chart)
	if err != nil {
		return nil, err
	}
	kinds := []podKind{
		{"linux", "the chart pod for Linux in the opted-in namespace: the webhook's matchConditions keep it from wincompat", linux, linux, ""},
		{"windows-unchanged", "the Windows chart pod as wincompat leaves it: wincompat is called and answers with no patch", unchanged, unchanged, "unchanged"},
		{"windows-mutated", "the Windows chart pod with Linux-only fields: wincompat patches it; without the webhook, the pod as patched is created instead (the original would be rejected)", mutated, unchanged, "mutated"},
	}
	sw, err := perf.NewWebhookSwitch(ctx, e.cs, webhookConfigName, mutated)
	if err != nil {
		return nil, err
	}
	type rounds struct {
		results []*load.Result
		phases  []perf.Phase
	}
	with, without := make([]rounds, len(kinds)), make([]rounds, len(kinds))
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
				pod, side, acc := k.without, "without", &without[i]
				if on {
					pod, side, acc = k.with, "with", &with[i]
				}
				op := perf.CreatePods(e.cs, pod, e.creators, fmt.Sprintf("%s-%d-%s", k.name, round, side))
				load.Closed(ctx, e.creators, e.warmup, op)
				e.warnings.Take()
				span, err := e.meter.Start(ctx)
				if err != nil {
					return nil, err
				}
				res := load.Closed(ctx, e.creators, e.apiDuration, op)
				phase, err := span.End(ctx, res)
				if err != nil {
					return nil, err
				}
				phase.Warnings = e.warnings.Take()
				e.checkCreations(k, on, round, phase)
				printPhase(fmt.Sprintf("%s, %s webhook, round %d", k.name, side, round+1), phase)
				acc.results, acc.phases = append(acc.results, res), append(acc.phases, phase)
				// Every phase starts from the same number of pods.
				if err := perf.DeletePods(ctx, e.cs, namespace); err != nil {
					return nil, fmt.Errorf("deleting the pods of %s: %w", k.name, err)
				}
			}
		}
	}
	out := &perf.APIResults{Creators: e.creators, PhaseSeconds: e.apiDuration.Seconds(), Rounds: e.apiRounds}
	for i, k := range kinds {
		ak := perf.APIKind{Name: k.name, Description: k.description}
		if ak.With, err = perf.MergePhases(with[i].results, with[i].phases); err != nil {
			return nil, err
		}
		if ak.Without, err = perf.MergePhases(without[i].results, without[i].phases); err != nil {
			return nil, err
		}
		ak.Compare()
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
