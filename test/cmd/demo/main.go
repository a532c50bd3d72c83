// Command demo is `make demo`: wincompat end to end on a real control plane, in under a minute.
//
// It starts kube-apiserver, etcd and kube-scheduler from bin/k8s with fake Ready nodes (two Linux, one
// Windows Server 2019, one Windows Server 2022), tries the Helm chart against that API server with
// bin/helm (helm.go: dry runs, what the schema and the prerequisite check refuse and the engine chosen
// online and offline), runs bin/wincompat serve as a separate process with its own CA
// (--self-managed-tls) and image resolution on, installs deploy/webhook pointed at it by URL, deploys
// two example manifests and a chart from the corpus unmodified into an opted-in namespace,
// creates the pods the Deployment controller would create from the stored templates, waits until the
// scheduler binds them, and reports per pod what wincompat changed and where the pod landed. Then
// (readiness.go) it applies deploy/examples/readiness-deployment.yaml, modelled on bitnami/postgresql,
// whose pods the API server admits and a Windows node would not run: the readiness warnings returned at
// apply time, and the same findings recorded on a pod created from its template.
//
// Then "builds from the image itself" (imagebuilds.go): a registry on loopback in this process holds Windows
// images whose tags name no build, the cluster's 2022 node is replaced by a Windows Server 2025 node, and
// pods using those images show the builds wincompat reads from the registry: a 2022 image on the 2025
// node, a multi-platform image allowed on every build that runs it, a 2019 image on the 2019 node, a
// Linux-only sidecar warned about; and `wincompat mutate` on the first pod without and with
// --resolve-images. Then a pod whose registry answers past the admission budget, stored behind
// wincompat's scheduling gate and placed once the leader has read it (gated.go). Then MCR's images read
// from a mirror on loopback, air-gapped (mirrors.go), a private
// ECR image read with IRSA against fake STS and ECR endpoints (cloud.go), mixed clusters both ways
// (mixed.go), warn mode (warnmode.go), a pod failing on the wrong build reported and made again
// (misplaced.go), the policy guard (policy.go), hostile input (hostile.go) and admission while
// wincompat is down (down.go).
//
// By default each section prints a heading and a few lines (output.go); -v prints every detail. With
// -keep it then leaves the control plane, kube-scheduler and wincompat serve running, writes a
// kubeconfig and waits for Ctrl-C (keep.go). It stops everything it started, also on failure and on
// Ctrl-C.
//
//	cd test && go run ./cmd/demo [-v] [-keep [-kubeconfig FILE]] [-wincompat ../bin/wincompat] [-helm ../bin/helm] [-chart FILE]
package main

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
)

const (
	demoNamespace      = "demo"
	plainNamespace     = "no-wincompat" // not opted in: the "before" of the demo
	wincompatNamespace = "wincompat-system"
	webhookConfigName  = "0100-wincompat" // in deploy/webhook, and wincompat serve's --webhook-config-name default
	labelManagedBy     = "app.kubernetes.io/managed-by"
	build2019          = "10.0.17763"
	build2022          = "10.0.20348"
	build2025          = "10.0.26100"
)

// nodeSpec is a fake node: name, OS, Windows build.
type nodeSpec struct{ name, os, build string }

// The cluster of the first part; the second (imagebuilds.go) replaces win2022-0 by a 2025 node.
var nodes = []nodeSpec{
	{"linux-0", "linux", ""},
	{"linux-1", "linux", ""},
	{"win2019-0", "windows", build2019},
	{"win2022-0", "windows", build2022},
}

// The catalog RuntimeClasses wincompat must have created before the demo deploys anything.
var wantClasses = []string{"windows-2019", "windows-2022", "windows-2025"}

func main() {
	os.Exit(run())
}

