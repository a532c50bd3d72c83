package controlplane

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The helpers for tests: Launch for the duration of a test, stopped in its cleanup.

// Start runs a kube-apiserver and etcd for the duration of t and returns an admin config and client.
// The control plane stops in t's cleanup. See Options for the admission plugins it keeps.
func Start(t testing.TB) (*rest.Config, client.Client) {
	t.Helper()
	cp := run(t, Options{})
	return cp.Config, cp.Client
}

// Option adds to the control plane StartWithWebhooks runs.
type Option func(*Options)

// WithWebhookPaths installs more webhook configuration manifests next to deploy/webhook.
func WithWebhookPaths(paths ...string) Option {
	return func(o *Options) { o.WebhookPaths = append(o.WebhookPaths, paths...) }
}

// WithScheduler also runs the real kube-scheduler from bin/k8s (Options.Scheduler).
func WithScheduler() Option {
	return func(o *Options) { o.Scheduler = true }
}

// WithGarbageCollector also runs Kubernetes' garbage collector controller from bin/k8s
// (Options.GarbageCollector): objects owned through ownerReferences go when their owner goes.
func WithGarbageCollector() Option {
	return func(o *Options) { o.GarbageCollector = true }
}

// WithServiceAccounts also runs Kubernetes' service account controller from bin/k8s
// (Options.ServiceAccounts): every namespace gets its "default" ServiceAccount.
func WithServiceAccounts() Option {
	return func(o *Options) { o.ServiceAccounts = true }
}

// WithAPIServerFlag adds a kube-apiserver flag, replacing envtest's value for it (Options.APIServerFlags).
func WithAPIServerFlag(name string, values ...string) Option {
	return func(o *Options) { o.APIServerFlags = append(o.APIServerFlags, Flag{Name: name, Values: values}) }
}

// WithEtcdFlag adds an etcd flag, replacing envtest's value for it (Options.EtcdFlags).
func WithEtcdFlag(name string, values ...string) Option {
	return func(o *Options) { o.EtcdFlags = append(o.EtcdFlags, Flag{Name: name, Values: values}) }
}

// StartWithWebhooks is Start with wincompat's real MutatingWebhookConfiguration from deploy/webhook
// installed, its clientConfig pointed at a local port with a fresh serving certificate (envtest's
// WebhookInstallOptions). The caller serves the webhook there.
func StartWithWebhooks(t testing.TB, opts ...Option) (*rest.Config, client.Client, Webhook) {
	t.Helper()
	cp := LaunchWithWebhooks(t, opts...)
	return cp.Config, cp.Client, cp.Webhook
}

// LaunchWithWebhooks is StartWithWebhooks returning the control plane itself, for tests that also need
// its KubeConfig for other users.
func LaunchWithWebhooks(t testing.TB, opts ...Option) *ControlPlane {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{WebhookPaths: []string{filepath.Join(root, "deploy", "webhook")}}
	for _, opt := range opts {
		opt(&o)
	}
	return run(t, o)
}

func run(t testing.TB, o Options) *ControlPlane {
	t.Helper()
	// The components' logs live in t's temp dir, which outlives the cleanup below (cleanups run
	// last-registered first), so a failed test can show its end.
	o.WorkDir = t.TempDir()
	cp, err := Launch(o)
	if err != nil {
		t.Fatalf("starting the test control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the test control plane: %v", err)
		} else if t.Failed() {
			for _, log := range cp.ComponentLogs() {
				t.Logf("output of %s, as the test failed:\n%s", log, tail(log, 8<<10))
			}
		}
	})
	return cp
}

// LaunchBare runs a control plane with no webhook configuration installed, for tests that install
// wincompat the way a user does (the chart), and returns it for its KubeConfig of other users.
func LaunchBare(t testing.TB, opts ...Option) *ControlPlane {
	t.Helper()
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	return run(t, o)
}
