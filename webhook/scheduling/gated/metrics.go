package gated

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// States of wincompat_gated_pods: a pod still within the bound, and one past it (the leader could not
// remove its gate: the alert WincompatPodsGatedTooLong).
const (
	stateWaiting = "waiting"
	stateOverdue = "overdue"
)

// Outcomes of wincompat_gate_duration_seconds.
const (
	outcomeDecided  = "decided"  // every image answered
	outcomeFallback = "fallback" // the bound passed, or a registry answered with an error: the build came from the other sources
	outcomeReleased = "released" // out of scope, or not a Windows pod: the gate removed, nothing decided
)

// Metrics are the controller's series, labels from the sets above only. The gauges are the leader's
// count; other replicas report 0.
type Metrics struct {
	pods     *prometheus.GaugeVec
	oldest   prometheus.Gauge
	duration *prometheus.HistogramVec
}

// NewMetrics creates the series, every label value at zero, and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		pods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wincompat_gated_pods",
			Help: "Pods behind wincompat's scheduling gate, by state: waiting (within --gate-timeout) or overdue (past it: the leader could not remove the gate). The leader's count; other replicas report 0.",
		}, []string{"state"}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "wincompat_gated_pod_oldest_seconds",
			Help: "Age of the oldest pod behind wincompat's scheduling gate, 0 when there is none (the leader's; other replicas report 0).",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "wincompat_gate_duration_seconds",
			Help: "Time from a gated pod's creation to the removal of wincompat's gate, by outcome: decided (from the registry's answers), fallback (the bound passed or the registry answered an error), released (out of scope: nothing decided).",
			// From a registry a second late to the default bound and past it.
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 180, 300, 600},
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.pods, m.oldest, m.duration)
	m.reset()
	for _, o := range []string{outcomeDecided, outcomeFallback, outcomeReleased} {
		m.duration.WithLabelValues(o)
	}
	return m
}

func (m *Metrics) reset() { m.set(0, 0, 0) }

func (m *Metrics) set(waiting, overdue int, oldest time.Duration) {
	m.pods.WithLabelValues(stateWaiting).Set(float64(waiting))
	m.pods.WithLabelValues(stateOverdue).Set(float64(overdue))
	m.oldest.Set(oldest.Seconds())
}

func (m *Metrics) ungated(outcome string, after time.Duration) {
	m.duration.WithLabelValues(outcome).Observe(after.Seconds())
}
