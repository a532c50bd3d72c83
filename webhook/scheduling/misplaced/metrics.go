package misplaced

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of wincompat_misplaced_deletions_total.
const (
	outcomeDeleted     = "deleted"
	outcomeRateLimited = "rate-limited"      // no token: tried again when one is due
	outcomeOwnerWindow = "owner-window"      // its controller had a pod deleted within the window
	outcomeBudget      = "disruption-budget" // the eviction was refused: its PodDisruptionBudget allows none now
)

// Metrics are the watcher's series: labels from Causes and the outcomes above only.
type Metrics struct {
	pods      *prometheus.GaugeVec
	deletions *prometheus.CounterVec
}

// NewMetrics creates the series, every label value at zero, and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		pods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wincompat_misplaced_pods",
			Help: "Windows pods in opted-in namespaces that failed on their node for a reason of operating system or build, by cause (the leader's count; other replicas report 0).",
		}, []string{"cause"}),
		deletions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wincompat_misplaced_deletions_total",
			Help: "Misplaced pods remediation evicted, or held back by the rate limit, the controller's window or a PodDisruptionBudget.",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.pods, m.deletions)
	m.reset()
	for _, o := range []string{outcomeDeleted, outcomeRateLimited, outcomeOwnerWindow, outcomeBudget} {
		m.deletions.WithLabelValues(o)
	}
	return m
}

func (m *Metrics) reset() {
	for _, c := range Causes() {
		m.pods.WithLabelValues(string(c)).Set(0)
	}
}

func (m *Metrics) set(cause Cause, pods int) {
	m.pods.WithLabelValues(string(cause)).Set(float64(pods))
}

func (m *Metrics) deletion(outcome string) { m.deletions.WithLabelValues(outcome).Inc() }