func run() int {
	var d demo
	root, rootErr := controlplane.RepoRoot()
	fl := flag.NewFlagSet("demo", flag.ContinueOnError)
	fl.StringVar(&d.root, "root", root, "the wincompat repository (holds bin/ and deploy/)")
	fl.StringVar(&d.wincompatBin, "wincompat", "", "the wincompat binary (default ROOT/bin/wincompat, from `make build`)")
	fl.StringVar(&d.helmBin, "helm", "", "the helm binary (default ROOT/bin/helm, which `make demo` builds from the version test/go.mod pins)")
	fl.StringVar(&d.chart, "chart", "", "a Linux chart's rendering (Deployments) to declare Windows and deploy (default ROOT/../shared/corpus/charts/grafana.yaml)")
	fl.BoolVar(&d.verbose, "v", false, "print every detail: commands, warnings, each pod shape's changes and rules")
	fl.BoolVar(&d.keep, "keep", false, "after the story, keep the cluster and wincompat serve running to explore, until Ctrl-C")
	fl.StringVar(&d.kubeconfig, "kubeconfig", "", "with -keep, where to write the kubeconfig of the kept cluster (default ROOT/bin/demo/kubeconfig)")
	if err := fl.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if d.root == "" {
		fmt.Fprintf(os.Stderr, "demo: %v (pass -root)\n", rootErr)
		return 2
	}
	if d.wincompatBin == "" {
		d.wincompatBin = filepath.Join(d.root, "bin", "wincompat")
	}
	if d.helmBin == "" {
		d.helmBin = filepath.Join(d.root, "bin", "helm")
	}
	if d.chart == "" {
		d.chart = filepath.Join(d.root, "..", "shared", "corpus", "charts", "grafana.yaml")
	}
	if d.kubeconfig == "" {
		d.kubeconfig = filepath.Join(d.root, "bin", "demo", "kubeconfig")
	}
	for _, p := range []*string{&d.root, &d.wincompatBin, &d.helmBin, &d.chart, &d.kubeconfig} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	d.out = os.Stdout

	// Interrupts and termination cancel ctx; the signals stay caught until the end, so that a second
	// Ctrl-C cannot cut the cleanup short (etcd and the API server run in process groups of their own
	// and would be left behind).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	d.start = time.Now()
	err := d.run(ctx)
	if err != nil && ctx.Err() != nil {
		err = errors.New("interrupted")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
	}
	storyTime := time.Since(d.start)
	if !d.storyEnd.IsZero() {
		storyTime = d.storyEnd.Sub(d.start)
	}
	started := d.cp != nil || d.serve != nil || d.registry != nil
	t := time.Now()
	// Logs are kept when the demo failed, not when it was interrupted.
	if cerr := d.cleanup(err != nil && ctx.Err() == nil); cerr != nil {
		fmt.Fprintf(os.Stderr, "demo: cleaning up: %v\n", cerr)
		if err == nil {
			err = cerr
		}
	} else if started {
		d.section("Stopped wincompat, the registry, kube-scheduler, the controllers, kube-apiserver and etcd in %.1fs", time.Since(t).Seconds())
	}
	if err != nil {
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	fmt.Fprintf(d.out, "\ndone in %.1fs\n", storyTime.Seconds())
	return 0
}

type demo struct {
	root, wincompatBin, chart string
	helmBin                   string // the chart's first use (helm.go)
	out                       io.Writer
	verbose                   bool // -v: every detail (output.go)
	keep                      bool // -keep: leave the cluster running until Ctrl-C (keep.go)
	kubeconfig                string
	keptKubeconfig            string    // written by -keep; cleanup removes it
	start, storyEnd           time.Time // the story's time, not the time spent exploring with -keep

	work     string // logs and kubeconfig; removed on success, kept on failure
	cp       *controlplane.ControlPlane
	c        client.Client // admin, collecting warnings
	warnings *fixtures.Warnings
	serve    *process
	// How wincompat serve was started, to start it again (policy.go).
	serveArgs  []string
	readyz     string
	port       int    // the webhook port
	metrics    string // the /metrics URL
	policyFile string
	registry   *registrytest.Registry // the loopback registry of the second part

	nodes       map[string]nodeSpec // the nodes now in the cluster, by name
	pods        []podReport
	podsCreated time.Time
	// applyWarnings are the warnings printed (with -v) when a workload was applied, by "Kind name": its
	// pods' blocks do not print them again.
	applyWarnings map[string][]string
}

// rel names a path relative to the repository when it is inside or beside it.
func (d *demo) rel(path string) string {
	if r, err := filepath.Rel(d.root, path); err == nil && !strings.HasPrefix(r, "../../") {
		return r
	}
	return path
}

func (d *demo) run(ctx context.Context) error {
	if _, err := os.Stat(d.wincompatBin); err != nil {
		return fmt.Errorf("%w (run `make demo` in %s, which builds bin/wincompat first)", err, d.root)
	}
	if _, err := os.Stat(d.helmBin); err != nil {
		return fmt.Errorf("%w (run `make demo` in %s, which builds bin/helm first, or `make bin/helm`; or pass -helm FILE)", err, d.root)
	}
	if _, err := os.Stat(d.chart); err != nil {
		return fmt.Errorf("%w (the chart corpus lives beside the repository in ../shared/corpus/charts; or pass -chart FILE)", err)
	}
	var err error
	if d.work, err = os.MkdirTemp("", "wincompat-demo-"); err != nil {
		return err
	}

	d.section("A control plane: kube-apiserver, etcd, kube-scheduler and controllers %s from bin/k8s", k8sVersion())
	t := time.Now()
	// The service account controller, because the API server refuses every pod of a namespace without
	// its "default" ServiceAccount, and a cluster to explore (-keep) must take `kubectl run` as any
	// cluster does; the garbage collector, so that what helm uninstall leaves to it goes there too.
	if d.cp, err = controlplane.Launch(controlplane.Options{Scheduler: true, ServiceAccounts: true, GarbageCollector: true, WorkDir: d.work}); err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d.warnings = &fixtures.Warnings{}
	cfg := rest.CopyConfig(d.cp.Config)
	cfg.WarningHandler = d.warnings
	if d.c, err = client.New(cfg, client.Options{}); err != nil {
		return err
	}
	d.say("ready in %.1fs, API server at %s", time.Since(t).Seconds(), d.cp.Config.Host)
	if err := d.addNodes(ctx); err != nil {
		return err
	}

	if err := d.helmInstall(ctx); err != nil {
		return err
	}
	if err := d.startWincompat(ctx); err != nil {
		return err
	}
	if err := d.before(ctx); err != nil {
		return err
	}
	if err := d.deploy(ctx); err != nil {
		return err
	}
	if err := d.waitBound(ctx, d.pods, d.podsCreated); err != nil {
		return err
	}
	if err := d.report(); err != nil {
		return err
	}
	if err := d.readiness(ctx); err != nil {
		return err
	}
	if err := d.fromImages(ctx); err != nil {
		return err
	}
	if err := d.gatedPlacement(ctx); err != nil {
		return err
	}
	if err := d.mirrors(ctx); err != nil {
		return err
	}
	if err := d.cloudRegistry(ctx); err != nil {
		return err
	}
	if err := d.mixedClusters(ctx); err != nil {
		return err
	}
	if err := d.warnMode(ctx); err != nil {
		return err
	}
	if err := d.misplacedPods(ctx); err != nil {
		return err
	}
	if err := d.policyGuard(ctx); err != nil {
		return err
	}
	if err := d.hostile(ctx); err != nil {
		return err
	}
	if err := d.versions(ctx); err != nil {
		return err
	}
	if err := d.whileDown(ctx); err != nil {
		return err
	}
	d.storyEnd = time.Now()
	if d.keep {
		return d.keepRunning(ctx)
	}
	return nil
}

// addNodes creates the fake nodes: Ready, labelled as the kubelet labels them, Windows ones tainted
// os=windows:NoSchedule, and without the not-ready taint the node lifecycle controller would lift (that
// controller does not run here; no kubelet either, so nothing ever starts on them).
func (d *demo) addNodes(ctx context.Context) error {
	d.detail("nodes (all Ready, no kubelet):")
	var linux, windows []string
	for _, n := range nodes {
		if err := d.addNode(ctx, n); err != nil {
			return err
		}
		if n.os == "windows" {
			windows = append(windows, n.name+" ("+n.build+")")
		} else {
			linux = append(linux, n.name)
		}
	}
	d.brief("nodes, Ready with no kubelet: Linux %s; Windows %s, tainted os=windows:NoSchedule",
		strings.Join(linux, ", "), strings.Join(windows, ", "))
	return nil
}

// addNode creates one fake node and prints it.
func (d *demo) addNode(ctx context.Context, n nodeSpec) error {
	what := "Linux"
	if n.os == "windows" {
		what = "Windows " + n.build + ", tainted os=windows:NoSchedule"
	}
	if err := fixtures.AddNode(ctx, d.c, fixtures.Node{Name: n.name, OS: n.os, Build: n.build}, 110); err != nil {
		return err
	}
	if d.nodes == nil {
		d.nodes = map[string]nodeSpec{}
	}
	d.nodes[n.name] = n
	d.detail("  %-10s %s", n.name, what)
	d.warnings.Take()
	return nil
}

// startWincompat installs the webhook configuration pointed at a local port and runs `wincompat serve`
// there as a separate process with its own CA, then waits until wincompat has put the CA into the
// configuration, created the catalog's RuntimeClasses and reports ready.
func (d *demo) startWincompat(ctx context.Context) error {
	port, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	probePort, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	metricsPort, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	d.port, d.metrics = port, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	d.section("wincompat serve: %s serve --self-managed-tls on https://127.0.0.1:%d", d.rel(d.wincompatBin), port)
	t := time.Now()
	if err := d.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wincompatNamespace}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", wincompatNamespace, err)
	}
	manifest := filepath.Join(d.root, "deploy", "webhook", "mutatingwebhookconfiguration.yaml")
	n, err := d.installWebhookConfig(ctx, manifest, port)
	if err != nil {
		return err
	}
	d.detail("installed %s: %d webhooks, clientConfig url https://127.0.0.1:%d/..., no caBundle", d.rel(manifest), n, port)
	// The policy as the chart keeps it: a ConfigMap mounted as a file, and the one wincompat keeps the
	// last good policy in; created before the check that only a running wincompat can answer, in the
	// order Helm installs them.
	if err := d.createPolicyConfigMaps(ctx); err != nil {
		return err
	}
	check := filepath.Join(d.root, "deploy", "webhook", "validatingwebhookconfiguration.yaml")
	if err := d.installPolicyCheck(ctx, check, port); err != nil {
		return err
	}
	d.detail("installed %s: the policy check of ConfigMap %s/%s", d.rel(check), wincompatNamespace, policyConfigMap)
	n, err = d.installAdmissionPolicies(ctx)
	if err != nil {
		return err
	}
	d.detail("installed %d MutatingAdmissionPolicies, their bindings and their params ConfigMap %s/%s, as the chart installs them for engine hybrid (`wincompat policy export`; wincompat writes none)",
		n, wincompatNamespace, admissionpolicy.DefaultParamsName)

	// system:masters keeps the demo short; the Helm chart gives wincompat least-privilege RBAC instead.
	kubeconfigPath := filepath.Join(d.work, "wincompat.kubeconfig")
	if err := d.cp.WriteKubeConfig(kubeconfigPath, "wincompat", "system:masters"); err != nil {
		return err
	}
	args := []string{"serve",
		"--self-managed-tls", "--namespace", wincompatNamespace, "--tls-san", "127.0.0.1",
		"--kubeconfig", kubeconfigPath, "--port", strconv.Itoa(port),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(metricsPort), "--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(probePort),
		"--read-timeout", "2s", // the demo's slow peer is cut off sooner than by the default 10s
		"--leader-elect", "--shutdown-delay", "0s", "--shutdown-timeout", "5s",
		"--resolve-images", // the default, spelled out: Windows pods' images are read from their registries
		// The demo's registry is on loopback; a cluster's wincompat never reaches loopback or private
		// addresses unless its operator allows it like this.
		"--image-allow-private-networks",
		"--engine=hybrid", // the chart's choice on Kubernetes 1.36 and later: the static part also as admission policies
		// Off by default (chart value misplacedPods.remediate.enabled): misplaced.go shows it.
		"--remediate-misplaced",
		"--policy", d.policyFile, "--policy-configmap", policyConfigMap,
	}
	d.serveArgs = args
	if d.serve, err = startProcess(d.wincompatBin, args, filepath.Join(d.work, "wincompat.log")); err != nil {
		return err
	}
	d.detail("%s %s", d.rel(d.wincompatBin), strings.Join(args, " "))
	d.detail("pid %d, log %s", d.serve.cmd.Process.Pid, d.serve.logPath)

	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	d.readyz = readyz
	var injected bool
	var classes []string
	var lastReadyz string
	err = d.poll(ctx, 45*time.Second, func() (bool, error) {
		var wc admissionregistrationv1.MutatingWebhookConfiguration
		if err := d.c.Get(ctx, client.ObjectKey{Name: webhookConfigName}, &wc); err != nil {
			return false, err
		}
		var vc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := d.c.Get(ctx, client.ObjectKey{Name: webhookConfigName}, &vc); err != nil {
			return false, err
		}
		injected = len(wc.Webhooks) > 0 && !slices.ContainsFunc(wc.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool {
			return len(w.ClientConfig.CABundle) == 0
		}) && len(vc.Webhooks) == 1 && len(vc.Webhooks[0].ClientConfig.CABundle) > 0
		var rcs nodev1.RuntimeClassList
		if err := d.c.List(ctx, &rcs, client.MatchingLabels{labelManagedBy: "wincompat"}); err != nil {
			return false, err
		}
		classes = classes[:0]
		for _, rc := range rcs.Items {
			classes = append(classes, rc.Name)
		}
		slices.Sort(classes)
		lastReadyz = httpStatus(readyz)
		haveClasses := !slices.ContainsFunc(wantClasses, func(n string) bool { return !slices.Contains(classes, n) })
		return injected && haveClasses && lastReadyz == "200 OK", nil
	})
	if err != nil {
		return fmt.Errorf("wincompat not ready (caBundle injected: %v; RuntimeClasses: %v; /readyz: %s): %w", injected, classes, lastReadyz, err)
	}
	d.detail("wincompat created its CA, put it into the caBundle of all %d webhooks and the policy check, and the RuntimeClasses %s", n, strings.Join(classes, ", "))
	d.detail("/readyz 200 after %.1fs", time.Since(t).Seconds())
	d.brief("ready in %.1fs (--engine=hybrid, --resolve-images): its own CA in the caBundle of the %d webhooks and the policy check",
		time.Since(t).Seconds(), n)
	d.brief("of deploy/webhook (pointed at it by URL); it created the RuntimeClasses %s", strings.Join(classes, ", "))
	d.warnings.Take()
	return nil
}

