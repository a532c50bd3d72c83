// Package server runs wincompat's admission webhook on a controller-runtime manager: TLS with certificate
// hot reload, health and readiness probes, Prometheus metrics and graceful shutdown.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/bytebudget"
	"github.com/wincompat/wincompat/webhook/certs"
	"github.com/wincompat/wincompat/webhook/scheduling/inventory"
	"github.com/wincompat/wincompat/webhook/scheduling/misplaced"
	"github.com/wincompat/wincompat/webhook/scheduling/registry"
	"github.com/wincompat/wincompat/webhook/scheduling/runtimeclass"
)

// Options is every setting of the server. Validate it before Run.
type Options struct {
	CertDir       string // tls.crt and tls.key, reloaded when they change
	Host          string // bind host; empty for all interfaces
	Port          int
	MetricsAddr   string // "0" disables
	ProbeAddr     string // "0" disables
	PprofAddr     string // net/http/pprof; empty or "0" disables
	TLSMinVersion string // "1.2" or "1.3"
	EnableHTTP2   bool
	LeaderElect   bool
	// Namespace is wincompat's own namespace: excluded from mutation, and where the leader Lease lives.
	Namespace string
	// ShutdownDelay is how long the server keeps answering after ctx ends, not ready and closing each
	// keep-alive connection after its next answer, before it stops listening. The API server keeps
	// connections to a webhook open and may send a review on one just as the endpoint leaves the
	// Service; closing them at once would fail that review, and with it the pod's creation.
	ShutdownDelay   time.Duration
	ShutdownTimeout time.Duration
	// ManageRuntimeClasses runs the RuntimeClass reconciler (on the leader only).
	ManageRuntimeClasses bool
	// Engine is EngineWebhook, or EngineHybrid: the MutatingAdmissionPolicies of policy/admissionpolicy,
	// installed with their bindings and params by the chart, do the static part inside the API server
	// too. wincompat writes none of them (admissionpolicies.go); with EngineHybrid the leader only says
	// at start when the API server does not serve them.
	Engine string
	// Misplaced, when set, watches Windows pods that fail on their node for reasons of OS or build (on
	// the leader only): an Event per pod, the wincompat_misplaced_pods gauge and, when its Enabled is
	// set, the deletion of eligible pods for their controllers to make again.
	Misplaced *misplaced.Remediation
	// Images, when set, reads the Windows builds of pods' images from their registries.
	Images *ImageOptions
	// ImageResolverMode is how admission reads Images (webhook.ImageModes; "" is lookup). In lookup and
	// gate modes a pod whose images are not answered at admission waits behind the scheduling gate, and
	// the leader decides its build.
	ImageResolverMode string
	// GateTimeout bounds how long the leader keeps a pod gated without an answer from its registry:
	// then it removes the gate with the build the other sources give. 0 is policy.DefaultGateTimeout.
	GateTimeout time.Duration
	// Serving bounds the webhook port's connections, reads and review memory, and may require the
	// API server's client certificate. Zero fields take the defaults.
	Serving Serving
	Policy  *policy.Policy
	// SelfManagedTLS, when set, replaces CertDir: the leader keeps a CA and serving certificate in a
	// Secret and the webhook configuration's caBundle current; every replica serves from the Secret.
	SelfManagedTLS *certs.Config
	// PolicyFile, when set, is watched: a valid new content replaces Policy without a restart.
	PolicyFile string
	// PolicyConfigMap, when set, names the ConfigMap in Namespace that PolicyFile is mounted from: the
	// last policy that loaded is kept in <name>-last-good, and a replica that starts while the file is
	// invalid serves with that one (or the built-in policy) instead of refusing to start.
	PolicyConfigMap    string
	PolicyPollInterval time.Duration
	Version            string
	Log                logr.Logger
}

// MinGateTimeout is the shortest --gate-timeout: a registry gets at least this long to answer for a
// gated pod's images. The chart asks for 30s at least; tests use less.
const MinGateTimeout = 5 * time.Second

// gateTimeout is GateTimeout, or its default.
func (o *Options) gateTimeout() time.Duration {
	if o.GateTimeout == 0 {
		return policy.DefaultGateTimeout
	}
	return o.GateTimeout
}

