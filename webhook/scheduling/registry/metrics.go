package registry

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

// Reasons of wincompat_image_lookup_failures_total: what the operator is told about a failed lookup,
// which the pod's author is not. A closed set; nothing of the image or the address.
const (
	reasonRefused      = "refused"      // connection refused or reset
	reasonTLS          = "tls"          // certificate not trusted, handshake failed
	reasonDNS          = "dns"          // no such host, resolver failure
	reasonTimeout      = "timeout"      // no answer within BackgroundTimeout
	reasonPolicy       = "policy"       // refused by the egress policy: address or plain HTTP
	reasonHTTP         = "http"         // an HTTP status other than those below, too many redirects
	reasonTooLarge     = "too-large"    // a response over 4 MiB
	reasonMalformed    = "malformed"    // content that is not what it claims
	reasonUnauthorized = "unauthorized" // 401/403
	reasonNotFound     = "not-found"    // 404
	reasonRateLimited  = "rate-limited" // 429
	reasonCredentials  = "credentials"  // the pod's pull secrets could not be read, or a cloud identity gave no token
	reasonBusy         = "busy"         // wincompat's own bounds on lookups or bytes
	reasonOther        = "other"
)

var reasons = []string{reasonRefused, reasonTLS, reasonDNS, reasonTimeout, reasonPolicy, reasonHTTP, reasonTooLarge,
	reasonMalformed, reasonUnauthorized, reasonNotFound, reasonRateLimited, reasonCredentials, reasonBusy, reasonOther}

// Metrics are the resolver's series. No image or namespace label: a cluster has unboundedly many.
type Metrics struct {
	lookups  *prometheus.CounterVec
	byResult map[string]prometheus.Counter // lookups' children, resolved once for the hot path
	duration prometheus.Histogram
	failures map[string]prometheus.Counter
}

// NewMetrics creates the series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wincompat_image_lookups_total",
			Help: "Images answered to reviews and to the leader placing gated pods, by result: hit (from the cache), miss (read from the registry in time), " +
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
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wincompat_image_lookup_failures_total",
		Help: "Registry lookups that failed, by reason: refused, tls, dns, timeout, policy (the egress policy refused " +
			"the address or plain HTTP), http, too-large, malformed, unauthorized, not-found, rate-limited, credentials " +
			"(the pod's pull secrets unreadable), busy (wincompat's own bounds on lookups in flight or bytes), other. " +
			"Pod authors get one message for every network failure; this and the log (V(1)) tell them apart.",
	}, []string{"reason"})
	m.failures = make(map[string]prometheus.Counter, len(reasons))
	for _, r := range reasons {
		m.failures[r] = failures.WithLabelValues(r)
	}
	reg.MustRegister(m.lookups, m.duration, failures)
	return m
}

func (m *Metrics) count(result string) {
	if m != nil {
		m.byResult[result].Inc()
	}
}

func (m *Metrics) fail(reason string) {
	if m != nil {
		m.failures[reason].Inc()
	}
}

func (m *Metrics) observe(d time.Duration) {
	if m != nil {
		m.duration.Observe(d.Seconds())
	}
}