// installWebhookConfig creates wincompat's MutatingWebhookConfiguration from manifest with every
// webhook's clientConfig changed from the Service to https://127.0.0.1:port<path>, and no caBundle:
// wincompat injects it. It returns the number of webhooks.
func (d *demo) installWebhookConfig(ctx context.Context, manifest string, port int) (int, error) {
	raw, err := os.ReadFile(manifest)
	if err != nil {
		return 0, err
	}
	var wc admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(raw, &wc); err != nil {
		return 0, fmt.Errorf("%s: %w", manifest, err)
	}
	if wc.Name != webhookConfigName {
		return 0, fmt.Errorf("%s: named %q, wincompat serve keeps the caBundle of %q", manifest, wc.Name, webhookConfigName)
	}
	for i := range wc.Webhooks {
		if err := toLoopback(&wc.Webhooks[i].ClientConfig, port); err != nil {
			return 0, fmt.Errorf("%s: webhook %s: %w", manifest, wc.Webhooks[i].Name, err)
		}
	}
	if err := d.c.Create(ctx, &wc); err != nil {
		return 0, fmt.Errorf("creating MutatingWebhookConfiguration %s: %w", wc.Name, err)
	}
	return len(wc.Webhooks), nil
}

// toLoopback points a webhook's clientConfig from its Service to https://127.0.0.1:port<path>, where the
// demo's wincompat serve listens, with no caBundle: wincompat injects it.
func toLoopback(cc *admissionregistrationv1.WebhookClientConfig, port int) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return fmt.Errorf("no service path")
	}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
	*cc = admissionregistrationv1.WebhookClientConfig{URL: &url}
	return nil
}