// offer sends v unless ch already holds a pending value.
func offer[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// Engines.
const (
	EngineWebhook = "webhook"
	EngineHybrid  = "hybrid"
)

var tlsVersions = map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}

// Validate reports every problem at once, each naming its flag and what to do.
func (o *Options) Validate() error {
	var errs []error
	if _, ok := tlsVersions[o.TLSMinVersion]; !ok {
		errs = append(errs, fmt.Errorf("--tls-min-version %q: use 1.2 or 1.3", o.TLSMinVersion))
	}
	if o.Port < 1 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d: use 1-65535", o.Port))
	}
	if o.SelfManagedTLS == nil {
		for _, f := range []string{"tls.crt", "tls.key"} {
			if _, err := os.Stat(filepath.Join(o.CertDir, f)); err != nil {
				errs = append(errs, fmt.Errorf("--cert-dir: %w (mount the serving certificate Secret there, or use --self-managed-tls)", err))
			}
		}
	} else if o.Namespace == "" || o.SelfManagedTLS.ServiceName == "" || o.SelfManagedTLS.SecretName == "" || o.SelfManagedTLS.WebhookConfigName == "" {
		errs = append(errs, errors.New("--self-managed-tls needs --namespace, --service-name, --tls-secret and --webhook-config-name"))
	}
	if o.LeaderElect && o.Namespace == "" {
		errs = append(errs, errors.New("--leader-elect needs --namespace (or POD_NAMESPACE) for its Lease"))
	}
	if o.Policy == nil {
		errs = append(errs, errors.New("no policy"))
	}
	if o.PolicyConfigMap != "" && (o.PolicyFile == "" || o.Namespace == "") {
		errs = append(errs, errors.New("--policy-configmap needs --policy (the file mounted from it) and --namespace (or POD_NAMESPACE)"))
	}
	if o.Engine != "" && o.Engine != EngineWebhook && o.Engine != EngineHybrid {
		errs = append(errs, fmt.Errorf("--engine %q: use %s (all in the webhook) or %s (the static part as MutatingAdmissionPolicies, Kubernetes 1.36 and later)", o.Engine, EngineWebhook, EngineHybrid))
	}
	if o.ImageResolverMode != "" && !slices.Contains(webhook.ImageModes, o.ImageResolverMode) {
		errs = append(errs, fmt.Errorf("--image-resolver-mode %q: use %s", o.ImageResolverMode, strings.Join(webhook.ImageModes, ", ")))
	}
	if o.GateTimeout != 0 && o.GateTimeout < MinGateTimeout {
		errs = append(errs, fmt.Errorf("--gate-timeout %v: use at least %v, so that a slow registry can answer before the build falls back", o.GateTimeout, MinGateTimeout))
	}
	if o.Images != nil && (o.Images.Timeout <= 0 || o.Images.Timeout > 2*time.Second) {
		errs = append(errs, fmt.Errorf("--image-lookup-timeout %v: use more than 0 and at most 2s, well under the webhook's timeoutSeconds (3)", o.Images.Timeout))
	}
	if m := o.Misplaced; m != nil && m.Enabled && (m.PerMinute < 1 || m.OwnerWindow < time.Minute) {
		errs = append(errs, fmt.Errorf("--remediate-misplaced-per-minute %d, --remediate-misplaced-owner-window %v: use at least 1 pod per minute and a window of at least 1m", m.PerMinute, m.OwnerWindow))
	}
	if o.Images != nil && o.Images.MaxLookups < 0 {
		errs = append(errs, fmt.Errorf("--image-max-lookups %d: use at least 1 (0 for the default, 64)", o.Images.MaxLookups))
	}
	errs = append(errs, o.Serving.withDefaults().Validate(webhook.MinBudget)...)
	if o.Images != nil && o.Images.MaxLookupsPerRegistry < 0 {
		errs = append(errs, fmt.Errorf("--image-max-lookups-per-registry %d: use at least 1 (0 for a quarter of --image-max-lookups)", o.Images.MaxLookupsPerRegistry))
	}
	if o.Images != nil && o.Images.MaxBytesInFlight != 0 && o.Images.MaxBytesInFlight < registry.MinBytesInFlight {
		errs = append(errs, fmt.Errorf("--image-bytes-in-flight %d: use at least %d (one largest response), or 0 for the default, 32Mi", o.Images.MaxBytesInFlight, registry.MinBytesInFlight))
	}
	if o.Images != nil && o.Images.PullSecret != "" && o.Images.PullSecretNamespaces == "" {
		errs = append(errs, errors.New("--image-pull-secret needs --image-pull-secret-namespaces, a label selector of the namespaces whose pods' images may be read with it (kubernetes.io/metadata.name for every namespace)"))
	}
	if o.Images != nil && len(o.Images.CloudCredentials) > 0 && o.Images.PullSecretNamespaces == "" {
		errs = append(errs, errors.New("--image-cloud-credentials needs --image-pull-secret-namespaces, a label selector of the namespaces whose pods' images may be read with wincompat's cloud identity (kubernetes.io/metadata.name for every namespace)"))
	}
	if o.Images != nil && o.Images.PullSecretNamespaces != "" {
		if _, err := labels.Parse(o.Images.PullSecretNamespaces); err != nil {
			errs = append(errs, fmt.Errorf("--image-pull-secret-namespaces: %w", err))
		}
	}
	if o.Images != nil && o.Images.PullSecret != "" && o.Namespace == "" {
		errs = append(errs, errors.New("--image-pull-secret needs --namespace (or POD_NAMESPACE): the Secret is read from wincompat's own namespace"))
	}
	return errors.Join(errs...)
}

