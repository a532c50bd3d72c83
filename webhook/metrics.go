package webhook

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/wincompat/wincompat/policy"
)

// Metrics are wincompat's own series. Every label value comes from a closed set, since
// whoever reaches the port or creates a pod chooses the strings a review carries: the handler's
// resources, the admission operations, results and modes, the fields wincompat changes (those of
// each change's rule: policy.Change.MetricField), the catalog's builds and the build sources wincompat
// writes; anything else is "other". Never a namespace or a pod name.
type Metrics struct {
	admissions *prometheus.CounterVec
	changes    *prometheus.CounterVec
	builds     *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	gated      *prometheus.CounterVec
}

// NewMetrics creates the series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wincompat_admission_total",
			Help: "Admission reviews answered, by resource, operation, result (mutated, unchanged, skipped, denied, error, ignored) and mode (enforce, warn: the result is what wincompat decided and did not apply).",
		}, []string{"resource", "operation", "result", "mode"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wincompat_changes_total",
			Help: "Changes decided for pods and templates, by action, field and mode (warn: decided, not made).",
		}, []string{"action", "field", "mode"}),
		builds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wincompat_build_selected_total",
			Help: "Windows builds chosen for pods, by build (several joined by commas when node affinity allows them all), source and mode (warn: chosen, not applied).",
		}, []string{"build", "source", "mode"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "wincompat_admission_duration_seconds",
			Help: "Time to answer an admission review inside wincompat, by resource.",
			// Sub-millisecond buckets: a review costs tens to hundreds of microseconds. The top ones lie
			// past the image lookup deadline (1 s by default, 2 s at most), so reviews that waited for a
			// slow registry are told apart from those that took longer still.
			Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1, 1.5, 2.5, 5},
		}, []string{"resource"}),
		gated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wincompat_pods_gated_total",
			Help: "Pods admitted behind the scheduling gate wincompat.io/build, by why their images were not answered: timeout (the registry), busy (wincompat's own lookup bounds), not-cached (imageResolver.mode gate).",
		}, []string{"reason"}),
	}
	for _, r := range []string{gatedTimeout, gatedBusy, gatedNotCached} {
		m.gated.WithLabelValues(r) // present at 0, so that a rate has a start
	}
	reg.MustRegister(m.admissions, m.changes, m.builds, m.latency, m.gated)
	return m
}

// other is the label value for anything outside a label's closed set.
const other = "other"

// observe records one review. resource must already be bounded (boundedResource); result is one of the
// handler's own and mode one of the policy's.
func (m *Metrics) observe(pol *policy.Policy, resource, operation, result, mode string, seconds float64, d policy.Decision) {
	if m == nil {
		return
	}
	mode = closed(mode, modes)
	m.admissions.WithLabelValues(resource, closed(operation, admissionOperations), result, mode).Inc()
	m.latency.WithLabelValues(resource).Observe(seconds)
	for _, c := range d.Changes {
		m.changes.WithLabelValues(closed(string(c.Action), actions), c.MetricField(), mode).Inc()
	}
	if d.Build != "" {
		build := d.Build
		if !pol.CatalogBuilds(build) {
			build = other
		}
		source := d.BuildSource
		if !policy.KnownBuildSource(source) {
			source = other
		}
		m.builds.WithLabelValues(build, source, mode).Inc()
	}
}

// gatedPod counts a pod admitted behind the gate, for reason (gateReason's set); "" counts nothing.
func (m *Metrics) gatedPod(reason string) {
	if m == nil || reason == "" {
		return
	}
	m.gated.WithLabelValues(reason).Inc()
}

var (
	admissionOperations = []string{string(admissionv1.Create), string(admissionv1.Update), string(admissionv1.Delete), string(admissionv1.Connect)}
	modes               = []string{policy.ModeEnforce, policy.ModeWarn}
	actions             = []string{string(policy.Strip), string(policy.Rewrite), string(policy.Inject), string(policy.Warn)}
)

func closed(v string, set []string) string {
	if slices.Contains(set, v) {
		return v
	}
	return other
}