// before shows what happens without wincompat: the same Deployment in a namespace that is not opted
// in is rejected by the API server.
func (d *demo) before(ctx context.Context) error {
	path := filepath.Join(d.root, "deploy", "examples", "win-webserver.yaml")
	objs, err := fixtures.ReadDocuments(path)
	if err != nil {
		return err
	}
	d.section("Before: %s in namespace %s (not labelled wincompat.io/enabled)", d.rel(path), plainNamespace)
	if err := d.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plainNamespace}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", plainNamespace, err)
	}
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" {
			continue
		}
		obj.SetNamespace(plainNamespace)
		err := d.c.Create(ctx, obj)
		d.warnings.Take()
		if err == nil {
			return fmt.Errorf("the API server accepted Deployment %s with Linux-only fields on a Windows pod template: it is not the oracle this demo relies on", obj.GetName())
		}
		const forbidden = "cannot be set for a windows pod"
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), forbidden) {
			return fmt.Errorf("Deployment %s rejected for another reason than the Windows field check: %w", obj.GetName(), err)
		}
		var causes []string
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Details != nil {
			for _, c := range status.Status().Details.Causes {
				if strings.Contains(c.Message, forbidden) {
					causes = append(causes, c.Field)
				}
			}
		}
		more := ""
		if len(causes) > 1 {
			more = fmt.Sprintf(" (and %s)", plural(len(causes)-1, "more field"))
		}
		d.say("rejected by the API server: Deployment %s is invalid: %s: Forbidden: %s%s",
			obj.GetName(), first(causes), forbidden, more)
	}
	return nil
}

// An object to create, from which file.
type manifestObject struct {
	file string
	obj  *unstructured.Unstructured
}

