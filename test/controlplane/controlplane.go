// Package controlplane starts the real kube-apiserver and etcd built into bin/k8s/<version>, and on
// request the real kube-scheduler and Kubernetes' garbage collector and service account controllers, for
// tests (Start, StartWithWebhooks) and for programs such as the demo (Launch).
//
// The binaries come from `make k8s`, one directory per Kubernetes version; the version is test/go.mod's
// unless WINCOMPAT_K8S_VERSION names another (version.go). A missing binary is a test failure, never a
// skip: a suite that quietly skips its oracle proves nothing.
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

// BinDir returns the absolute path of bin/k8s/<Version> after checking that the binaries envtest runs are
// there and that the API server was built from that release.
func BinDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	version, err := Version(root)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", "k8s", version)
	var missing []string
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		how := fmt.Sprintf("run `make k8s` in %s to build the test control plane", root)
		if os.Getenv(VersionEnv) != "" {
			how = fmt.Sprintf("%s names a version not built here; unset it for test/go.mod's", VersionEnv)
		}
		return "", fmt.Errorf("%s missing from %s: %s", strings.Join(missing, " and "), dir, how)
	}
	if err := checkBuiltFrom(filepath.Join(dir, "kube-apiserver"), version); err != nil {
		return "", err
	}
	return dir, nil
}

// Webhook is where the API server expects the webhook server to listen, and its serving certificate.
type Webhook struct {
	Host    string
	Port    int
	CertDir string // tls.crt and tls.key, signed by CAData
	CAData  []byte
}

// Options says what Launch runs.
//
// Unlike envtest's defaults, every default admission plugin of the API server stays on, ServiceAccount
// included: the point is to be rejected exactly as a real cluster would reject. Callers therefore create
// the ServiceAccounts their pods name, "default" included unless ServiceAccounts runs the controller
// that makes it.
type Options struct {
	// WebhookPaths are webhook configuration manifests (files or directories) that envtest installs with
	// their clientConfig pointed at Webhook: a local port and a fresh serving certificate.
	WebhookPaths []string
	// Scheduler also runs the real kube-scheduler from bin/k8s against the API server, so
	// that pods on fake Node objects get bound exactly as a real cluster would bind them. See scheduler.go.
	Scheduler bool
	// GarbageCollector also runs Kubernetes' garbage collector controller (bin/k8s/controllers, see
	// controllers.go), so that objects whose owners are deleted are deleted as in a real cluster.
	GarbageCollector bool
	// ServiceAccounts also runs Kubernetes' service account controller (in the same process), so that
	// every namespace gets its "default" ServiceAccount as in a real cluster. Off by default: a caller
	// that creates "default" itself would race it.
	ServiceAccounts bool
	// WorkDir holds the scheduler's and the controllers' kubeconfigs and logs (kube-scheduler.log,
	// controllers.log) and the scheduler's serving certificate. When
	// empty, Launch makes a temporary directory and Stop removes it.
	WorkDir string
	// APIServerFlags and EtcdFlags are extra command-line flags for kube-apiserver and etcd, applied in
	// order after envtest's defaults: each replaces any value envtest gives the same flag (such as
	// --audit-policy-file and --audit-log-path for an audit log, or --max-requests-inflight).
	APIServerFlags []Flag
	EtcdFlags      []Flag
}

// Flag is one command-line flag of a control-plane process: --Name=Values[0] --Name=Values[1] ...
type Flag struct {
	Name   string
	Values []string
}

// ControlPlane is a running kube-apiserver and etcd, and the kube-scheduler and controllers when asked
// for.
type ControlPlane struct {
	Config  *rest.Config  // system:masters
	Client  client.Client // from Config
	Webhook Webhook       // where envtest pointed Options.WebhookPaths

	env        *envtest.Environment
	components []*component // started in this order, stopped in the other
	workDir    string
	ownWorkDir bool
	stopOnce   sync.Once
	stopErr    error
}

var setLogger sync.Once

