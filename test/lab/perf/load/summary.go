package load

import (
	"math"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Summary is a Result in a form for people and JSON: latencies in milliseconds.
type Summary struct {
	Workers        int              `json:"workers"`
	TargetRate     float64          `json:"targetRate,omitempty"`
	ElapsedSeconds float64          `json:"elapsedSeconds"`
	OK             int64            `json:"ok"`
	Errors         int64            `json:"errors"`
	ErrorKinds     map[string]int64 `json:"errorKinds,omitempty"`
	Missed         int64            `json:"missed,omitempty"`
	Throughput     float64          `json:"throughput"`
	Latency        Percentiles      `json:"latencyMs"`
	// SendLag is the open loop's lateness in starting operations (see Result.SendLag).
	SendLag *Percentiles `json:"sendLagMs,omitempty"`
	// Distribution is the latency at percentiles spaced evenly on a log scale of 1/(1-p), for plots.
	Distribution []Point `json:"distribution,omitempty"`
}

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99.9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Point is one percentile (0-100) and its latency in milliseconds.
type Point struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

// Summarize returns r's summary.
func (r *Result) Summarize() Summary {
	s := Summary{
		Workers: r.Workers, TargetRate: r.Rate, ElapsedSeconds: r.Elapsed.Seconds(),
		OK: r.OK, Errors: r.ErrorCount(), Missed: r.Missed, Throughput: r.Throughput(),
		Latency: PercentilesOf(r.Latency), Distribution: distribution(r.Latency),
	}
	if len(r.Errors) > 0 {
		s.ErrorKinds = r.Errors
	}
	if r.Rate > 0 {
		lag := PercentilesOf(r.SendLag)
		s.SendLag = &lag
	}
	return s
}

// PercentilesOf reads the usual percentiles of a histogram recorded in microseconds.
func PercentilesOf(h *hdrhistogram.Histogram) Percentiles {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Percentiles{
		P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000,
	}
}

// distribution samples the percentiles 1-10^-x for x from 0 in steps of 0.05 up to where the count
// still resolves them (a p99.99 of 5,000 samples is just the maximum), then the maximum.
func distribution(h *hdrhistogram.Histogram) []Point {
	n := h.TotalCount()
	if n == 0 {
		return nil
	}
	// ValueAtQuantile(0) is 0 rather than the smallest value recorded.
	out := []Point{{Percentile: 0, Ms: float64(h.Min()) / 1000}}
	top := math.Log10(float64(n))
	for x := 0.05; x <= top; x += 0.05 {
		p := 100 * (1 - math.Pow(10, -x))
		out = append(out, Point{Percentile: p, Ms: float64(h.ValueAtQuantile(p)) / 1000})
	}
	return append(out, Point{Percentile: 100 * (1 - 1/float64(n)), Ms: float64(h.Max()) / 1000})
}