// templatePaths says where the workload kinds the demo turns into pods hold their pod template.
var templatePaths = map[string][]string{
	"Deployment":            {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"ReplicationController": {"spec", "template"},
}

// deploy creates the demo namespace, then the two examples and the chart unmodified (the chart's
// workloads declared Windows), then the pods their controllers would create from the stored templates.
func (d *demo) deploy(ctx context.Context) error {
	examples := []string{
		filepath.Join(d.root, "deploy", "examples", "win-webserver.yaml"),
		filepath.Join(d.root, "deploy", "examples", "iis-2019.yaml"),
	}
	var objs []manifestObject
	for _, path := range append(slices.Clone(examples), d.chart) {
		docs, err := fixtures.ReadDocuments(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, obj := range docs {
			if path == d.chart {
				// The corpus keeps only a chart's workloads.
				tpl, ok := templatePaths[obj.GetKind()]
				if !ok {
					return fmt.Errorf("%s: %s %s: the demo deploys charts of Deployments, ReplicaSets and ReplicationControllers", path, obj.GetKind(), obj.GetName())
				}
				// The chart declared Windows, as its values would for a Windows build of the app.
				if err := unstructured.SetNestedField(obj.Object, "windows", append(slices.Clone(tpl), "spec", "os", "name")...); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			obj.SetNamespace(demoNamespace)
			objs = append(objs, manifestObject{file: path, obj: obj})
		}
	}

	d.section("With wincompat: %s, %s and %s (a Linux chart, declared Windows) in namespace %s",
		d.rel(examples[0]), filepath.Base(examples[1]), d.rel(d.chart), demoNamespace)
	d.step("namespace %s, labelled %s=true and %s=windows", demoNamespace, policy.LabelEnabled, policy.LabelDefaultOS)
	if err := d.setUpNamespace(ctx, objs); err != nil {
		return err
	}

	d.step("applying %s, %s and %s (chart declared Windows: spec.os.name=windows), unmodified",
		d.rel(examples[0]), d.rel(examples[1]), d.rel(d.chart))
	var workloads []*unstructured.Unstructured
	fromChart := map[*unstructured.Unstructured]bool{}
	applied := 0
	d.applyWarnings = map[string][]string{}
	for _, m := range objs {
		if err := d.c.Create(ctx, m.obj); err != nil {
			return fmt.Errorf("%s: creating %s %s: %w", d.rel(m.file), m.obj.GetKind(), m.obj.GetName(), err)
		}
		warns := d.warnings.Take()
		applied += len(warns)
		d.applyWarnings[m.obj.GetKind()+" "+m.obj.GetName()] = warns
		line := fmt.Sprintf("created %s %s", m.obj.GetKind(), m.obj.GetName())
		if _, ok := templatePaths[m.obj.GetKind()]; ok {
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(m.obj.GroupVersionKind())
			if err := d.c.Get(ctx, client.ObjectKeyFromObject(m.obj), stored); err != nil {
				return err
			}
			workloads = append(workloads, stored)
			fromChart[stored] = m.file == d.chart
			line += fmt.Sprintf(": wincompat changed %s of its pod template", plural(len(templateChanges(stored)), "field"))
		}
		if len(warns) > 0 {
			line += fmt.Sprintf("; the API server returned %s:", plural(len(warns), "warning"))
		}
		d.detail("%s", line)
		for _, w := range warns {
			d.detail("  Warning: %s", w)
		}
	}

	d.brief("namespace labelled %s=true and %s=windows; applied unmodified (%s); then the pods",
		policy.LabelEnabled, policy.LabelDefaultOS, plural(applied, "warning"))
	d.brief("the Deployment controller would create from the stored templates, bound by kube-scheduler:")
	d.step("creating the pods the Deployment controller would create from the stored templates")
	d.podsCreated = time.Now()
	for _, w := range workloads {
		if err := d.createPods(ctx, w, fromChart[w]); err != nil {
			return err
		}
	}
	return nil
}

// setUpNamespace creates the opted-in namespace with what a chart would bring: the ServiceAccounts the
// pods name and the PriorityClasses they name; "default" is the service account controller's. It returns
// once wincompat mutates Windows pods there (it reads namespaces from its cache).
func (d *demo) setUpNamespace(ctx context.Context, objs []manifestObject) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace, Labels: map[string]string{
		policy.LabelEnabled: "true", policy.LabelDefaultOS: "windows",
	}}}
	if err := d.c.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating namespace %s: %w", demoNamespace, err)
	}
	var accounts, priorities []string
	for _, m := range objs {
		tpl, ok := templatePaths[m.obj.GetKind()]
		if !ok {
			continue
		}
		spec, _, _ := unstructured.NestedMap(m.obj.Object, append(slices.Clone(tpl), "spec")...)
		for _, key := range []string{"serviceAccountName", "serviceAccount"} {
			if name, _ := spec[key].(string); name != "" && name != "default" && !slices.Contains(accounts, name) {
				accounts = append(accounts, name)
			}
		}
		if name, _ := spec["priorityClassName"].(string); name != "" && !slices.Contains(priorities, name) {
			priorities = append(priorities, name)
		}
	}
	for _, name := range accounts {
		if err := d.c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: demoNamespace}}); err != nil {
			return fmt.Errorf("creating ServiceAccount %s: %w", name, err)
		}
	}
	for _, name := range priorities {
		err := d.c.Get(ctx, client.ObjectKey{Name: name}, &schedulingv1.PriorityClass{})
		if apierrors.IsNotFound(err) {
			err = d.c.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000})
		}
		if err != nil {
			return fmt.Errorf("PriorityClass %s: %w", name, err)
		}
	}
	if err := d.waitForDefaultServiceAccount(ctx, demoNamespace); err != nil {
		return err
	}
	if len(accounts) > 0 {
		d.detail("ServiceAccounts %s, which the chart would bring; default by the service account controller", strings.Join(accounts, ", "))
	}

	// A dry-run Windows pod comes back mutated, with the RuntimeClass of its image's build, once wincompat
	// has this namespace and the RuntimeClasses in its caches.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: demoNamespace},
		Spec: corev1.PodSpec{
			OS:         &corev1.PodOS{Name: corev1.Windows},
			Containers: []corev1.Container{{Name: "probe", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}},
		},
	}
	var last error
	err := d.poll(ctx, 30*time.Second, func() (bool, error) {
		p := probe.DeepCopy()
		last = d.c.Create(ctx, p, client.DryRunAll)
		return last == nil && p.Annotations[policy.AnnotationVersion] != "" && p.Spec.RuntimeClassName != nil && *p.Spec.RuntimeClassName == "windows-2022", nil
	})
	d.warnings.Take()
	if err != nil {
		return fmt.Errorf("wincompat does not mutate Windows pods in namespace %s (last dry run: %v): %w", demoNamespace, last, err)
	}
	d.detail("wincompat mutates Windows pods here (checked with a dry-run pod)")
	return nil
}

