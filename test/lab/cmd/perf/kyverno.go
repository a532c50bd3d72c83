package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf"
)

// Kyverno's names, as its Helm chart sets them; it reads them from the environment and refuses to
// start without them (cmd/internal/check.go).
const (
	kyvernoNamespace       = "kyverno"
	kyvernoResourceWebhook = "kyverno-resource-mutating-webhook-cfg"
	kyvernoManagedBy       = "webhook.kyverno.io/managed-by=kyverno"
)

var clusterPolicies = schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}

// kyvernoPeer is Kyverno's admission controller run out of cluster on 127.0.0.1, and its
// ClusterPolicy (test/lab/peers/kyverno/clusterpolicy.yaml), which is its Toggle: with no policy for pods,
// Kyverno registers no webhook for them and the API server never calls it.
type kyvernoPeer struct {
	version string
	// gomaxprocs is Kyverno's GOMAXPROCS, 0 for unset (every core).
	gomaxprocs int
	process    *perf.Server
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	policy     *unstructured.Unstructured
}

// startKyverno installs Kyverno's CRDs from its Go module (the one test/lab/peers/kyverno pins), starts
// the binary, and waits until its own policy webhook answers. Unless -kyverno-gomaxprocs says
// otherwise, Kyverno gets every core: it is built to use them, and measuring it on one core would
// flatter wincompat.
func (e *env) startKyverno(ctx context.Context) (*kyvernoPeer, error) {
	peerModule := filepath.Join(e.root, "test", "lab", "peers", "kyverno")
	list := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/kyverno/kyverno")
	list.Dir = peerModule
	out, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("finding Kyverno's module from %s (make perf-peers downloads it): %w", peerModule, err)
	}
	moduleDir := strings.TrimSpace(string(out))
	raw, err := os.ReadFile(filepath.Join(peerModule, "clusterpolicy.yaml"))
	if err != nil {
		return nil, err
	}
	k := &kyvernoPeer{cs: e.cs, policy: &unstructured.Unstructured{}, version: "unknown"}
	if err := yaml.Unmarshal(raw, &k.policy.Object); err != nil {
		return nil, fmt.Errorf("clusterpolicy.yaml: %w", err)
	}
	if bi, err := buildinfo.ReadFile(e.kyvernoBinary); err == nil {
		// The main module when built as make perf-peers builds it, a dependency otherwise.
		for _, dep := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
			if dep.Path == "github.com/kyverno/kyverno" {
				k.version = dep.Version
			}
		}
	}
	// Kyverno's v1 policies are deprecated in favour of its CEL ones; the warning would print on every
	// switch of engine.
	quiet := rest.CopyConfig(e.cp.Config)
	quiet.WarningHandler = rest.NoWarnings{}
	if k.dyn, err = dynamic.NewForConfig(quiet); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kyvernoNamespace}}
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	// Kyverno exits without the policy CRDs and waits forever for the others' informers.
	crds := []string{filepath.Join(moduleDir, "config", "crds", "kyverno"), filepath.Join(moduleDir, "config", "crds", "policies.kyverno.io")}
	if _, err := envtest.InstallCRDs(e.cp.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing Kyverno's CRDs from %s: %w", crds, err)
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(e.workDir, "kyverno.kubeconfig")
	admin, err := e.cp.KubeConfig("kyverno", "system:masters")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(kubeconfig, admin, 0o600); err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--kubeconfig=" + kubeconfig,
		// The webhook URL is https://SERVERIP/path, and the serving certificate gets its host as an IP SAN.
		"--serverIP=" + addr, "--webhookServerHost=127.0.0.1", "--webhookServerPort=" + strconv.Itoa(port),
		"--caSecretName=kyverno-svc.kyverno.svc.kyverno-tls-ca", "--tlsSecretName=kyverno-svc.kyverno.svc.kyverno-tls-pair",
		"--admissionReports=false", "--autoUpdateWebhooks=true",
		// Metrics off, and no listener on fixed ports that could already be taken.
		"--disableMetrics=true", "--otelConfig=none", "--controllerRuntimeMetricsAddress=0",
		"--enablePolicyException=false", "--generateValidatingAdmissionPolicy=false",
		"--omitEvents=PolicyApplied,PolicySkipped,PolicyViolation,PolicyError",
		"--autoMemLimitEnabled=false", "--loggingFormat=text", "--v=2",
	}
	env := []string{
		"KYVERNO_NAMESPACE=" + kyvernoNamespace, "KYVERNO_SERVICEACCOUNT_NAME=kyverno", "KYVERNO_DEPLOYMENT=kyverno",
		"KYVERNO_POD_NAME=kyverno-perf", "INIT_CONFIG=kyverno", "METRICS_CONFIG=kyverno-metrics", "KYVERNO_SVC=kyverno-svc"}
	procs := "unset"
	if e.kyvernoProcs > 0 {
		procs = strconv.Itoa(e.kyvernoProcs)
		env = append(env, "GOMAXPROCS="+procs)
	}
	k.gomaxprocs = e.kyvernoProcs
	fmt.Printf("kyverno %s: GOMAXPROCS=%s %s %s\n", k.version, procs, e.kyvernoBinary, joinWords(args))
	if k.process, err = perf.StartServer(e.kyvernoBinary, args, env, filepath.Join(e.workDir, "kyverno.log")); err != nil {
		return nil, err
	}
	// Kyverno issues its certificates and registers its webhooks a few seconds after it leads: a
	// dry-run creation of the policy passes once its policy webhook answers.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = k.dyn.Resource(clusterPolicies).Create(ctx, k.policy.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last == nil, nil
	}); err != nil {
		return nil, errors.Join(fmt.Errorf("kyverno's policy webhook never answered: %w; the end of its log (%s):\n%s", last, k.process.LogPath, controlplane.TailLines(k.process.LogPath, 20)), err, k.stop())
	}
	e.meter.Pids["kyverno"] = k.process.Pid
	return k, nil
}

// Apply creates the ClusterPolicy (on), or deletes it and waits until Kyverno has taken pods out of
// its resource webhook (off): otherwise the API server would go on calling it for every Windows pod.
func (k *kyvernoPeer) Apply(ctx context.Context, on bool) error {
	api := k.dyn.Resource(clusterPolicies)
	if on {
		_, err := api.Create(ctx, k.policy.DeepCopy(), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	if err := k.deletePolicy(ctx); err != nil {
		return err
	}
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		wc, err := k.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, kyvernoResourceWebhook, metav1.GetOptions{})
		last = err
		return apierrors.IsNotFound(err) || (err == nil && len(wc.Webhooks) == 0), nil
	}); err != nil {
		return fmt.Errorf("kyverno kept its webhook for pods after its policy was deleted: %w", errors.Join(last, err))
	}
	return nil
}

func (k *kyvernoPeer) deletePolicy(ctx context.Context) error {
	err := k.dyn.Resource(clusterPolicies).Delete(ctx, k.policy.GetName(), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// stop deletes the policy, stops Kyverno and removes the webhook configurations it leaves behind out
// of cluster (it removes them only when its Deployment goes down), so that later parts of the run
// meet an API server without it. Removing them makes waiting for Kyverno to empty them pointless.
func (k *kyvernoPeer) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := k.deletePolicy(ctx)
	if k.process != nil {
		err = errors.Join(err, k.process.Stop(10*time.Second))
	}
	admission := k.cs.AdmissionregistrationV1()
	err = errors.Join(err,
		admission.MutatingWebhookConfigurations().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: kyvernoManagedBy}),
		admission.ValidatingWebhookConfigurations().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: kyvernoManagedBy}))
	return err
}