// Launch starts the control plane. On error nothing it started is left running. Call Stop when done,
// also when the program is interrupted: etcd and the API server run in process groups of their own, so
// a Ctrl-C in the terminal does not reach them.
func Launch(o Options) (*ControlPlane, error) {
	dir, err := BinDir()
	if err != nil {
		return nil, err
	}
	// controller-runtime prints a stack trace when its logger is never set. Errors (such as envtest
	// retrying a failed start) and API server warnings still reach stderr; its debug output does not.
	// KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true shows the processes' own output.
	setLogger.Do(func() {
		logf.SetLogger(funcr.New(func(prefix, args string) {
			fmt.Fprintln(os.Stderr, prefix, args)
		}, funcr.Options{}))
	})

	cp := &ControlPlane{workDir: o.WorkDir}
	if cp.workDir == "" {
		if cp.workDir, err = os.MkdirTemp("", "wincompat-controlplane-"); err != nil {
			return nil, err
		}
		cp.ownWorkDir = true
	}
	cp.env = &envtest.Environment{
		BinaryAssetsDirectory: dir,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: o.WebhookPaths, LocalServingHost: "127.0.0.1"},
	}
	// Explicit paths win over KUBEBUILDER_ASSETS and TEST_ASSET_*, so a stray environment variable
	// cannot swap in an API server of another version. envtest also derives a kubectl path, but only
	// runs kubectl when asked to, so bin/k8s needs none.
	api := cp.env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(dir, "kube-apiserver")
	cp.env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}
	// envtest passes --disable-admission-plugins=ServiceAccount by default; dropping the flag restores
	// the API server's own default plugin set.
	api.Configure().Disable("disable-admission-plugins")
	for _, f := range o.APIServerFlags {
		api.Configure().Set(f.Name, f.Values...)
	}
	for _, f := range o.EtcdFlags {
		cp.env.ControlPlane.Etcd.Configure().Set(f.Name, f.Values...)
	}

	if cp.Config, err = cp.env.Start(); err != nil {
		// Start may have launched etcd before the API server failed.
		return nil, errors.Join(err, cp.Stop())
	}
	if cp.Client, err = client.New(cp.Config, client.Options{}); err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	wo := cp.env.WebhookInstallOptions
	cp.Webhook = Webhook{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir, CAData: wo.LocalServingCAData}
	for _, c := range []struct {
		on    bool
		start func(*ControlPlane, string) (*component, error)
		dir   string
	}{
		{o.Scheduler, startScheduler, "kube-scheduler"},
		{o.GarbageCollector || o.ServiceAccounts, func(cp *ControlPlane, work string) (*component, error) {
			return startControllers(cp, o, work)
		}, "controllers"},
	} {
		if !c.on {
			continue
		}
		started, err := c.start(cp, filepath.Join(cp.workDir, c.dir))
		if err != nil {
			return nil, errors.Join(err, cp.Stop())
		}
		cp.components = append(cp.components, started)
	}
	return cp, nil
}

// KubeConfig returns a kubeconfig file's content for a new user of the API server, in groups
// (system:masters for an administrator), for a program that runs as a separate process.
func (cp *ControlPlane) KubeConfig(user string, groups ...string) ([]byte, error) {
	u, err := cp.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("credentials of %s: %w", user, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of %s: %w", user, err)
	}
	return kc, nil
}

// WriteKubeConfig writes KubeConfig's file for user, in groups, to path (readable by the owner only,
// since it holds the user's key), making its directory if needed.
func (cp *ControlPlane) WriteKubeConfig(path, user string, groups ...string) error {
	kc, err := cp.KubeConfig(user, groups...)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, kc, 0o600)
}

// ComponentLogs are the log files of the kube-scheduler and controllers that run. Stop removes
// them when Launch chose the work directory.
func (cp *ControlPlane) ComponentLogs() []string {
	var logs []string
	for _, c := range cp.components {
		logs = append(logs, c.logPath)
	}
	return logs
}

// Stop stops the scheduler and controllers, then the API server and etcd, and removes what Launch
// created. It is safe to call more than once. It reports a component that exited before it was stopped,
// with its log's end.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var errs []error
		for i := len(cp.components) - 1; i >= 0; i-- {
			errs = append(errs, cp.components[i].stop())
		}
		if cp.env != nil {
			if err := cp.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping the API server and etcd: %w", err))
			}
		}
		if cp.ownWorkDir {
			errs = append(errs, os.RemoveAll(cp.workDir))
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}
