// Command perf measures wincompat as it runs and writes results.json and latency.png to bin/lab/perf
// (see test/lab/README.md):
//
//   - reviews: `wincompat serve` (bin/wincompat, GOMAXPROCS=1) answering AdmissionReviews over HTTPS
//     keep-alive on 127.0.0.1, first as fast as it can (closed loop), then at a fixed fraction of that
//     maximum (open loop, latency from the scheduled send time);
//   - apiserver: pods created through a real kube-apiserver with wincompat's MutatingWebhookConfiguration
//     installed and with no webhook at all, in alternating phases of the same run;
//   - images: a second `wincompat serve` with image resolution on, answering reviews of pods whose images
//     it reads from a registry on loopback: cached, new, and on a registry slower than the deadline; and
//     a third in --image-resolver-mode=gate on that slow registry (-image-phases selects).
//
// Usage (from test/, after `make build k8s`; `make perf` does all of it):
//
//	go run ./lab/cmd/perf [-duration 10s] [-api-duration 5s] [-api-rounds 2] [-out DIR]
package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// namespace holds every pod of the run; it is opted in, as the namespaces wincompat serves are.
const namespace = "perf"

type config struct {
	root, wincompat, out, workDir string
	duration, warmup              time.Duration
	connections                   int
	loadFraction                  float64
	apiDuration                   time.Duration
	apiRate                       float64
	apiRounds, creators           int
	reviews, apiServer, images    bool
	enginesPart                   bool
	engineRounds                  int
	engineRate                    float64
	kyvernoBinary                 string
	kyvernoProcs                  int
	profileDir                    string
	imageMissRate                 float64
	imagePhaseSet                 map[string]bool
	serverFlags                   []string
}

func main() {
	var c config
	fl := flag.NewFlagSet("perf", flag.ExitOnError)
	fl.StringVar(&c.root, "root", "", "the wincompat checkout (default: found from the working directory)")
	fl.StringVar(&c.wincompat, "wincompat", "", "the wincompat binary (default ROOT/bin/wincompat, from `make build`)")
	fl.StringVar(&c.out, "out", "", "where to write results.json and latency.png (default ROOT/bin/lab/perf)")
	fl.StringVar(&c.workDir, "work", "", "keep wincompat's log and the kubeconfig here (default: a temporary directory, removed)")
	fl.DurationVar(&c.duration, "duration", 10*time.Second, "length of each measured review phase")
	fl.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured load before each phase (connections, caches, the heap)")
	fl.IntVar(&c.connections, "connections", 8, "keep-alive connections (one per worker) for the reviews")
	fl.Float64Var(&c.loadFraction, "load", 0.7, "the fixed rate as a fraction of the measured maximum")
	fl.DurationVar(&c.apiDuration, "api-duration", 5*time.Second, "length of each measured pod-creation phase")
	fl.Float64Var(&c.apiRate, "api-rate", 100, "pods per second of the fixed-rate creation phases (0: none), well below the maximum so that latencies are not queueing")
	fl.IntVar(&c.apiRounds, "api-rounds", 2, "rounds of with/without phases for each kind of pod; an even number balances the order (with first, then without first)")
	fl.BoolVar(&c.enginesPart, "engines", true, "run the engine comparison: the Windows chart pod created with no mutation, the floor engine (test/lab/perf/floor.yaml), wincompat's admission policies, its webhook, hybrid (and Kyverno with -kyverno), interleaved")
	fl.IntVar(&c.engineRounds, "engine-rounds", 3, "rounds of the engine comparison; each runs every engine, in an order rotated from round to round")
	fl.Float64Var(&c.engineRate, "engine-rate", 50, "pods per second of the engine comparison's fixed-rate phases")
	fl.IntVar(&c.kyvernoProcs, "kyverno-gomaxprocs", 0, "GOMAXPROCS for Kyverno; 0 leaves it unset, so Kyverno uses every core as it would in a pod without a CPU limit (wincompat serve always runs with GOMAXPROCS=1)")
	fl.StringVar(&c.profileDir, "apiserver-profiles", "", "write a CPU profile of kube-apiserver for each engine's full-speed phase into this directory (go tool pprof), taken during the measured window only")
	fl.StringVar(&c.kyvernoBinary, "kyverno", "", "Kyverno's admission controller binary (make perf-peers builds it into bin/peers/kyverno): adds Kyverno to the engine comparison, run out of cluster on 127.0.0.1")
	fl.IntVar(&c.creators, "creators", 8, "concurrent pod creators")
	fl.BoolVar(&c.reviews, "reviews", true, "run the review load against wincompat serve")
	fl.BoolVar(&c.apiServer, "apiserver", true, "run the pod creations through kube-apiserver")
	fl.BoolVar(&c.images, "images", true, "run the image-resolution reviews: a second wincompat serve reading images from a registry on loopback")
	fl.Float64Var(&c.imageMissRate, "image-miss-rate", 100, "reviews per second of the image-miss phase, each naming two images no review named before")
	c.imagePhaseSet = map[string]bool{}
	for _, p := range imagePhases {
		c.imagePhaseSet[p] = true
	}
	fl.Func("image-phases", "the image phases to run, comma-separated: "+strings.Join(imagePhases, ", ")+" (default all)", func(v string) error {
		c.imagePhaseSet = map[string]bool{}
		for _, p := range strings.Split(v, ",") {
			if !slices.Contains(imagePhases, p) {
				return fmt.Errorf("%q is none of %s", p, strings.Join(imagePhases, ", "))
			}
			c.imagePhaseSet[p] = true
		}
		return nil
	})
	fl.Func("server-flag", "a further flag for wincompat serve, e.g. --pprof-bind-address=127.0.0.1:6060 to profile it under load; repeatable", func(v string) error {
		c.serverFlags = append(c.serverFlags, v)
		return nil
	})
	_ = fl.Parse(os.Args[1:])
	if fl.NArg() > 0 || c.connections < 1 || c.creators < 1 || c.apiRounds < 1 || c.apiRate < 0 || c.imageMissRate <= 0 || c.loadFraction <= 0 || c.loadFraction > 1 ||
		c.engineRounds < 1 || c.engineRate <= 0 || (c.kyvernoBinary != "" && !c.enginesPart) {
		fl.Usage()
		os.Exit(2)
	}
	perf.Main("perf", func(ctx context.Context) error { return run(ctx, c) })
}

