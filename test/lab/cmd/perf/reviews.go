package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
	"github.com/wincompat/wincompat/webhook"
)

// prepared holds the pods of the run, derived from what the running wincompat answers rather than from
// a copy of its rules.
type prepared struct {
	// version is what wincompat stamps on pods (wincompat.io/version).
	version string
	// chart is the Windows chart pod wincompat mutates; unchanged is the same pod with wincompat's own
	// patch applied, which it must answer with no patch; linux the chart pod for Linux.
	chart, unchanged, linux []byte
	reviews                 []*perf.Review
	// typed are the same three pods decoded for client-go, once for both pod-creation parts.
	typed struct{ chart, unchanged, linux *corev1.Pod }
}

func (e *env) prepare(ctx context.Context) (*prepared, error) {
	p := &prepared{chart: perf.ChartPod(2, namespace, true), linux: perf.ChartPod(2, namespace, false)}
	corpusPath := filepath.Join(e.root, "..", "shared", "corpus", "charts", "ingress-nginx.yaml")
	corpus, err := perf.CorpusPod(corpusPath, "ingress-nginx-controller", namespace)
	if err != nil {
		return nil, fmt.Errorf("the corpus pod (shared/ must sit beside the checkout): %w", err)
	}
	client, err := perf.NewReviewClient(e.port, webhook.PodPath, e.caPEM, 1)
	if err != nil {
		return nil, err
	}
	defer client.Close()

	chart, err := perf.NewReview("chart-pod",
		"Windows pod with 2 containers and the Linux-only securityContext fields of real charts (webhook/bench_test.go benchPod(2)): stripped, rewritten, scheduling injected",
		p.chart, namespace, admissionv1.Create, perf.WithPatch, "mutated")
	if err != nil {
		return nil, err
	}
	resp, err := client.Answer(ctx, chart)
	if err != nil {
		return nil, err
	}
	if !resp.Allowed || len(resp.Patch) == 0 {
		return nil, fmt.Errorf("wincompat answered the chart pod without a patch (allowed %v): is namespace %s opted in?", resp.Allowed, namespace)
	}
	if p.unchanged, err = perf.ApplyPatch(p.chart, resp.Patch); err != nil {
		return nil, fmt.Errorf("applying wincompat's patch to the chart pod: %w", err)
	}
	var stamped struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(p.unchanged, &stamped); err != nil {
		return nil, err
	}
	p.version = stamped.Metadata.Annotations[policy.AnnotationVersion]

	// wincompat may answer it with a patch that changes nothing (a test operation), so that the API
	// server decodes the object again; that is checked once below, by applying it.
	unchanged, err := perf.NewReview("unchanged",
		"the chart pod as wincompat left it: a Windows pod with nothing left to change",
		p.unchanged, namespace, admissionv1.Create, perf.AnyPatch, "unchanged")
	if err != nil {
		return nil, err
	}
	ingress, err := perf.NewReview("corpus-ingress-nginx",
		"the pod of the ingress-nginx controller Deployment from the corpus (shared/corpus/charts/ingress-nginx.yaml), declared Windows, as in the Go benchmarks",
		corpus, namespace, admissionv1.Create, perf.WithPatch, "mutated")
	if err != nil {
		return nil, err
	}
	floor, err := perf.NewReview("floor",
		"the chart pod's review with operation DELETE, which wincompat allows without reading the object: TLS, HTTP/1.1 keep-alive and the review's decoding and response encoding (webhook.Endpoint) only",
		p.chart, namespace, admissionv1.Delete, perf.NoPatch, "ignored")
	if err != nil {
		return nil, err
	}
	p.reviews = []*perf.Review{chart, ingress, unchanged, floor}
	for _, r := range p.reviews {
		resp, err := client.Answer(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Name, err)
		}
		if !resp.Allowed || (r.Patch == perf.WithPatch && len(resp.Patch) == 0) || (r.Patch == perf.NoPatch && len(resp.Patch) > 0) {
			return nil, fmt.Errorf("%s: wincompat answered allowed=%v with a %d-byte patch", r.Name, resp.Allowed, len(resp.Patch))
		}
	}
	if err := changesNothing(ctx, client, unchanged, p.unchanged); err != nil {
		return nil, err
	}
	for _, pod := range []struct {
		raw   []byte
		typed **corev1.Pod
	}{{p.chart, &p.typed.chart}, {p.unchanged, &p.typed.unchanged}, {p.linux, &p.typed.linux}} {
		if *pod.typed, err = perf.TypedPod(pod.raw); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// changesNothing checks that wincompat's answer to r leaves pod as it is: no patch, or one that
// applies to an equal document.
func changesNothing(ctx context.Context, client *perf.ReviewClient, r *perf.Review, pod []byte) error {
	resp, err := client.Answer(ctx, r)
	if err != nil {
		return fmt.Errorf("%s: %w", r.Name, err)
	}
	if len(resp.Patch) == 0 {
		return nil
	}
	patched, err := perf.ApplyPatch(pod, resp.Patch)
	if err != nil {
		return fmt.Errorf("%s: applying wincompat's patch %s: %w", r.Name, resp.Patch, err)
	}
	var before, after any
	if err := json.Unmarshal(pod, &before); err != nil {
		return err
	}
	if err := json.Unmarshal(patched, &after); err != nil {
		return err
	}
	if !reflect.DeepEqual(before, after) {
		return fmt.Errorf("%s: wincompat's second pass changes the pod it made (patch %s): it is not a pod with nothing left to change", r.Name, resp.Patch)
	}
	return nil
}

// runReviews finds each review's maximum with a closed loop on e.connections keep-alive connections,
// then runs an open loop at e.loadFraction of that maximum.
func (e *env) runReviews(ctx context.Context, p *prepared) (*perf.ReviewResults, error) {
	rr := &perf.ReviewResults{GOMAXPROCS: 1, Connections: e.connections, PhaseSeconds: e.duration.Seconds(), LoadFraction: e.loadFraction}
	for _, r := range p.reviews {
		s, err := e.maxAndFixed(ctx, target{e.port, e.meter}, r)
		if err != nil {
			return nil, err
		}
		rr.Scenarios = append(rr.Scenarios, s)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return rr, nil
}

// target is a running `wincompat serve` to send reviews to, and the meter of it.
type target struct {
	port  int
	meter *perf.Meter
}

// maxAndFixed measures r's maximum with a closed loop, then an open loop at e.loadFraction of it.
func (e *env) maxAndFixed(ctx context.Context, t target, r *perf.Review) (perf.ReviewScenario, error) {
	s := perf.ReviewScenario{Name: r.Name, Description: r.Description, BodyBytes: r.BodyBytes()}
	client, err := perf.NewReviewClient(t.port, webhook.PodPath, e.caPEM, e.connections)
	if err != nil {
		return s, err
	}
	defer client.Close()
	op := client.Op(r)
	load.Closed(ctx, e.connections, e.warmup, op)
	var res *load.Result
	if s.Max, res, err = e.measureReviews(ctx, t.meter, client, func() *load.Result {
		return load.Closed(ctx, e.connections, e.duration, op)
	}); err != nil {
		return s, err
	}
	e.checkReviews(r, "max", s.Max)
	printPhase(r.Name+", max", s.Max)

	rate := e.loadFraction * res.Throughput()
	if rate < 1 {
		return s, fmt.Errorf("%s: a maximum of %.1f reviews/s leaves no rate to run at", r.Name, res.Throughput())
	}
	if s.Fixed, err = e.atRate(ctx, t, client, r, rate); err != nil {
		return s, err
	}
	printPhase(fmt.Sprintf("%s, %.0f%%", r.Name, 100*e.loadFraction), s.Fixed)
	return s, nil
}

// atRate measures r in an open loop at rate reviews/s, after a warm-up at the same rate.
func (e *env) atRate(ctx context.Context, t target, client *perf.ReviewClient, r *perf.Review, rate float64) (perf.Phase, error) {
	op := client.Op(r)
	load.Open(ctx, e.connections, rate, e.warmup, e.grace(), op)
	p, _, err := e.measureReviews(ctx, t.meter, client, func() *load.Result {
		return load.Open(ctx, e.connections, rate, e.duration, e.grace(), op)
	})
	if err == nil {
		e.checkReviews(r, "fixed", p)
	}
	return p, err
}

// grace is how far an open loop may fall behind: one that does has found the server's limit, and the
// rest is missed.
func (e *env) grace() time.Duration { return time.Second + e.duration/10 }

func (e *env) measureReviews(ctx context.Context, meter *perf.Meter, client *perf.ReviewClient, run func() *load.Result) (perf.Phase, *load.Result, error) {
	span, err := meter.Start(ctx)
	if err != nil {
		return perf.Phase{}, nil, err
	}
	dials := client.Connections()
	res := run()
	phase, err := span.End(ctx, res)
	phase.Connections = client.Connections() - dials
	return phase, res, err
}

// checkReviews compares what wincompat counted with what the generator saw: every successful review
// answered under the expected result, and nothing else.
func (e *env) checkReviews(r *perf.Review, phase string, p perf.Phase) {
	counted := p.Wincompat.ByResult[r.WantResult]
	if counted < float64(p.OK) || (p.Errors == 0 && p.Wincompat.Count != float64(p.OK)) {
		e.failures = append(e.failures, fmt.Sprintf("%s (%s): %d reviews answered, wincompat counted %v as %q and %v in all (%v)",
			r.Name, phase, p.OK, counted, r.WantResult, p.Wincompat.Count, p.Wincompat.ByResult))
	}
}
