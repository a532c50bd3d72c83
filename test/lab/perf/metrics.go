package perf

import (
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
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
	// ImageLookups is wincompat_image_lookups_total by result (hit, miss, error, timeout, busy): the images
	// the reviews asked the resolver for. Empty when wincompat serves without image resolution.
	ImageLookups map[string]float64 `json:"imageLookups,omitempty"`
	// Gated is wincompat_pods_gated_total by reason (timeout, busy, not-cached): the pods admitted behind
	// the scheduling gate because their images had no answer at admission.
	Gated map[string]float64 `json:"gated,omitempty"`
}

// ScrapeFamilies reads every metric family of a Prometheus text endpoint.
func ScrapeFamilies(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return families, nil
}

// ScrapeAdmissions reads wincompat's admission counters from its metrics endpoint.
func ScrapeAdmissions(ctx context.Context, url string) (Admissions, error) {
	a := Admissions{ByResult: map[string]float64{}, ImageLookups: map[string]float64{}, Gated: map[string]float64{}}
	families, err := ScrapeFamilies(ctx, url)
	if err != nil {
		return a, err
	}
	sumByResult(families["wincompat_admission_total"], a.ByResult)
	sumByResult(families["wincompat_image_lookups_total"], a.ImageLookups)
	sumByLabel(families["wincompat_pods_gated_total"], "reason", a.Gated)
	if f := families["wincompat_admission_duration_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			a.HandlerSeconds += m.GetHistogram().GetSampleSum()
			a.Count += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return a, nil
}

// sumByResult adds counter family f's values into by, by their "result" label; f may be nil.
func sumByResult(f *dto.MetricFamily, by map[string]float64) { sumByLabel(f, "result", by) }

// sumByLabel adds counter family f's values into by, by their label; f may be nil.
func sumByLabel(f *dto.MetricFamily, label string, by map[string]float64) {
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				by[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
}

// Sub returns what happened between before and a.
func (a Admissions) Sub(before Admissions) Admissions {
	return Admissions{
		ByResult: subCounts(a.ByResult, before.ByResult), ImageLookups: subCounts(a.ImageLookups, before.ImageLookups),
		Gated:          subCounts(a.Gated, before.Gated),
		HandlerSeconds: a.HandlerSeconds - before.HandlerSeconds, Count: a.Count - before.Count,
	}
}

// subCounts is after - before for each label value, without the values that did not change.
func subCounts(after, before map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range after {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}
