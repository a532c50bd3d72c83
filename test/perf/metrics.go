package perf

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Admissions is what wincompat says it answered, from its own /metrics.
type Admissions struct {
	// ByResult is wincompat_admission_total summed over resource and operation: mutated, unchanged,
	// skipped, ignored, error.
	ByResult map[string]float64 `json:"byResult,omitempty"`
	// HandlerSeconds is the time spent inside wincompat's handler (wincompat_admission_duration_seconds),
	// without TLS, HTTP and the review's decoding and encoding.
	HandlerSeconds float64 `json:"handlerSeconds"`
	Count          float64 `json:"count"`
}

// ScrapeAdmissions reads wincompat's admission counters from its metrics endpoint.
func ScrapeAdmissions(ctx context.Context, url string) (Admissions, error) {
	a := Admissions{ByResult: map[string]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return a, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return a, fmt.Errorf("GET %s: %w", url, err)
	}
	if f := families["wincompat_admission_total"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					a.ByResult[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if f := families["wincompat_admission_duration_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			a.HandlerSeconds += m.GetHistogram().GetSampleSum()
			a.Count += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return a, nil
}

// Sub returns what happened between before and a.
func (a Admissions) Sub(before Admissions) Admissions {
	d := Admissions{ByResult: map[string]float64{}, HandlerSeconds: a.HandlerSeconds - before.HandlerSeconds, Count: a.Count - before.Count}
	for k, v := range a.ByResult {
		if n := v - before.ByResult[k]; n != 0 {
			d.ByResult[k] = n
		}
	}
	return d
}
