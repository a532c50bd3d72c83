package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/wincompat/wincompat/policy"
)

// policyFile reloads the policy when the file's content changes. A ConfigMap volume replaces its files
// by swapping a symlink, which polling the content sees without any inotify subtleties; a few seconds of
// delay are nothing next to the kubelet's own propagation delay. Invalid content is refused and the last
// good policy stays in force, said once in the log and in wincompat_policy_valid.
type policyFile struct {
	path      string
	namespace string
	current   *atomic.Pointer[policy.Policy]
	interval  time.Duration
	log       logr.Logger
	onChange  func()
	lastSum   [sha256.Size]byte
}

var policyMetrics = sync.OnceValues(func() (*prometheus.CounterVec, prometheus.Gauge) {
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wincompat_policy_reloads_total",
		Help: "Policy file changes seen, by result: applied, or rejected (invalid; the last good policy stays).",
	}, []string{"result"})
	valid := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "wincompat_policy_valid",
		Help: "1 when the policy file's current content is in force, 0 when it is invalid and the last good policy is used.",
	})
	metrics.Registry.MustRegister(reloads, valid)
	return reloads, valid
})

// withOwnNamespace excludes wincompat's own namespace from mutation, and from the cluster-wide Linux
// pin, whatever the policy file says (a default-os label on it still counts: that is asking by name).
func withOwnNamespace(p *policy.Policy, ns string) *policy.Policy {
	if ns == "" || (slices.Contains(p.ExcludedNamespaces, ns) && slices.Contains(p.LinuxByDefaultExcludedNamespaces, ns)) {
		return p
	}
	copied := *p
	if !slices.Contains(p.ExcludedNamespaces, ns) {
		copied.ExcludedNamespaces = append(slices.Clone(p.ExcludedNamespaces), ns)
	}
	if !slices.Contains(p.LinuxByDefaultExcludedNamespaces, ns) {
		copied.LinuxByDefaultExcludedNamespaces = append(slices.Clone(p.LinuxByDefaultExcludedNamespaces), ns)
	}
	return &copied
}

// load reads the file at start-up: its policy is the one in force, and its content counts as seen, so
// that a change made before the manager starts this runnable is still picked up.
func (f *policyFile) load() (*policy.Policy, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, err
	}
	p, err := policy.Load(data)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", f.path, err)
	}
	f.lastSum = sha256.Sum256(data)
	return withOwnNamespace(p, f.namespace), nil
}

// Start polls until ctx ends.
func (f *policyFile) Start(ctx context.Context) error {
	reloads, valid := policyMetrics()
	valid.Set(1)
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		data, err := os.ReadFile(f.path)
		if err != nil {
			// A ConfigMap being swapped can be briefly absent; try again next tick.
			continue
		}
		sum := sha256.Sum256(data)
		if sum == f.lastSum {
			continue
		}
		f.lastSum = sum
		p, err := policy.Load(data)
		if err != nil {
			reloads.WithLabelValues("rejected").Inc()
			valid.Set(0)
			f.log.Error(err, "policy file changed but is invalid; keeping the last good policy", "path", f.path)
			continue
		}
		f.current.Store(withOwnNamespace(p, f.namespace))
		reloads.WithLabelValues("applied").Inc()
		valid.Set(1)
		f.log.Info("policy reloaded", "path", f.path)
		if f.onChange != nil {
			f.onChange()
		}
	}
}

// NeedLeaderElection is false: every replica answers admission with the same policy.
func (f *policyFile) NeedLeaderElection() bool { return false }
