package webhook

// Issue 28, item 5: platform webhooks that act on Windows pods only when the pod's nodeSelector already
// says kubernetes.io/os=windows. EKS's VPC resource controller is one: its pod webhook
// (aws/amazon-vpc-resource-controller-k8s, webhooks/core/pod_webhook.go, WhichPod and
// hasWindowsNodeSelector) gives a pod the vpc.amazonaws.com/PrivateIPv4Address request and limit only
// when nodeSelector kubernetes.io/os or beta.kubernetes.io/os is "windows"; without that resource a
// Windows pod never gets an IP address on its node (docs/troubleshooting.md there, "Verify Pod has the
// resource limits"). It is never reinvoked (no reinvocationPolicy, so Never): whatever a webhook called
// after it adds, it never sees. Its configuration sorted before wincompat's while that was named
// "wincompat", and the webhook engine failed this test then; the admission policies (hybrid, and alone)
// run before every webhook.

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

const (
	// The MutatingWebhookConfiguration EKS installs for the VPC resource controller (the same
	// troubleshooting page names it), and its one webhook (the kubebuilder marker in pod_webhook.go).
	// Before the controller moved into the control plane, the configuration was vpc-admission-webhook-cfg:
	// it sorts before "wincompat" as well.
	vpcWebhookConfig = "vpc-resource-mutating-webhook"
	vpcWebhookName   = "mpod.vpc.k8s.aws"
	// pkg/config/type.go there: ResourceNameIPAddress.
	vpcIPResource = corev1.ResourceName("vpc.amazonaws.com/PrivateIPv4Address")
)

// vpcWebhook behaves as the VPC resource controller's pod webhook does for non-Fargate pods with Windows
// IP address management on: a pod off the host network whose nodeSelector pins kubernetes.io/os or
// beta.kubernetes.io/os to windows gets one vpc.amazonaws.com/PrivateIPv4Address, request and limit,
// on its first container. Every other pod passes unchanged.
type vpcWebhook struct {
	calls, patched atomic.Int64
}

func (v *vpcWebhook) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	v.calls.Add(1)
	e2eutil.ServePodReview(w, req, func(pod *corev1.Pod) []byte {
		sel := pod.Spec.NodeSelector
		windows := sel[corev1.LabelOSStable] == "windows" || sel["beta.kubernetes.io/os"] == "windows"
		if !windows || pod.Spec.HostNetwork || len(pod.Spec.Containers) == 0 {
			return nil
		}
		res := *pod.Spec.Containers[0].Resources.DeepCopy()
		if res.Limits == nil {
			res.Limits = corev1.ResourceList{}
		}
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		res.Limits[vpcIPResource] = resource.MustParse("1")
		res.Requests[vpcIPResource] = resource.MustParse("1")
		v.patched.Add(1)
		// "add" replaces the member when it exists (RFC 6902, 4.1).
		patch, _ := json.Marshal([]any{map[string]any{"op": "add", "path": "/spec/containers/0/resources", "value": res}})
		return patch
	})
}

// installVPCWebhook serves a vpcWebhook over TLS and registers it as EKS does: every pod CREATE in
// every namespace, failurePolicy Ignore, matchPolicy Equivalent, no reinvocationPolicy. It returns once
// the API server calls it.
func installVPCWebhook(t *testing.T, c client.Client, probeNS string) *vpcWebhook {
	t.Helper()
	v := &vpcWebhook{}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: vpcWebhookConfig},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         vpcWebhookName,
			ClientConfig: e2eutil.ServeWebhook(t, v, "/mutate-v1-pod"),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	e2eutil.Create(context.Background(), t, c, cfg)
	var stored admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(cfg), &stored); err != nil {
		t.Fatal(err)
	}
	if p := stored.Webhooks[0].ReinvocationPolicy; p == nil || *p != admissionregistrationv1.NeverReinvocationPolicy {
		t.Fatalf("the API server defaulted the VPC webhook's reinvocationPolicy to %v, want Never", p)
	}
	// The API server reads webhook configurations from an informer: wait until it calls this one.
	for i := 0; v.calls.Load() == 0; i++ {
		if i == 300 {
			t.Fatal("the API server never called the VPC webhook")
		}
		probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe-vpc", Namespace: probeNS},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}}
		_ = c.Create(context.Background(), probe, client.DryRunAll)
		time.Sleep(100 * time.Millisecond)
	}
	return v
}