// env is what both parts of the run share.
type env struct {
	config
	cp      *controlplane.ControlPlane
	cs      kubernetes.Interface
	server  *perf.Server
	meter   *perf.Meter
	caPEM   []byte
	port    int
	results *perf.Results
	// warnings counts the API server's warnings to cs.
	warnings *perf.Warnings
	// failures are checks that show a phase did not measure what it claims to.
	failures []string
	// webhook installs and removes wincompat's MutatingWebhookConfiguration for the pod-creation parts.
	webhook *perf.WebhookSwitch
	// kyverno is the peer of the engine comparison, when -kyverno names it.
	kyverno *kyvernoPeer
}

func run(ctx context.Context, c config) (err error) {
	cleanup, err := perf.ResolvePaths(&c.root, &c.wincompat, &c.out, &c.workDir, "perf")
	if err != nil {
		return err
	}
	defer cleanup()
	e := &env{config: c, warnings: &perf.Warnings{}, results: &perf.Results{
		Date: time.Now().UTC().Format(time.RFC3339), Machine: perf.ThisMachine(), Kubernetes: k8sVersion(),
	}}

	fmt.Printf("control plane: kube-apiserver and etcd from %s\n", filepath.Join(c.root, "bin", "k8s"))
	e.cp, err = controlplane.Launch(controlplane.Options{WebhookPaths: []string{filepath.Join(c.root, "deploy", "webhook")}})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.cp.Stop()) }()
	cfg := rest.CopyConfig(e.cp.Config)
	cfg.QPS = -1 // no client-side rate limit: the creators run as fast as the API server answers
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.WarningHandler = e.warnings
	if e.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if err := e.setUpNamespace(ctx); err != nil {
		return err
	}
	if err := e.startServer(ctx); err != nil {
		return err
	}
	defer func() {
		if stopErr := e.server.Stop(10 * time.Second); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()

	prep, err := e.prepare(ctx)
	if err != nil {
		return err
	}
	e.results.Wincompat = prep.version
	// Read while envtest's installation stands: the pod-creation parts remove and reinstall it, and an
	// odd number of rounds leaves it removed.
	if e.webhook, err = perf.NewWebhookSwitch(ctx, e.cs, webhookConfigName, prep.typed.chart); err != nil {
		return err
	}
	if c.reviews {
		if e.results.Reviews, err = e.runReviews(ctx, prep); err != nil {
			return err
		}
	}
	if c.apiServer {
		if e.results.APIServer, err = e.runAPIServer(ctx, prep); err != nil {
			return err
		}
	}
	if c.enginesPart {
		if c.kyvernoBinary != "" {
			if e.kyverno, err = e.startKyverno(ctx); err != nil {
				return err
			}
			defer func() { err = errors.Join(err, e.kyverno.stop()) }()
		}
		if e.results.Engines, err = e.runEngines(ctx, prep); err != nil {
			return err
		}
	}
	if c.images {
		if e.results.Images, err = e.runImages(ctx); err != nil {
			return err
		}
	}
	// An interrupted run has partial figures: keep the last complete results instead.
	if err := ctx.Err(); err != nil {
		return err
	}
	e.results.Goals = goals(e.results)
	if err := e.write(); err != nil {
		return err
	}
	if len(e.failures) > 0 {
		return fmt.Errorf("%d checks failed: the figures above do not measure what they claim:\n  %s", len(e.failures), joinLines(e.failures))
	}
	return nil
}