// sharedMetrics registers wincompat's series once per process with controller-runtime's registry, which
// its metrics server exposes next to its own.
var sharedMetrics = sync.OnceValue(func() *webhook.Metrics { return webhook.NewMetrics(metrics.Registry) })

var sharedMisplacedMetrics = sync.OnceValue(func() *misplaced.Metrics { return misplaced.NewMetrics(metrics.Registry) })

var sharedLeaderGauge = sync.OnceValue(func() prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "wincompat_leader_synced",
		Help: "1 on the replica that leads once the caches of its cluster-wide work (Windows pods, Events) have synced; 0 on every other replica.",
	})
	metrics.Registry.MustRegister(g)
	return g
})

var sharedConflictGauge = sync.OnceValue(func() prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "wincompat_runtimeclass_conflicts",
		Help: "Catalog RuntimeClasses wincompat cannot manage because a class of the same name exists without its managed-by label.",
	})
	metrics.Registry.MustRegister(g)
	return g
})

// Run serves until ctx ends, drains for ShutdownDelay, then finishes in-flight reviews within
// ShutdownTimeout.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	var draining atomic.Bool
	mgrCtx, stopManager := context.WithCancel(context.Background())
	defer stopManager()
	go func() {
		select {
		case <-ctx.Done():
		case <-mgrCtx.Done():
			return
		}
		if o.ShutdownDelay > 0 {
			draining.Store(true)
			o.Log.Info("draining: not ready, closing keep-alive connections after their next answer", "for", o.ShutdownDelay)
			select {
			case <-time.After(o.ShutdownDelay):
			case <-mgrCtx.Done():
			}
		}
		stopManager()
	}()
	o.Serving = o.Serving.withDefaults()
	pol := withOwnNamespace(o.Policy, o.Namespace)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	tlsOpts := []func(*tls.Config){func(t *tls.Config) { t.MinVersion = tlsVersions[o.TLSMinVersion] }}
	var loader *certs.Loader
	var tlsCfg certs.Config
	if o.SelfManagedTLS != nil {
		tlsCfg = *o.SelfManagedTLS
		tlsCfg.Namespace = o.Namespace
		if o.PolicyConfigMap != "" {
			// The chart's last-good ConfigMap, which wincompat may already read by name: the Secret goes
			// with the release.
			tlsCfg.OwnerConfigMap = o.PolicyConfigMap + LastGoodSuffix
		}
		tlsCfg.Defaults()
		loader = &certs.Loader{Namespace: o.Namespace, SecretName: tlsCfg.SecretName, Interval: tlsCfg.ReloadInterval, Log: o.Log.WithName("certs")}
		tlsOpts = append(tlsOpts, func(t *tls.Config) { t.GetCertificate = loader.GetCertificate })
	}
	if !o.EnableHTTP2 {
		tlsOpts = append(tlsOpts, func(t *tls.Config) { t.NextProtos = []string{"http/1.1"} })
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Logger:                  o.Log,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		PprofBindAddress:        o.PprofAddr,
		GracefulShutdownTimeout: &o.ShutdownTimeout,
		WebhookServer:           newBoundedServer(o.Host, o.Port, o.CertDir, tlsOpts, o.Serving, o.Log.WithName("webhook")),
		Cache:                   cache.Options{ByObject: cacheOptions()},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	// Start the informers with the manager rather than on the first review.
	for _, obj := range sharedObjects() {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
	}
	inv := &inventory.Inventory{}
	if err := inv.Watch(ctx, mgr.GetCache()); err != nil {
		return err
	}
	var watcher *policyFile
	if o.PolicyFile != "" {
		interval := o.PolicyPollInterval
		if interval <= 0 {
			interval = 5 * time.Second
		}
		watcher = &policyFile{path: o.PolicyFile, namespace: o.Namespace, interval: interval, log: o.Log.WithName("policy")}
		if o.PolicyConfigMap != "" {
			direct, err := directClient(mgr)
			if err != nil {
				return err
			}
			watcher.store = newPolicyStore(direct, o.Namespace, o.PolicyConfigMap)
			watcher.store.recorder = mgr.GetEventRecorder("wincompat")
		}
		if pol, err = watcher.load(ctx); err != nil {
			return err
		}
	}
	current := &atomic.Pointer[policy.Policy]{}
	current.Store(pol)
	var resolver webhook.ImageResolver
	if o.Images != nil {
		r, err := newImageResolver(cfg, mgr.GetAPIReader(), mgr.GetClient(), o.Namespace, *o.Images, o.Log.WithName("images"))
		if err != nil {
			return err
		}
		resolver = r
	}
	shared := webhook.Config{
		Images:         resolver,
		ImageMode:      o.ImageResolverMode,
		Policy:         current,
		Namespaces:     mgr.GetClient(),
		NamespacesLive: mgr.GetAPIReader(),
		Cluster:        inv.Cluster,
		Version:        o.Version,
		Metrics:        sharedMetrics(),
		Log:            o.Log.WithName("admission"),
	}
	sharedMisplacedMetrics() // served by every replica; the leader's counts
	sharedGatedMetrics()     // likewise
	srv := mgr.GetWebhookServer()
	// One budget for every path: the bound is on the process's memory.
	limits := webhook.Limits{Budget: bytebudget.New(o.Serving.ReviewBytes), ReadTimeout: o.Serving.ReadTimeout, ReviewTimeout: reviewTimeout,
		DecodeFactor: webhook.PodDecodeFactor, ObjectBytes: webhook.PodObjectBytes}
	policyLimits := limits
	policyLimits.DecodeFactor, policyLimits.ObjectBytes = webhook.PolicyDecodeFactor, 0
	srv.Register(webhook.PodPath, closingWhen(&draining, webhook.NewEndpoint(webhook.NewPodHandler(shared)).WithLimits(limits)))
	srv.Register(webhook.WorkloadPath, closingWhen(&draining, webhook.NewEndpoint(webhook.NewWorkloadHandler(shared)).WithLimits(limits)))
	srv.Register(webhook.PolicyCheckPath, closingWhen(&draining, webhook.NewEndpoint(webhook.PolicyCheck{}).WithLimits(policyLimits)))
	optIn := optInCheck{policy: current, namespaces: shared.Namespaces, live: shared.NamespacesLive}
	srv.Register(OptInPath, closingWhen(&draining, webhook.NewEndpoint(optIn).WithLimits(limits)))
	if err := mgr.AddReadyzCheck("draining", func(*http.Request) error {
		if draining.Load() {
			return errors.New("shutting down")
		}
		return nil
	}); err != nil {
		return err
	}

	var issuer *certs.Issuer
	if loader != nil {
		loader.Reader = mgr.GetAPIReader()
		direct, err := directClient(mgr)
		if err != nil {
			return err
		}
		issuer = &certs.Issuer{Config: tlsCfg, Client: direct, Log: o.Log.WithName("certs"), Interval: tlsCfg.CheckInterval}
		if err := mgr.Add(loader); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("certificate", func(*http.Request) error {
			if !loader.Ready() {
				return errors.New("no serving certificate loaded yet")
			}
			return nil
		}); err != nil {
			return err
		}
	}
	policyChanged := make(chan event.GenericEvent, 1)
	// Cluster-wide work, done by one replica: issuing certificates and keeping RuntimeClasses.
	leaderWork := func(m ctrl.Manager) error {
		if issuer != nil {
			if err := m.Add(issuer); err != nil {
				return err
			}
		}
		// Where the API server serves no admission policies, admissionPoliciesServed says so: the webhook
		// does the whole rewrite alone. wincompat writes no admission policy (admissionpolicies.go).
		if o.Engine == EngineHybrid {
			admissionPoliciesServed(m, o.Log)
		}
		var synced []toolscache.InformerSynced
		var watched []client.Object
		if o.Misplaced != nil {
			watched = append(watched, &corev1.Pod{})
			w := &misplaced.Watcher{Client: m.GetClient(), Live: m.GetAPIReader(), Policy: current.Load, Recorder: m.GetEventRecorder("wincompat"),
				Log: o.Log.WithName("misplaced"), Metrics: sharedMisplacedMetrics(), Remediation: *o.Misplaced, Nodes: inv.Snapshot}
			if err := w.SetupWithManager(ctx, m); err != nil {
				return fmt.Errorf("misplaced-pods controller: %w", err)
			}
			synced = append(synced, w.HasSynced)
		}
		// Pods admitted behind the gate (either engine) wait for the leader whatever the mode is now.
		g := newGatedController(m, shared, current, o.gateTimeout(), o.Log.WithName("gated"))
		if err := g.SetupWithManager(ctx, m); err != nil {
			return fmt.Errorf("gated-pods controller: %w", err)
		}
		synced = append(synced, g.HasSynced)
		if err := m.Add(leaderSynced(m.GetCache(), watched, synced, sharedLeaderGauge())); err != nil {
			return err
		}
		if !o.ManageRuntimeClasses {
			return nil
		}
		rc := &runtimeclass.Reconciler{
			Client:    m.GetClient(),
			Policy:    current.Load,
			Recorder:  m.GetEventRecorder("wincompat"),
			Log:       o.Log.WithName("runtimeclasses"),
			Conflicts: sharedConflictGauge(),
			Trigger:   policyChanged,
		}
		if err := rc.SetupWithManager(m); err != nil {
			return fmt.Errorf("RuntimeClass controller: %w", err)
		}
		return nil
	}
	if o.LeaderElect {
		err = mgr.Add(&campaign{log: o.Log.WithName("leader"), setUp: leaderWork, newManager: func() (ctrl.Manager, error) {
			return ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                        scheme,
				Logger:                        o.Log,
				Metrics:                       metricsserver.Options{BindAddress: "0"}, // its metrics are served by mgr's
				HealthProbeBindAddress:        "0",
				LeaderElection:                true,
				LeaderElectionID:              "wincompat.io",
				LeaderElectionNamespace:       o.Namespace,
				LeaderElectionReleaseOnCancel: true,
				GracefulShutdownTimeout:       &o.ShutdownTimeout,
				Cache:                         cache.Options{ByObject: cacheOptions()},
				NewCache: func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
					own, err := cache.New(cfg, opts)
					if err != nil {
						return nil, err
					}
					return newSharedKinds(own, mgr.GetCache(), scheme), nil
				},
			})
		}})
	} else {
		err = leaderWork(mgr)
	}
	if err != nil {
		return err
	}
	if watcher != nil {
		watcher.current = current
		watcher.onChange = func() {
			// The catalog may have changed: reconcile RuntimeClasses (a pending signal is enough). The
			// admission policies' params are the chart's, current with helm upgrade.
			offer(policyChanged, event.GenericEvent{})
		}
		if err := mgr.Add(watcher); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", srv.StartedChecker()); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", cacheSynced(mgr.GetCache())); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("inventory", func(*http.Request) error {
		if !inv.HasSynced() {
			return inventory.ErrNotSynced
		}
		return nil
	}); err != nil {
		return err
	}
	o.Log.Info("starting", "version", o.Version, "port", o.Port, "tlsMinVersion", o.TLSMinVersion, "http2", o.EnableHTTP2)
	return mgr.Start(mgrCtx)
}

