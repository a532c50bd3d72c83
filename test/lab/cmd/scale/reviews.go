package main

import (
	"context"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
	"github.com/wincompat/wincompat/webhook"
)

// reviewLatency sends n reviews of the Windows chart pod (perf.ChartPod, as the Go benchmarks and make
// perf use it) in an opted-in namespace to r's /mutate-pod, one after the other on one HTTPS keep-alive
// connection, after warmup unmeasured ones, and returns the latencies' p50 and p99 in milliseconds.
// Sequential, so that what is measured is one review's cost against the replica's caches (namespaces,
// nodes, RuntimeClasses), not queueing.
func reviewLatency(ctx context.Context, r *replica, caPEM []byte, warmup, n int) (load.Percentiles, error) {
	review, err := perf.NewReview("windows-chart-pod", "", perf.ChartPod(2, namespaceName(0), true), namespaceName(0), admissionv1.Create, perf.WithPatch, "mutated")
	if err != nil {
		return load.Percentiles{}, err
	}
	client, err := perf.NewReviewClient(r.port, webhook.PodPath, caPEM, 1)
	if err != nil {
		return load.Percentiles{}, err
	}
	defer client.Close()
	op := client.Op(review)
	h := load.NewHistogram()
	for i := range warmup + n {
		t := time.Now()
		if err := op(ctx, 0); err != nil {
			return load.Percentiles{}, fmt.Errorf("%s: review %d: %w", r.name, i, err)
		}
		if i >= warmup {
			if err := h.RecordValue(time.Since(t).Microseconds()); err != nil {
				return load.Percentiles{}, err
			}
		}
	}
	if c := client.Connections(); c != 1 {
		return load.Percentiles{}, fmt.Errorf("%s: %d connections for %d sequential reviews: keep-alive did not hold", r.name, c, warmup+n)
	}
	return load.PercentilesOf(h), nil
}
