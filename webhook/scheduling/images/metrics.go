package images

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of wincompat_image_lookups_total.
const (
	resultHit     = "hit"
	resultMiss    = "miss"
	resultError   = "error"
	resultTimeout = "timeout"
	resultBusy    = "busy"
)

// Metrics are the resolver's series. No image or namespace label: a cluster has unboundedly many.
type Metrics struct {
	lookups  *prometheus.CounterVec
	byResult map[string]prometheus.Counter // lookups' children, resolved once for the hot path
	duration prometheus.Histogram
}

// NewMetrics creates the series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wincompat_image_lookups_total",
			Help: "Images answered to reviews, by result: hit (from the cache), miss (read from the registry in time), " +
				"error (the registry's error, a cached one, or an invalid reference), timeout (not in time), " +
				"busy (not asked: too many registry lookups in flight).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "wincompat_image_lookup_duration_seconds",
			Help: "Time to read one image's platforms from its registry, including lookups that finished in the background.",
			// From a registry next door to one that takes the whole background budget.
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
	}
	// Every result exists from the start, so that rate() sees the first timeout.
	m.byResult = make(map[string]prometheus.Counter, 5)
	for _, r := range []string{resultHit, resultMiss, resultError, resultTimeout, resultBusy} {
		m.byResult[r] = m.lookups.WithLabelValues(r)
	}
	reg.MustRegister(m.lookups, m.duration)
	return m
}

func (m *Metrics) count(result string) {
	if m != nil {
		m.byResult[result].Inc()
	}
}

func (m *Metrics) observe(d time.Duration) {
	if m != nil {
		m.duration.Observe(d.Seconds())
	}
}