func (e *env) setUpNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{policy.LabelEnabled: "true"}}}
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	// No controller-manager runs to create "default", and the ServiceAccount admission plugin rejects
	// pods naming a missing account; the chart pod names "web".
	for _, name := range []string{"default", "web"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		if _, err := e.cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// startServer runs `wincompat serve` where envtest pointed the webhook configuration, with the serving
// certificate envtest made for 127.0.0.1, GOMAXPROCS=1 for per-core figures, and no RuntimeClass
// management (nothing but admission should use the server's core). Image resolution is off: the pods
// of these parts name public images, and load goes nowhere but loopback (the image part has its own
// server and registry).
func (e *env) startServer(ctx context.Context) (err error) {
	e.port, e.caPEM = e.cp.Webhook.Port, e.cp.Webhook.CAData
	e.server, e.meter, err = e.launch(ctx, "wincompat", e.port, "--resolve-images=false")
	return err
}

// launch runs a `wincompat serve` answering on port, with flags added to the shared ones, waits until
// it is ready and returns it with a meter of it, the generator, kube-apiserver and etcd.
func (e *env) launch(ctx context.Context, name string, port int, flags ...string) (*perf.Server, *perf.Meter, error) {
	kubeconfigPath := filepath.Join(e.workDir, "wincompat.kubeconfig")
	if _, err := os.Stat(kubeconfigPath); err != nil {
		kubeconfig, err := e.cp.KubeConfig("wincompat", "system:masters")
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
			return nil, nil, err
		}
	}
	metricsPort, err := controlplane.FreePort()
	if err != nil {
		return nil, nil, err
	}
	probePort, err := controlplane.FreePort()
	if err != nil {
		return nil, nil, err
	}
	args := append([]string{"serve"}, flags...)
	args = append(args,
		"--cert-dir", e.cp.Webhook.CertDir, "--bind-address", "127.0.0.1", "--port", strconv.Itoa(port), "--kubeconfig", kubeconfigPath,
		"--manage-runtimeclasses=false", "--watch-misplaced=false", "--shutdown-delay", "0s", "--shutdown-timeout", "5s",
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(metricsPort),
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(probePort),
	)
	args = append(args, e.serverFlags...)
	fmt.Printf("%s: GOMAXPROCS=1 %s %s\n", name, e.wincompat, joinWords(args))
	server, err := perf.StartServer(e.wincompat, args, []string{"GOMAXPROCS=1"}, filepath.Join(e.workDir, name+".log"))
	if err != nil {
		return nil, nil, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := server.WaitReady(readyCtx, fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)); err != nil {
		return nil, nil, errors.Join(err, server.Stop(5*time.Second))
	}
	children, err := load.Children(os.Getpid())
	if err != nil {
		return nil, nil, errors.Join(err, server.Stop(5*time.Second))
	}
	meter := &perf.Meter{
		Pids:       map[string]int{"wincompat": server.Pid, "perf": os.Getpid()},
		MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if pid, ok := children[name]; ok {
			meter.Pids[name] = pid
		}
	}
	return server, meter, nil
}

// write saves results.json and latency.png and prints the summary.
func (e *env) write() error {
	if err := os.MkdirAll(e.out, 0o755); err != nil {
		return err
	}
	jsonPath := filepath.Join(e.out, "results.json")
	if err := perf.WriteJSON(jsonPath, e.results); err != nil {
		return err
	}
	pngPath := filepath.Join(e.out, "latency.png")
	if err := perf.WritePlot(e.results, pngPath); err != nil {
		return err
	}
	printSummary(os.Stdout, e.results)
	fmt.Printf("\nwrote %s and %s\n", jsonPath, pngPath)
	return nil
}

// k8sVersion is the Kubernetes version bin/k8s was built from, as its build info records it.
func k8sVersion() string {
	dir, err := controlplane.BinDir()
	if err != nil {
		return "unknown"
	}
	bi, err := buildinfo.ReadFile(filepath.Join(dir, "kube-apiserver"))
	if err != nil || bi.Main.Version == "" {
		return "unknown"
	}
	return bi.Main.Version
}