// createPods creates the pods the workload's controller would create from its stored template, owned as
// a real cluster owns them (a Deployment's through the ReplicaSet its controller makes, created here too),
// so that what reads the cluster afterwards, such as wincompat audit, finds each pod through its
// controller; linuxChart says the workload is of the Linux chart the demo declared Windows.
func (d *demo) createPods(ctx context.Context, w *unstructured.Unstructured, linuxChart bool) error {
	owner, err := d.podOwner(ctx, w)
	if err != nil {
		return err
	}
	replicas, found, err := unstructured.NestedInt64(w.Object, "spec", "replicas")
	if err != nil || !found {
		replicas = 1
	}
	for range replicas {
		pod, err := podFromTemplate(owner)
		if err != nil {
			return err
		}
		if err := d.c.Create(ctx, pod); err != nil {
			d.warnings.Take()
			return fmt.Errorf("creating a pod of %s %s: %w", w.GetKind(), w.GetName(), err)
		}
		d.pods = append(d.pods, podReport{namespace: w.GetNamespace(), name: pod.GetName(), owner: w.GetKind() + " " + w.GetName(), warnings: d.warnings.Take(), linuxChart: linuxChart})
		d.detail("created pod %s (%s %s)", pod.GetName(), owner.GetKind(), owner.GetName())
	}
	return nil
}

// podOwner returns what owns the pods of stored workload w: for a Deployment, the ReplicaSet its
// controller would make, created here; w itself otherwise.
func (d *demo) podOwner(ctx context.Context, w *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if w.GetKind() != "Deployment" {
		return w, nil
	}
	rs, err := replicaSetOf(w)
	if err != nil {
		return nil, err
	}
	if err := d.c.Create(ctx, rs); err != nil {
		d.warnings.Take()
		return nil, fmt.Errorf("creating the ReplicaSet of Deployment %s: %w", w.GetName(), err)
	}
	// Its template is the Deployment's, already rewritten: whatever admission says of it again was
	// said when the Deployment was applied.
	d.warnings.Take()
	d.detail("created ReplicaSet %s (Deployment %s)", rs.GetName(), w.GetName())
	return rs, nil
}

// replicaSetOf is the ReplicaSet the Deployment controller makes for a stored Deployment: named after it
// and the pod-template-hash, which its selector, labels and template's labels add, with the Deployment
// as its controller.
func replicaSetOf(dep *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	tpl, found, err := unstructured.NestedMap(dep.Object, "spec", "template")
	if err != nil || !found {
		return nil, fmt.Errorf("Deployment %s: no pod template (%v)", dep.GetName(), err)
	}
	// The pod-template-hash the Deployment controller gives the ReplicaSet and its pods.
	tplJSON, err := json.Marshal(tpl)
	if err != nil {
		return nil, err
	}
	h := fnv.New32a()
	h.Write(tplJSON)
	hash := rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))

	labels, _, _ := unstructured.NestedStringMap(tpl, "metadata", "labels")
	if labels == nil {
		labels = map[string]string{}
	}
	labels["pod-template-hash"] = hash
	if err := unstructured.SetNestedStringMap(tpl, labels, "metadata", "labels"); err != nil {
		return nil, err
	}
	selector, _, _ := unstructured.NestedMap(dep.Object, "spec", "selector")
	if selector == nil {
		selector = map[string]any{}
	}
	matchLabels, _, _ := unstructured.NestedStringMap(selector, "matchLabels")
	if matchLabels == nil {
		matchLabels = map[string]string{}
	}
	matchLabels["pod-template-hash"] = hash
	if err := unstructured.SetNestedStringMap(selector, matchLabels, "matchLabels"); err != nil {
		return nil, err
	}
	spec := map[string]any{"selector": selector, "template": tpl}
	if replicas, found, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); found {
		spec["replicas"] = replicas
	}
	rs := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	rs.SetAPIVersion("apps/v1")
	rs.SetKind("ReplicaSet")
	rs.SetNamespace(dep.GetNamespace())
	rs.SetName(dep.GetName() + "-" + hash)
	rs.SetLabels(labels)
	rs.SetOwnerReferences([]metav1.OwnerReference{controllerRef(dep)})
	return rs, nil
}