// reviewTimeout bounds the work of one review: the API server waits at most 30s for a webhook
// (timeoutSeconds), and nobody reads an answer after that.
const reviewTimeout = 30 * time.Second

// closingWhen asks the client to close the connection after this answer once draining is set: the
// answer still goes out, and the client opens its next connection to a replica that stays.
func closingWhen(draining *atomic.Bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// campaign runs the cluster-wide work under a leader Lease, in a manager of its own. controller-runtime
// ends a manager that loses its Lease (the API server unreachable past the renew deadline, say); ending
// the process with it would stop admission too, which needs no Lease and, served from the caches, not
// even the API server. So only this manager ends, and a new one campaigns again.
type campaign struct {
	log        logr.Logger
	newManager func() (ctrl.Manager, error)
	setUp      func(ctrl.Manager) error
}

// NeedLeaderElection is false: campaign elects by itself, every replica campaigns.
func (c *campaign) NeedLeaderElection() bool { return false }

func (c *campaign) Start(ctx context.Context) error {
	for {
		m, err := c.newManager()
		if err == nil {
			err = c.setUp(m)
		}
		if err == nil {
			err = m.Start(ctx)
		}
		if ctx.Err() != nil {
			return nil
		}
		c.log.Info("cluster-wide work stopped; campaigning for the leader Lease again", "reason", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// directClient reads from and writes to the API server without the manager's cache: the certificate
// Secret and the policy ConfigMap are read rarely, by name, and must be fresh. Its error stops the
// server: the manager's cached client would start an informer on the first read, which needs list and
// watch on every Secret or ConfigMap where wincompat's RBAC grants get on one name.
func directClient(mgr ctrl.Manager) (client.Client, error) {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("creating the client that reads the API server directly (policy ConfigMap, certificate Secret): %w", err)
	}
	return c, nil
}

// cacheOptions keep in memory only what wincompat reads.
func cacheOptions() map[client.Object]cache.ByObject {
	opts := inventory.CacheOptions()
	maps.Copy(opts, misplaced.CacheOptions())
	opts[&corev1.Namespace{}] = cache.ByObject{Transform: func(obj any) (any, error) {
		if ns, ok := obj.(*corev1.Namespace); ok {
			return keptNamespace(ns), nil
		}
		return obj, nil
	}}
	return opts
}

// keptNamespace is what admission and the watchers read of a namespace: its labels and the build it
// names. Annotations such as kubectl's last-applied configuration would otherwise sit in every replica.
func keptNamespace(ns *corev1.Namespace) *corev1.Namespace {
	kept := &corev1.Namespace{}
	kept.Name, kept.UID, kept.ResourceVersion, kept.Labels = ns.Name, ns.UID, ns.ResourceVersion, ns.Labels
	if v, ok := ns.Annotations[policy.AnnotationBuild]; ok {
		kept.Annotations = map[string]string{policy.AnnotationBuild: v}
	}
	return kept
}

// sharedObjects are the kinds every replica caches for admission, which the leader reads from the same
// cache (sharedKinds).
func sharedObjects() []client.Object {
	return []client.Object{&corev1.Namespace{}, &corev1.Node{}, &nodev1.RuntimeClass{}}
}

func newSharedKinds(own, shared cache.Cache, scheme *runtime.Scheme) *sharedKinds {
	s := &sharedKinds{Cache: own, shared: shared, scheme: scheme, kinds: map[schema.GroupKind]bool{}}
	for _, obj := range sharedObjects() {
		if gvk, err := apiutil.GVKForObject(obj, scheme); err == nil {
			s.kinds[gvk.GroupKind()] = true
		}
	}
	return s
}

// cacheSynced is ready once the caches have synced: before that every review would see an unlabelled
// namespace and leave Windows pods unchanged.
func cacheSynced(c cache.Cache) healthz.Checker {
	var synced atomic.Bool
	return func(req *http.Request) error {
		if synced.Load() {
			return nil
		}
		ctx, cancel := context.WithTimeout(req.Context(), 50*time.Millisecond)
		defer cancel()
		if c.WaitForCacheSync(ctx) {
			synced.Store(true)
			return nil
		}
		return errors.New("caches not synced yet")
	}
}
