package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// The engines of the comparison, in the order of the tables.
const (
	engineNone            = "none"
	engineFloor           = "floor"
	engineAdmissionPolicy = "admission-policy"
	engineWebhook         = "webhook"
	engineHybrid          = "hybrid"
	engineKyverno         = "kyverno"
)

// engine is one way of getting the Windows chart pod stored: what is installed while it runs, what the
// dry-run probe must show once the API server acts on it, and the pod its creators send.
type engine struct {
	name, description string
	toggles           []perf.Toggle
	want              func(perf.ProbeState) bool
	pod               *corev1.Pod
	// reviewed: wincompat must count one review per creation; otherwise none.
	reviewed bool
}

// engines are the engines of this run: no mutation, the floor (the least a MutatingAdmissionPolicy
// does for this pod, issue 29), wincompat's three (issue 15), and Kyverno when -kyverno names its
// binary (make perf-peers).
func (e *env) engines(ctx context.Context, p *prepared) ([]engine, error) {
	chart, stored := p.typed.chart, p.typed.unchanged
	webhook := e.webhook
	// Start from nothing installed: envtest, or the part before, installed the webhook.
	if err := webhook.Apply(ctx, false); err != nil {
		return nil, err
	}
	policies, err := perf.NewAdmissionPolicySwitch(ctx, e.cs)
	if err != nil {
		return nil, err
	}
	floor, err := perf.NewFloorSwitch(ctx, e.cs)
	if err != nil {
		return nil, err
	}
	// The chart's hybrid engine installs the webhook with failurePolicy Ignore beside the policies.
	hybridWebhook := webhook.WithFailurePolicy(admissionregistrationv1.Ignore)
	out := []engine{
		{engineNone, "no mutation: the pod as wincompat's webhook stores it, created as is", nil,
			func(s perf.ProbeState) bool { return s.Rejected }, stored, false},
		{engineFloor, "the floor: one MutatingAdmissionPolicy written for this pod's rewrite alone, a constant JSONPatch, no record (test/lab/perf/floor.yaml)", []perf.Toggle{floor},
			func(s perf.ProbeState) bool { return s.Placed && s.Named && !s.Webhook && !s.Policies }, chart, false},
		{engineAdmissionPolicy, "wincompat's MutatingAdmissionPolicies alone, evaluated inside the API server (no webhook installed)", []perf.Toggle{policies},
			func(s perf.ProbeState) bool { return s.Policies && !s.Webhook }, chart, false},
		{engineWebhook, "wincompat's webhook alone, deploy/webhook as shipped (failurePolicy Fail)", []perf.Toggle{webhook},
			func(s perf.ProbeState) bool { return s.Webhook && !s.Policies }, chart, true},
		{engineHybrid, "the admission policies and the webhook with failurePolicy Ignore, as the chart's hybrid engine installs them", []perf.Toggle{policies, hybridWebhook},
			func(s perf.ProbeState) bool { return s.Webhook && s.Policies }, chart, true},
	}
	if e.kyverno != nil {
		procs := "every core"
		if e.kyverno.gomaxprocs > 0 {
			procs = fmt.Sprintf("GOMAXPROCS=%d", e.kyverno.gomaxprocs)
		}
		out = append(out, engine{engineKyverno, fmt.Sprintf("Kyverno %s's admission controller (%s), out of cluster on loopback, with a ClusterPolicy doing the same rewrite (test/lab/peers/kyverno/clusterpolicy.yaml)", e.kyverno.version, procs),
			[]perf.Toggle{e.kyverno}, func(s perf.ProbeState) bool { return s.Placed && !s.Named && !s.Webhook && !s.Policies }, chart, false})
	}
	return out, nil
}

// use installs what engine i needs, removes everything the others installed, and waits until the
// probe shows the API server doing what engine i does.
func use(ctx context.Context, e *env, engines []engine, i int, probe *corev1.Pod) error {
	for j, other := range engines {
		if j == i {
			continue
		}
		for _, t := range other.toggles {
			if !slices.Contains(engines[i].toggles, t) {
				if err := t.Apply(ctx, false); err != nil {
					return fmt.Errorf("removing %s: %w", other.name, err)
				}
			}
		}
	}
	for _, t := range engines[i].toggles {
		if err := t.Apply(ctx, true); err != nil {
			return fmt.Errorf("installing %s: %w", engines[i].name, err)
		}
	}
	return perf.WaitForProbeState(ctx, e.cs, probe, "doing what "+engines[i].name+" does", engines[i].want)
}