// windowsPodWithoutSelector is a Windows pod as a chart renders it once declared Windows (spec.os), with
// no nodeSelector: what wincompat pins to Windows nodes.
func windowsPodWithoutSelector(ns, name string) *corev1.Pod {
	p := e2eutil.WindowsChartPod(ns, name, "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "app")
	p.Spec.NodeSelector = nil
	return p
}

// checkVPCResource fails unless the stored pod is pinned to Windows and carries the VPC webhook's IP
// address resource, request and limit.
func checkVPCResource(t *testing.T, c client.Client, pod *corev1.Pod) {
	t.Helper()
	var got corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeSelector[corev1.LabelOSStable] != "windows" {
		t.Fatalf("stored pod's nodeSelector %v does not pin Windows", got.Spec.NodeSelector)
	}
	res := got.Spec.Containers[0].Resources
	for what, list := range map[string]corev1.ResourceList{"requests": res.Requests, "limits": res.Limits} {
		if q, ok := list[vpcIPResource]; !ok || q.Cmp(resource.MustParse("1")) != 0 {
			t.Errorf("stored pod's %s lack %s=1 (the VPC webhook saw no kubernetes.io/os=windows selector): %v", what, vpcIPResource, list)
		}
	}
}

// TestWindowsSelectorBeforeVPCWebhook: in every engine, a Windows pod without a nodeSelector is stored
// with the VPC webhook's IP address resource, because the kubernetes.io/os=windows selector is there
// before that webhook runs.
func TestWindowsSelectorBeforeVPCWebhook(t *testing.T) {
	const ns = "vpc-ordering"
	ctx := context.Background()

	t.Run("webhook", func(t *testing.T) {
		cl := e2eutil.StartCluster(t)
		cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
		v := installVPCWebhook(t, cl.C, ns)
		pod := windowsPodWithoutSelector(ns, "engine-webhook")
		if err := cl.C.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		checkVPCResource(t, cl.C, pod)
		t.Logf("VPC webhook: %d calls, %d patched", v.calls.Load(), v.patched.Load())
	})

	t.Run("hybrid", func(t *testing.T) {
		cl := e2eutil.StartClusterWith(t, nil, func(o *server.Options) { o.Engine = server.EngineHybrid })
		e2eutil.RequireAdmissionPolicies(t, cl.Cfg)
		cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
		e2eutil.InstallHybridPolicies(t, cl.C, policy.Default())
		e2eutil.SetWebhookFailurePolicy(t, cl, admissionregistrationv1.Ignore) // as hybrid installs the webhook
		waitForHybridPolicy(t, cl.C, ns)
		v := installVPCWebhook(t, cl.C, ns)
		pod := windowsPodWithoutSelector(ns, "engine-hybrid")
		if err := cl.C.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		checkVPCResource(t, cl.C, pod)
		t.Logf("VPC webhook: %d calls, %d patched", v.calls.Load(), v.patched.Load())
	})

	t.Run("admission-policy", func(t *testing.T) {
		cfg, c := controlplane.Start(t)
		e2eutil.RequireAdmissionPolicies(t, cfg)
		e2eutil.InstallAdmissionPolicies(ctx, t, c, admissionpolicy.Render(policy.Default(), admissionpolicy.Options{Version: "e2e-map"}))
		e2eutil.SetUpNamespace(ctx, t, c, ns, map[string]string{policy.LabelEnabled: "true"}, nil)
		e2eutil.WaitForAdmissionPolicy(t, c, ns)
		v := installVPCWebhook(t, c, ns)
		pod := windowsPodWithoutSelector(ns, "engine-admission-policy")
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		checkVPCResource(t, c, pod)
		t.Logf("VPC webhook: %d calls, %d patched", v.calls.Load(), v.patched.Load())
	})
}

// waitForHybridPolicy waits until the API server applies hybrid's admission policy to Windows pods in
// ns: until then the webhook alone would act, and later than the VPC webhook.
func waitForHybridPolicy(t *testing.T, c client.Client, ns string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		probe := windowsPodWithoutSelector(ns, "probe-hybrid")
		err := c.Create(context.Background(), probe, client.DryRunAll)
		if err == nil && probe.Annotations[policy.AnnotationAdmissionPolicy] != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hybrid's admission policy does not act on Windows pods in %s after 30s: %v", ns, err)
		}
	}
}

// TestChartUpgradeRenamesWebhookConfigurations: a release installed when wincompat's webhook
// configurations were named after the release alone keeps none of them after `helm upgrade`: helm deletes
// what the new chart no longer renders, so no second, stale configuration goes on calling wincompat.
func TestChartUpgradeRenamesWebhookConfigurations(t *testing.T) {
	ctx := context.Background()
	cp := controlplane.LaunchBare(t)
	cl := &e2eutil.Cluster{CP: cp, Cfg: cp.Config, C: cp.Client}
	e2eutil.SetUpNamespace(ctx, t, cp.Client, e2eutil.OwnNamespace, nil, nil)
	admin := e2eutil.WriteKubeConfig(t, cl, "chart-admin", "system:masters")

	// The chart as it was: the same templates, with the configurations named by the release's fullname.
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "wincompat")
	if err := os.CopyFS(old, os.DirFS(filepath.Join(root, e2eutil.ChartDir))); err != nil {
		t.Fatal(err)
	}
	helpers := filepath.Join(old, "templates", "_helpers.tpl")
	data, err := os.ReadFile(helpers)
	if err != nil {
		t.Fatal(err)
	}
	const now = `{{ printf "0100-%s" (include "wincompat.fullname" .) }}`
	if !strings.Contains(string(data), now) {
		t.Fatalf("%s: wincompat.webhookConfigName is no longer %s; update this test", helpers, now)
	}
	if err := os.WriteFile(helpers, []byte(strings.Replace(string(data), now, `{{ include "wincompat.fullname" . }}`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	helm := func(args ...string) {
		t.Helper()
		args = append(args, "--namespace", e2eutil.OwnNamespace, "--kubeconfig", admin, "--set", "tls.mode=self-managed", "--set", "engine=webhook")
		if out, stderr, err := e2eutil.RunHelm(t, args...); err != nil {
			t.Fatalf("helm %s: %v\n%s%s", args[0], err, out, stderr)
		}
	}
	helm("install", "wincompat", old)
	for _, obj := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: "wincompat"}, obj); err != nil {
			t.Fatalf("the old chart did not install %T wincompat: %v", obj, err)
		}
	}
	helm("upgrade", "wincompat", e2eutil.ChartDir)

	for _, obj := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: "wincompat"}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("after the upgrade, %T wincompat: %v, want not found", obj, err)
		}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: e2eutil.WebhookConfigName}, obj); err != nil {
			t.Errorf("after the upgrade, %T %s: %v", obj, e2eutil.WebhookConfigName, err)
		}
	}
	if args := e2eutil.DeploymentArgs(t, cp.Client); !slices.Contains(args, "--webhook-config-name="+e2eutil.WebhookConfigName) {
		t.Errorf("the upgraded Deployment keeps the caBundle of another configuration: %q", args)
	}
}