// controllerRef is the owner reference a controller sets on what it makes (metav1.NewControllerRef).
func controllerRef(owner *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// podFromTemplate is a pod as the workload's controller would create it from its stored template: its
// labels and annotations, a generated name, the workload as its controller. A Deployment's pod is its
// ReplicaSet's (replicaSetOf).
func podFromTemplate(w *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if w.GetKind() == "Deployment" {
		rs, err := replicaSetOf(w)
		if err != nil {
			return nil, err
		}
		w = rs
	}
	tplPath := templatePaths[w.GetKind()]
	tpl, found, err := unstructured.NestedMap(w.Object, tplPath...)
	if err != nil || !found {
		return nil, fmt.Errorf("%s %s: no pod template (%v)", w.GetKind(), w.GetName(), err)
	}
	spec, _, _ := unstructured.NestedMap(tpl, "spec")
	labels, _, _ := unstructured.NestedStringMap(tpl, "metadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(tpl, "metadata", "annotations")
	pod := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	pod.SetAPIVersion("v1")
	pod.SetKind("Pod")
	pod.SetNamespace(w.GetNamespace())
	pod.SetGenerateName(w.GetName() + "-")
	pod.SetLabels(labels)
	pod.SetAnnotations(annotations)
	pod.SetOwnerReferences([]metav1.OwnerReference{controllerRef(w)})
	return pod, nil
}

// waitBound waits until kube-scheduler has bound every pod of pods (created from since on), and reads
// them back into pods.
func (d *demo) waitBound(ctx context.Context, pods []podReport, since time.Time) error {
	var pending []string
	err := d.poll(ctx, 30*time.Second, func() (bool, error) {
		pending = pending[:0]
		for i := range pods {
			p := &pods[i]
			if err := d.c.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: p.name}, &p.pod); err != nil {
				return false, err
			}
			if p.pod.Spec.NodeName == "" {
				pending = append(pending, p.name+" ("+unschedulable(&p.pod)+")")
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("pods not bound by kube-scheduler: %s: %w", strings.Join(pending, "; "), err)
	}
	d.detail("kube-scheduler bound all %d pods within %.1fs of the first one's creation", len(pods), time.Since(since).Seconds())
	return nil
}

func unschedulable(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Message != "" {
			return c.Message
		}
	}
	return "not scheduled yet"
}

type podReport struct {
	namespace, name, owner string
	warnings               []string
	pod                    corev1.Pod
	// linuxChart: a pod of the chart, Linux software the demo declared Windows. Its images have no
	// Windows build, whatever a registry out of reach could have said.
	linuxChart bool
}

// report prints, per pod shape (identical replicas are one), what wincompat changed, the build and
// RuntimeClass, the nodes; then how many pods run where they should, the pods of Linux images apart. It
// fails when a pod landed where it could not run.
func (d *demo) report() error {
	d.step("what wincompat did, per pod shape")
	var wrong []string
	for _, g := range groupPods(d.pods) {
		if d.verbose {
			d.printGroup(g, "from "+g.reports[0].owner, nil)
		} else {
			d.say("%s", g.outcome(d.nodes))
			d.say("  %s", g.changes())
		}
		wrong = append(wrong, g.misplaced(d.nodes)...)
	}
	if len(wrong) > 0 {
		return fmt.Errorf("misplaced pods: %s", strings.Join(wrong, "; "))
	}
	if d.verbose {
		fmt.Fprintln(d.out)
	}
	d.say("%s", tally(d.pods, d.nodes))
	return nil
}

// misplaced is what is wrong with the group's pods: not seen by wincompat, or bound to a node that is not
// Windows or not of one of the builds wincompat chose.
func (g *podGroup) misplaced(nodes map[string]nodeSpec) []string {
	var wrong []string
	for _, r := range g.reports {
		if r.pod.Annotations[policy.AnnotationVersion] == "" {
			wrong = append(wrong, r.name+" was not seen by wincompat")
		}
		if !onItsBuild(&r.pod, nodes) {
			node := r.pod.Spec.NodeName
			wrong = append(wrong, fmt.Sprintf("%s (build %q) was bound to %s (%s)", r.name, r.pod.Annotations[policy.AnnotationBuild], node, nodeOS(nodes[node])))
		}
	}
	return wrong
}

// printGroup prints one pod shape in full (-v): its pods, nodes, build and its source, RuntimeClass, the
// rows extra adds, the pod's changes, and the warnings no line above has said: not those printed when
// its workload was applied (the template's changes), nor those that only restate a change of the pod.
func (d *demo) printGroup(g *podGroup, about string, extra func(row func(key, format string, args ...any))) {
	r := g.reports[0]
	p := &r.pod
	a := p.Annotations
	fmt.Fprintf(d.out, "\n  %s  (%s)\n", strings.Join(g.names(), ", "), about)
	row := func(key, format string, args ...any) {
		fmt.Fprintf(d.out, "    %-13s "+format+"\n", append([]any{key}, args...)...)
	}
	var on []string
	for _, n := range g.nodes {
		on = append(on, n+" ("+nodeOS(d.nodes[n])+")")
	}
	row("node", "%s", strings.Join(on, ", "))
	if build := a[policy.AnnotationBuild]; build != "" {
		row("build", "%s, from %s", strings.ReplaceAll(build, ",", " or "), buildSource(a[policy.AnnotationBuildSource]))
	} else {
		row("build", "none chosen (see the warnings): any Windows node will do")
	}
	rc := runtimeClass(p)
	if rc == "" {
		rc = "none"
	}
	row("RuntimeClass", "%s", rc)
	if linux := r.linuxImages(); len(linux) > 0 {
		what := "no Windows node runs "
		if r.linuxChart {
			what = "a Linux chart, declared Windows by the demo: no Windows node runs "
		}
		row("Linux images", "%s%s", what, strings.Join(linux, ", "))
	}
	if extra != nil {
		extra(row)
	}
	lines := func(key, annotation, unchanged string) {
		changes, err := policy.DecodeChanges(a[annotation])
		if err != nil {
			row(key, "unreadable %s: %v", annotation, err)
			return
		}
		sum := summarise(changes)
		if len(sum) == 0 {
			row(key, "%s", unchanged)
		}
		for i, s := range sum {
			if i > 0 {
				key = ""
			}
			row(key, "%s", s)
		}
	}
	applied, wasApplied := d.applyWarnings[r.owner]
	if r.owner != "" && !wasApplied {
		lines("template", policy.AnnotationTemplateChanges, "nothing to change")
	}
	podUnchanged := "nothing to change"
	if rc != "none" {
		podUnchanged += " (RuntimeClass " + rc + " brings the Windows nodeSelector and toleration)"
	}
	lines("pod", policy.AnnotationChanges, podUnchanged)
	key := "warnings"
	for _, w := range r.warnings {
		if slices.Contains(applied, w) || restatesChange(w) {
			continue
		}
		row(key, "%s", w)
		key = ""
	}
	if key != "" {
		row(key, "none beyond the changes above")
	}
}

// restatesChange reports a warning that only says in words a change the pod's row lists (set, changed,
// removed), as opposed to a finding about the pod.
func restatesChange(w string) bool {
	for _, verb := range []string{"set ", "changed ", "removed "} {
		if strings.HasPrefix(w, "wincompat: "+verb) {
			return true
		}
	}
	return false
}

func buildSource(s string) string {
	switch s {
	case policy.SourceAnnotation:
		return "the pod's " + policy.AnnotationBuild + " annotation"
	case policy.SourceImageManifest:
		return "the image's manifest in its registry (" + policy.SourceImageManifest + ")"
	case policy.SourceImage:
		return "the image tag"
	case policy.SourceNamespace:
		return "the namespace's " + policy.AnnotationBuild + " annotation"
	case policy.SourceCluster:
		return "the cluster (its only Windows build)"
	case policy.SourceDefault:
		return "the policy default"
	case policy.SourceNodeSelector:
		return "the pod's nodeSelector"
	case policy.SourceRuntimeClass:
		return "the pod's RuntimeClass"
	case policy.SourceAffinity:
		return "the pod's own required node affinity (" + policy.SourceAffinity + ")"
	}
	return "source " + strconv.Quote(s)
}

// cleanup stops everything run started, last started first, and removes the work directory unless the
// demo failed (then it keeps the logs and says where).
func (d *demo) cleanup(failed bool) error {
	var errs []error
	if d.serve != nil {
		if err := d.serve.stop(15 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("wincompat serve: %w", err))
		}
	}
	if d.registry != nil {
		d.registry.Close()
	}
	if d.cp != nil {
		errs = append(errs, d.cp.Stop())
	}
	if d.keptKubeconfig != "" {
		// Its credentials and address die with the control plane.
		errs = append(errs, os.Remove(d.keptKubeconfig))
		_ = os.Remove(filepath.Dir(d.keptKubeconfig)) // when empty
	}
	if d.work != "" {
		if failed || errors.Join(errs...) != nil {
			fmt.Fprintf(os.Stderr, "demo: logs kept in %s\n", d.work)
		} else {
			errs = append(errs, os.RemoveAll(d.work))
		}
	}
	return errors.Join(errs...)
}

// poll calls cond every 100 ms until it is true, it fails, wincompat exits, ctx ends or timeout passes.
func (d *demo) poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		if d.serve != nil {
			if err := d.serve.exitedEarly(); err != nil {
				return err
			}
		}
		ok, err := cond()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// process is a child process in a process group of its own, killed with the demo should it die.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error
	stopped bool
	// reported: exitedEarly has returned the exit as an error once; stop does not repeat it.
	reported bool
}

