// Package controlplane starts the real kube-apiserver and etcd built into bin/k8s (DESIGN §8) for tests,
// and on request the real kube-scheduler (WithScheduler).
//
// The binaries come from `make k8s`. A missing binary is a test failure, never a skip: a suite that
// quietly skips its oracle proves nothing.
package controlplane

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

const mainModule = "github.com/wincompat/wincompat"

// RepoRoot returns the directory of the main wincompat module (the one holding bin/ and deploy/).
func RepoRoot() (string, error) {
	start, err := os.Getwd()
	if err != nil {
		return "", err
	}
	// Prefer this file's location so callers in any working directory find the same root; under
	// -trimpath the recorded path is not a file system path and the working directory (a package
	// directory inside test/) is the next best anchor.
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		start = filepath.Dir(file)
	}
	for dir := start; ; dir = filepath.Dir(dir) {
		if moduleOf(filepath.Join(dir, "go.mod")) == mainModule {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of module %s above %s", mainModule, start)
		}
	}
}

// moduleOf returns the module path declared in a go.mod file, or "" when there is none.
func moduleOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// BinDir returns the absolute path of bin/k8s after checking that the binaries envtest runs are there.
func BinDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", "k8s")
	var missing []string
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s missing from %s: run `make k8s` in %s to build the test control plane",
			strings.Join(missing, " and "), dir, root)
	}
	return dir, nil
}

var setLogger sync.Once

// Start runs a kube-apiserver and etcd for the duration of t and returns an admin config and client.
// The control plane stops in t's cleanup.
//
// Unlike envtest's defaults, every default admission plugin of the API server stays on, ServiceAccount
// included: the point is to be rejected exactly as a real cluster would reject. Tests therefore create
// the ServiceAccounts their pods name, as no controller-manager runs to do it.
func Start(t testing.TB) (*rest.Config, client.Client) {
	t.Helper()
	cfg, c, _ := run(t, options{})
	return cfg, c
}

// Webhook is where the API server expects the webhook server to listen, and its serving certificate.
type Webhook struct {
	Host    string
	Port    int
	CertDir string // tls.crt and tls.key, signed by CAData
	CAData  []byte
}

// Option adds to the control plane StartWithWebhooks runs.
type Option func(*options)

type options struct {
	webhookPaths []string
	scheduler    bool
}

// WithWebhookPaths installs more webhook configuration manifests next to deploy/webhook.
func WithWebhookPaths(paths ...string) Option {
	return func(o *options) { o.webhookPaths = append(o.webhookPaths, paths...) }
}

// WithScheduler also runs the real kube-scheduler from bin/k8s against the API server (DESIGN §8), so
// that pods on fake Node objects get bound exactly as a real cluster would bind them. See scheduler.go.
func WithScheduler() Option {
	return func(o *options) { o.scheduler = true }
}

// StartWithWebhooks is Start with wincompat's real MutatingWebhookConfiguration from deploy/webhook
// installed, its clientConfig pointed at a local port with a fresh serving certificate (envtest's
// WebhookInstallOptions). The caller serves the webhook there.
func StartWithWebhooks(t testing.TB, opts ...Option) (*rest.Config, client.Client, Webhook) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	o := options{webhookPaths: []string{filepath.Join(root, "deploy", "webhook")}}
	for _, opt := range opts {
		opt(&o)
	}
	return run(t, o)
}

func run(t testing.TB, o options) (*rest.Config, client.Client, Webhook) {
	t.Helper()
	cfg, c, wh, env, err := start(o.webhookPaths)
	if err != nil {
		t.Fatalf("starting the test control plane: %v", err)
	}
	// Cleanups run last-registered first: the scheduler, registered below, stops before the API server.
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the test control plane: %v", err)
		}
	})
	if o.scheduler {
		startScheduler(t, env)
	}
	return cfg, c, wh
}

func start(webhookPaths []string) (*rest.Config, client.Client, Webhook, *envtest.Environment, error) {
	dir, err := BinDir()
	if err != nil {
		return nil, nil, Webhook{}, nil, err
	}
	// controller-runtime prints a stack trace when its logger is never set. Errors (such as envtest
	// retrying a failed start) and API server warnings still reach stderr; its debug output does not.
	// KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true shows the processes' own output.
	setLogger.Do(func() {
		logf.SetLogger(funcr.New(func(prefix, args string) {
			fmt.Fprintln(os.Stderr, prefix, args)
		}, funcr.Options{}))
	})

	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: webhookPaths, LocalServingHost: "127.0.0.1"},
	}
	// Explicit paths win over KUBEBUILDER_ASSETS and TEST_ASSET_*, so a stray environment variable
	// cannot swap in an API server of another version. envtest also derives a kubectl path, but only
	// runs kubectl when a test asks for it, so bin/k8s needs none.
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(dir, "kube-apiserver")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}
	// envtest passes --disable-admission-plugins=ServiceAccount by default; dropping the flag restores
	// the API server's own default plugin set.
	api.Configure().Disable("disable-admission-plugins")

	cfg, err := env.Start()
	if err != nil {
		// Start may have launched etcd before the API server failed.
		return nil, nil, Webhook{}, nil, errors.Join(err, env.Stop())
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, nil, Webhook{}, nil, errors.Join(err, env.Stop())
	}
	o := env.WebhookInstallOptions
	return cfg, c, Webhook{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir, CAData: o.LocalServingCAData}, env, nil
}
