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
// good policy stays in force, said in the log, in wincompat_policy_valid and, with a store, in an Event.
//
// With a store, the last content that loaded is also kept in the API server, so a replica that starts
// while the mounted policy is invalid (applied before the validating webhook existed, or past it) serves
// with that one, or with the built-in policy if none was ever kept, instead of refusing to start: a
// rollout during a bad edit must not take admission down.
type policyFile struct {
	path      string
	namespace string
	current   *atomic.Pointer[policy.Policy]
	interval  time.Duration
	log       logr.Logger
	onChange  func()
	lastSum   [sha256.Size]byte
	store     *policyStore // nil: no fallback, an invalid file at start is an error

	good     []byte // the content in force, when it came from the file
	fallback string // at start: the source in force instead of the invalid file
	invalid  error  // why the file was refused at start
}

// Sources of the policy in force (wincompat_policy_source).
const (
	sourceFile     = "file"
	sourceLastGood = "last-good"
	sourceBuiltIn  = "built-in"
)

type policyGauges struct {
	reloads *prometheus.CounterVec
	source  *prometheus.GaugeVec
	valid   prometheus.Gauge
}

var policyMetrics = sync.OnceValue(func() policyGauges {
	g := policyGauges{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wincompat_policy_reloads_total",
			Help: "Policy file changes seen, by result: applied, or rejected (invalid; the last good policy stays).",
		}, []string{"result"}),
		source: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wincompat_policy_source",
			Help: "1 for the source of the policy in force: file (the mounted policy), last-good (the file was invalid at start; the last policy that loaded, kept in the API server), built-in (invalid at start and nothing kept).",
		}, []string{"source"}),
		valid: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "wincompat_policy_valid",
			Help: "1 when the policy file's current content is in force, 0 when it is invalid and the last good (or built-in) policy is used.",
		}),
	}
	metrics.Registry.MustRegister(g.reloads, g.source, g.valid)
	return g
})

// inForce says which source the policy in force came from.
func (g policyGauges) inForce(in string) {
	for _, s := range []string{sourceFile, sourceLastGood, sourceBuiltIn} {
		v := 0.0
		if s == in {
			v = 1
		}
		g.source.WithLabelValues(s).Set(v)
	}
	if in == sourceFile {
		g.valid.Set(1)
	} else {
		g.valid.Set(0)
	}
}

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
// that a change made before the manager starts this runnable is still picked up. With a store, an
// invalid file falls back to the kept policy, then to the built-in one.
func (f *policyFile) load(ctx context.Context) (*policy.Policy, error) {
	data, err := os.ReadFile(f.path)
	if err == nil {
		f.lastSum = sha256.Sum256(data)
		var p *policy.Policy
		if p, err = policy.Load(data); err == nil {
			f.good = data
			return withOwnNamespace(p, f.namespace), nil
		}
	}
	err = fmt.Errorf("policy %s: %w", f.path, err)
	if f.store == nil {
		return nil, err
	}
	f.invalid = err
	kept, kerr := f.store.load(ctx)
	if kerr == nil {
		p, perr := policy.Load(kept)
		if perr == nil {
			f.fallback = sourceLastGood
			return withOwnNamespace(p, f.namespace), nil
		}
		kerr = perr
	}
	f.log.Error(kerr, "no last good policy to fall back to", "configMap", f.store.lastGood)
	f.fallback = sourceBuiltIn
	return withOwnNamespace(policy.Default(), f.namespace), nil
}

// Start reports how the policy was chosen, keeps a loaded file's content, then polls until ctx ends.
func (f *policyFile) Start(ctx context.Context) error {
	m := policyMetrics()
	if f.fallback != "" {
		m.inForce(f.fallback)
		f.log.Error(f.invalid, "the policy file is invalid; serving with the "+f.fallback+" policy until it is fixed", "path", f.path)
		f.store.warn("PolicyInvalid", "Start", "%v; serving with the %s policy until it is fixed", f.invalid, f.fallback)
	} else {
		m.inForce(sourceFile)
		f.keep(ctx)
	}
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
			m.reloads.WithLabelValues("rejected").Inc()
			m.valid.Set(0)
			f.log.Error(err, "policy file changed but is invalid; keeping the last good policy", "path", f.path)
			if f.store != nil {
				f.store.warn("PolicyInvalid", "Reload", "policy %s: %v; keeping the last good policy", f.path, err)
			}
			continue
		}
		f.current.Store(withOwnNamespace(p, f.namespace))
		f.good = data
		m.reloads.WithLabelValues("applied").Inc()
		m.inForce(sourceFile)
		f.log.Info("policy reloaded", "path", f.path)
		f.keep(ctx)
		if f.onChange != nil {
			f.onChange()
		}
	}
}

// keep stores the content in force as the last good policy; a failure only costs the fallback.
func (f *policyFile) keep(ctx context.Context) {
	if f.store == nil || f.good == nil {
		return
	}
	if err := f.store.save(ctx, f.good); err != nil {
		f.log.Error(err, "keeping the last good policy failed; a replica starting with an invalid policy file would fall back to an older one or the built-in policy", "configMap", f.store.lastGood)
	}
}

// NeedLeaderElection is false: every replica answers admission with the same policy.
func (f *policyFile) NeedLeaderElection() bool { return false }