func startProcess(bin string, args []string, logPath string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	p := &process{name: filepath.Base(bin), cmd: exec.Command(bin, args...), logPath: logPath, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	// Its own process group: a Ctrl-C reaches only the demo, which stops wincompat before the API server
	// it talks to. Pdeathsig: should the demo itself be killed, so is wincompat.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// exitedEarly reports a process that exited before it was stopped, with the end of its log.
func (p *process) exitedEarly() error {
	select {
	case <-p.exited:
		p.reported = true
		return fmt.Errorf("%s exited: %v; the end of its log (%s):\n%s", p.name, p.err, p.logPath, controlplane.TailLines(p.logPath, 30))
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group and waits, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) error {
	if p.stopped {
		return nil
	}
	p.stopped = true
	select {
	case <-p.exited: // already reported, or reported now
		if p.reported {
			return nil
		}
		return p.exitedEarly()
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("did not stop within %s of SIGTERM; killed", grace)
	}
}

// httpStatus GETs url and returns the status, or the error.
func httpStatus(url string) string {
	hc := &http.Client{Timeout: time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	return resp.Status
}

// k8sVersion is the Kubernetes version bin/k8s was built from, as its build info records it.
func k8sVersion() string {
	dir, err := controlplane.BinDir()
	if err != nil {
		return "(unknown version)"
	}
	bi, err := buildinfo.ReadFile(filepath.Join(dir, "kube-scheduler"))
	if err != nil || bi.Main.Version == "" {
		return "(unknown version)"
	}
	return bi.Main.Version
}

// plural is "1 field", "2 fields".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func first(s []string) string {
	if len(s) == 0 {
		return "?"
	}
	return s[0]
}

// templateChanges are the changes recorded on a stored workload's pod template.
func templateChanges(w *unstructured.Unstructured) []policy.Change {
	tpl := templatePaths[w.GetKind()]
	s, _, _ := unstructured.NestedString(w.Object, append(slices.Clone(tpl), "metadata", "annotations", policy.AnnotationTemplateChanges)...)
	changes, _ := policy.DecodeChanges(s)
	return changes
}

// waitForDefaultServiceAccount waits until the service account controller has made namespace ns's
// "default" ServiceAccount: until then the API server refuses every pod there that names none.
func (d *demo) waitForDefaultServiceAccount(ctx context.Context, ns string) error {
	err := d.poll(ctx, 30*time.Second, func() (bool, error) {
		err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("no ServiceAccount default in namespace %s (the service account controller's log: %s): %w", ns, strings.Join(d.cp.ComponentLogs(), ", "), err)
	}
	return nil
}