func (e *env) runEngines(ctx context.Context, p *prepared) (*perf.EngineResults, error) {
	engines, err := e.engines(ctx, p)
	if err != nil {
		return nil, err
	}
	// The probe is the chart pod itself: every engine but none must make it admissible.
	probe := p.typed.chart
	out := &perf.EngineResults{Creators: e.creators, PhaseSeconds: e.apiDuration.Seconds(), Rounds: e.engineRounds, Rate: e.engineRate}
	for _, en := range engines {
		out.Engines = append(out.Engines, perf.Engine{Name: en.name, Description: en.description})
	}
	fixedResults := make([][]*load.Result, len(engines))
	for round := range e.engineRounds {
		for place := range engines {
			// Each engine takes each place in turn, so that none always follows the same one.
			i := (place + round) % len(engines)
			en := engines[i]
			if err := use(ctx, e, engines, i, probe); err != nil {
				return nil, err
			}
			op := perf.CreatePods(e.cs, en.pod, e.creators, fmt.Sprintf("%s-%d", en.name, round), perf.CheckStoredChartPod)
			load.Closed(ctx, e.creators, e.warmup, op)
			if err := perf.DeletePods(ctx, e.cs, namespace); err != nil {
				return nil, err
			}
			for _, fixed := range []bool{false, true} {
				e.warnings.Take()
				span, err := e.meter.Start(ctx)
				if err != nil {
					return nil, err
				}
				var profile <-chan error
				if !fixed && e.profileDir != "" {
					profile = e.profileAPIServer(ctx, filepath.Join(e.profileDir, fmt.Sprintf("kube-apiserver-%s-round%d.pprof", en.name, round+1)))
				}
				var res *load.Result
				name := "max"
				if fixed {
					name = fmt.Sprintf("%.0f/s", e.engineRate)
					res = load.Open(ctx, e.creators, e.engineRate, e.apiDuration, time.Second+e.apiDuration/10, op)
				} else {
					res = load.Closed(ctx, e.creators, e.apiDuration, op)
				}
				phase, err := span.End(ctx, res)
				if err != nil {
					return nil, err
				}
				if profile != nil {
					if err := <-profile; err != nil {
						return nil, err
					}
				}
				phase.Warnings = e.warnings.Take()
				e.checkEngine(en, round, name, phase)
				printPhase(fmt.Sprintf("engine %s, %s, round %d", en.name, name, round+1), phase)
				r := &out.Engines[i]
				if fixed {
					r.Fixed = append(r.Fixed, phase)
					fixedResults[i] = append(fixedResults[i], res)
				} else {
					r.Max = append(r.Max, phase)
					r.Order = append(r.Order, place)
				}
				// Deleted between phases, outside the measured windows, in bounded chunks.
				if err := perf.DeletePods(ctx, e.cs, namespace); err != nil {
					return nil, fmt.Errorf("deleting the pods of %s: %w", en.name, err)
				}
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	for i := range out.Engines {
		if out.Engines[i].FixedMerged, err = perf.MergePhases(fixedResults[i], out.Engines[i].Fixed); err != nil {
			return nil, err
		}
	}
	// Leave the API server as the later parts expect it: wincompat's webhook alone.
	webhook := slices.IndexFunc(engines, func(en engine) bool { return en.name == engineWebhook })
	if err := use(ctx, e, engines, webhook, probe); err != nil {
		return nil, err
	}
	return out, nil
}

// checkEngine fails the run when a phase did not measure the engine's work: any failed creation (a
// pod stored without the rewrite is one, see perf.CheckStoredChartPod), and wincompat's reviews not one
// per creation where it is installed, or any where it is not.
func (e *env) checkEngine(en engine, round int, load string, p perf.Phase) {
	where := fmt.Sprintf("engine %s, %s, round %d", en.name, load, round+1)
	if p.Errors+p.Missed > 0 || p.OK == 0 {
		e.failures = append(e.failures, fmt.Sprintf("%s: %d created, %d failed (%v), %d missed", where, p.OK, p.Errors, p.ErrorKinds, p.Missed))
	}
	want := 0.0
	if en.reviewed {
		want = float64(p.OK)
	}
	if p.Wincompat.Count != want {
		e.failures = append(e.failures, fmt.Sprintf("%s: %d pods created, wincompat counted %v reviews (%v), want %v", where, p.OK, p.Wincompat.Count, p.Wincompat.ByResult, want))
	}
}

// profileAPIServer takes a CPU profile of kube-apiserver (its /debug/pprof, on by default) for the
// whole seconds of a measured phase that starts now, and writes it to path.
func (e *env) profileAPIServer(ctx context.Context, path string) <-chan error {
	done := make(chan error, 1)
	seconds := max(int(e.apiDuration.Seconds()), 1)
	go func() {
		raw, err := e.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(seconds)).Timeout(time.Duration(seconds+30) * time.Second).DoRaw(ctx)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(path), 0o755)
		}
		if err == nil {
			err = os.WriteFile(path, raw, 0o644)
		}
		if err != nil {
			err = fmt.Errorf("profiling kube-apiserver: %w", err)
		}
		done <- err
	}()
	return done
}
