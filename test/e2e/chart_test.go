package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
)

// Modules whose CRDs the chart's objects need, pinned: cert-manager's (Issuer, Certificate) and the
// Prometheus operator's (ServiceMonitor, PrometheusRule). Their YAML ships inside the Go modules.
const (
	certManagerModule  = "github.com/cert-manager/cert-manager@v1.21.2"
	promOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

// nonDefaultValues turns on everything the defaults leave off.
const nonDefaultValues = `
replicaCount: 3
antiAffinity: required
priorityClassName: ""
tls:
  mode: self-managed
  minVersion: "1.2"
webhook:
  failurePolicy: Ignore
  timeoutSeconds: 5
  excludedNamespaces: [kube-system, monitoring]
runtimeClasses:
  manage: false
misplacedPods:
  remediate: {enabled: true, perMinute: 2, ownerWindow: 30m}
policy:
  defaultBuild: ltsc2022
  arch: amd64
  windowsNodeTaints:
  - {key: os, value: Windows, effect: NoSchedule}
metrics:
  serviceMonitor:
    enabled: true
    labels: {release: prometheus}
  prometheusRule:
    enabled: true
    labels: {release: prometheus}
  dashboard:
    enabled: true
    label: grafana_dashboard
    labelValue: "1"
networkPolicy:
  apiServerCIDRs: [10.0.0.0/24, 192.168.10.5/32]
tolerations:
- {key: CriticalAddonsOnly, operator: Exists}
logLevel: debug
imageResolver:
  timeout: 1500ms
  tagTTL: 10m
  pullSecret: registry-creds
  pullSecretNamespaces: kubernetes.io/metadata.name
`

func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	out, stderr, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// runHelm runs bin/helm in the repository root.
func runHelm(t *testing.T, args ...string) (stdout []byte, stderr string, err error) {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s missing: run `make bin/helm` in %s (it builds helm from the version pinned in test/go.mod)", bin, root)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = root
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	stdout, err = cmd.Output()
	return stdout, errOut.String(), err
}

// templateArgs are the arguments of `helm template` for a release named wincompat, rendered offline for
// the Kubernetes release under test.
func templateArgs(t *testing.T, valuesFile string) []string {
	t.Helper()
	args := []string{"template", "wincompat", "deploy/helm/wincompat", "--namespace", ownNamespace, "--kube-version", releaseUnderTest(t)}
	if valuesFile != "" {
		args = append(args, "--values", valuesFile)
	}
	return args
}

// valuesFile writes values for helm to a file.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	if values == "" {
		return ""
	}
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// renderChart renders the chart as `helm template` does for a release named wincompat.
func renderChart(t *testing.T, valuesFile string) []*unstructured.Unstructured {
	t.Helper()
	return manifests(t, helm(t, templateArgs(t, valuesFile)...))
}

// manifests decodes helm's rendered YAML documents, leaving out empty ones.
func manifests(t *testing.T, rendered []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(rendered), "\n---") {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// moduleDir downloads a pinned module through the Go module proxy and returns where it lies.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", module, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: %s %v", module, m.Error, err)
	}
	return m.Dir
}

// installCRDs creates the CRDs in files and waits until the API server serves them.
func installCRDs(ctx context.Context, t *testing.T, c client.Client, files []string) {
	t.Helper()
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal([]byte(doc), &crd); err != nil || crd.Kind != "CustomResourceDefinition" {
				continue
			}
			create(ctx, t, c, &crd)
			names = append(names, crd.Name)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range names {
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err == nil && slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established", name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestHelmChart: issue 5. helm lint and helm template with default and non-default values, then every
// rendered object created in the real API server (server-side apply, with cert-manager's and the
// Prometheus operator's CRDs installed from their Go modules). The API server compiles the webhooks' CEL
// and validates every field; the chart's webhooks must equal deploy/webhook's, and its RBAC stays within
// allowedRBAC (security_test.go).
func TestHelmChart(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(nonDefaultValues), 0o644); err != nil {
		t.Fatal(err)
	}
	helm(t, "lint", "--strict", "deploy/helm/wincompat")
	helm(t, "lint", "--strict", "deploy/helm/wincompat", "--values", values)

	// A control plane without the webhook configuration the other tests install: the chart brings its own.
	_, c := controlplane.Start(t)
	cl := &cluster{c: c}
	ctx := context.Background()
	certManager := filepath.Join(moduleDir(t, certManagerModule), "deploy", "crds")
	crds, _ := filepath.Glob(filepath.Join(certManager, "cert-manager.io_*.yaml"))
	promCRDs := filepath.Join(moduleDir(t, promOperatorModule), "example", "prometheus-operator-crd")
	crds = append(crds, filepath.Join(promCRDs, "monitoring.coreos.com_servicemonitors.yaml"), filepath.Join(promCRDs, "monitoring.coreos.com_prometheusrules.yaml"))
	installCRDs(ctx, t, cl.c, crds)
	setUpNamespace(ctx, t, cl.c, ownNamespace, nil, nil)

	for _, tc := range []struct{ name, values string }{{"default values", ""}, {"non-default values", values}} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderChart(t, tc.values)
			kinds := map[string]int{}
			for _, obj := range objs {
				kinds[obj.GetKind()]++
				// Server-side apply, as `kubectl apply --server-side` or Argo CD would.
				if err := cl.c.Patch(ctx, obj, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
					t.Errorf("%s %s rejected by the API server: %v", obj.GetKind(), obj.GetName(), err)
				}
				if obj.GetKind() == "ClusterRole" || obj.GetKind() == "Role" {
					checkRBAC(t, obj)
				}
			}
			t.Logf("created %d objects: %v", len(objs), kinds)
			// No wincompat serves here: the policy check must not refuse the next subtest's ConfigMap.
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookConfigName}}
			if err := cl.c.Delete(ctx, vwc); err != nil {
				t.Errorf("deleting the policy check: %v", err)
			}
			want := []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "MutatingWebhookConfiguration", "NetworkPolicy", "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount", "ValidatingWebhookConfiguration"}
			if tc.values == "" {
				want = append(want, "Certificate", "Issuer", "ResourceQuota")
				checkCriticalPodsQuota(t, objs)
			} else {
				want = append(want, "ServiceMonitor", "PrometheusRule")
			}
			for _, k := range want {
				if kinds[k] == 0 {
					t.Errorf("no %s rendered", k)
				}
			}
			if tc.values == "" {
				compareWithDeployWebhooks(t, objs)
			}
		})
	}
}

// checkCriticalPodsQuota: the default values' system-cluster-critical pods get a quota of their class
// that holds every replica through a rollout (maxSurge), so that an API server limiting critical classes
// to covered namespaces, as GKE's does, admits them.
func checkCriticalPodsQuota(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var quota *corev1.ResourceQuota
	var deployment *appsv1.Deployment
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ResourceQuota":
			quota = &corev1.ResourceQuota{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, quota); err != nil {
				t.Fatal(err)
			}
		case "Deployment":
			deployment = deploymentOf(t, obj)
		}
	}
	if quota == nil || deployment == nil {
		t.Fatalf("rendered no ResourceQuota or no Deployment")
	}
	class := deployment.Spec.Template.Spec.PriorityClassName
	sel := quota.Spec.ScopeSelector
	if sel == nil || len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].ScopeName != corev1.ResourceQuotaScopePriorityClass ||
		!slices.Equal(sel.MatchExpressions[0].Values, []string{class}) {
		t.Errorf("quota scope %+v does not cover the pods' priority class %q", sel, class)
	}
	need := int64(*deployment.Spec.Replicas) + int64(deployment.Spec.Strategy.RollingUpdate.MaxSurge.IntValue())
	if pods := quota.Spec.Hard[corev1.ResourcePods]; pods.Value() < need {
		t.Errorf("quota allows %s pods, a rollout needs %d", pods.String(), need)
	}
}

// compareWithDeployWebhooks keeps the chart and deploy/webhook (which the e2e tests install) in step: the
// webhooks of both configurations, compared as JSON.
func compareWithDeployWebhooks(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	root, _ := controlplane.RepoRoot()
	for kind, file := range map[string]string{
		"MutatingWebhookConfiguration":   "mutatingwebhookconfiguration.yaml",
		"ValidatingWebhookConfiguration": "validatingwebhookconfiguration.yaml",
	} {
		data, err := os.ReadFile(filepath.Join(root, "deploy", "webhook", file))
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		for _, obj := range objs {
			if obj.GetKind() == kind {
				got = obj.Object
			}
		}
		w, g := normalizedWebhooks(want), normalizedWebhooks(got)
		if !equality.Semantic.DeepEqual(w, g) {
			wj, _ := json.MarshalIndent(w, "", " ")
			gj, _ := json.MarshalIndent(g, "", " ")
			t.Errorf("the chart's %s webhooks differ from deploy/webhook/%s\nchart:\n%s\ndeploy:\n%s", kind, file, gj, wj)
		}
	}
}

// normalizedWebhooks are the webhooks of a configuration as JSON values, their CEL differing only in line
// breaks.
func normalizedWebhooks(wc map[string]any) []any {
	js, _ := json.Marshal(wc["webhooks"])
	var hooks []any
	_ = json.Unmarshal(js, &hooks)
	for _, h := range hooks {
		// The API server's default for a webhook without one.
		if sel, ok := h.(map[string]any)["objectSelector"].(map[string]any); ok && len(sel) == 0 {
			delete(h.(map[string]any), "objectSelector")
		}
		conds, _ := h.(map[string]any)["matchConditions"].([]any)
		for _, c := range conds {
			mc := c.(map[string]any)
			e := strings.Join(strings.Fields(mc["expression"].(string)), " ")
			mc["expression"] = strings.ReplaceAll(strings.ReplaceAll(e, "( ", "("), "[ ", "[")
		}
	}
	return hooks
}

// TestHelmChartImageResolver: issue 13. The imageResolver values become serve's flags; a pull secret
// adds get on that one Secret in the release namespace; cloud credentials (issue 28) add no RBAC; only podPullSecrets adds get on every Secret
// (which security_test.go's allowlist still flags) and turns the policy's podImagePullSecrets on. Values
// the webhook's timeout or RBAC would contradict fail rendering. Rendering only: TestHelmChart applies
// a pull secret's Role to the API server.
func TestHelmChartImageResolver(t *testing.T) {
	for _, tc := range []struct {
		name, values   string
		imageArgs      []string // serve's image resolution flags, in order
		secretRules    []string // every rule on Secrets: kind, verbs, resourceNames
		podPullSecrets bool     // the policy's podImagePullSecrets
	}{
		{"default values", "", []string{"--resolve-images=true", "--image-lookup-timeout=1s", "--image-tag-ttl=5m", "--image-max-lookups=64", "--image-max-lookups-per-registry=16", "--image-bytes-in-flight=32Mi", "--image-allow-private-networks=false"}, nil, false},
		{"off", "imageResolver: {enabled: false, pullSecret: registry-creds, podPullSecrets: true}\n",
			[]string{"--resolve-images=false"}, nil, false},
		{"pull secret", "imageResolver: {pullSecret: registry-creds, pullSecretNamespaces: wincompat.io/registry-credentials=true, timeout: 0.5s, maxLookups: 16, maxLookupsPerRegistry: 4, allowPrivateNetworks: true}\nwebhook: {timeoutSeconds: 1}\n",
			[]string{"--resolve-images=true", "--image-lookup-timeout=0.5s", "--image-tag-ttl=5m", "--image-max-lookups=16", "--image-max-lookups-per-registry=4", "--image-bytes-in-flight=32Mi", "--image-allow-private-networks=true", "--image-pull-secret=registry-creds", "--image-pull-secret-namespaces=wincompat.io/registry-credentials=true"},
			[]string{`Role get ["registry-creds"]`}, false},
		{"cloud credentials", "imageResolver: {cloudCredentials: [ecr, acr], ecrRegions: [us-east-1, cn-north-1], azureCloud: AzureChinaCloud, pullSecretNamespaces: wincompat.io/registry-credentials=true}\nwebhook: {clientAuth: {caConfigMap: apiserver-ca}}\n",
			[]string{"--resolve-images=true", "--image-lookup-timeout=1s", "--image-tag-ttl=5m", "--image-max-lookups=64", "--image-max-lookups-per-registry=16", "--image-bytes-in-flight=32Mi", "--image-allow-private-networks=false", "--image-cloud-credentials=ecr,acr", "--image-ecr-regions=us-east-1,cn-north-1", "--image-azure-cloud=AzureChinaCloud", "--image-pull-secret-namespaces=wincompat.io/registry-credentials=true"},
			nil, false},
		{"pods' pull secrets", "imageResolver: {podPullSecrets: true}\npolicy: {podImagePullSecrets: true}\nwebhook: {clientAuth: {caConfigMap: apiserver-ca}}\n",
			[]string{"--resolve-images=true", "--image-lookup-timeout=1s", "--image-tag-ttl=5m", "--image-max-lookups=64", "--image-max-lookups-per-registry=16", "--image-bytes-in-flight=32Mi", "--image-allow-private-networks=false"},
			[]string{`ClusterRole get []`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var imageArgs, secretRules []string
			var pol *policy.Policy
			for _, obj := range renderChart(t, valuesFile(t, tc.values)) {
				switch obj.GetKind() {
				case "Deployment":
					for _, a := range deploymentOf(t, obj).Spec.Template.Spec.Containers[0].Args {
						if strings.HasPrefix(a, "--resolve-images") || strings.HasPrefix(a, "--image-") {
							imageArgs = append(imageArgs, a)
						}
					}
				case "ClusterRole", "Role":
					rules, err := roleRules(obj)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range rules {
						if slices.Contains(r.Resources, "secrets") {
							secretRules = append(secretRules, fmt.Sprintf("%s %s %q", obj.GetKind(), strings.Join(r.Verbs, ","), r.ResourceNames))
						}
					}
					// Cluster-wide Secret read stays outside the allowlist: it is the one finding, and only
					// when asked for.
					var want []string
					if tc.podPullSecrets && obj.GetKind() == "ClusterRole" {
						want = []string{"ClusterRole grants get on /secrets, which wincompat has no use for"}
					}
					if got := rbacFindings(obj); !slices.Equal(got, want) {
						t.Errorf("%s findings: %q, want %q", obj.GetKind(), got, want)
					}
				case "ConfigMap":
					if obj.GetName() == "wincompat-policy" {
						pol = chartPolicy(t, obj)
					}
				}
			}
			if !slices.Equal(imageArgs, tc.imageArgs) {
				t.Errorf("image resolution flags %q, want %q", imageArgs, tc.imageArgs)
			}
			if !slices.Equal(secretRules, tc.secretRules) {
				t.Errorf("rules on Secrets %q, want %q", secretRules, tc.secretRules)
			}
			if pol == nil {
				t.Error("no policy ConfigMap rendered")
			} else if pol.PodImagePullSecrets != tc.podPullSecrets {
				t.Errorf("policy podImagePullSecrets %v, want %v", pol.PodImagePullSecrets, tc.podPullSecrets)
			}
		})
	}
	for _, tc := range []struct{ name, values, want string }{
		{"timeout not under timeoutSeconds", "imageResolver: {timeout: 2s}\nwebhook: {timeoutSeconds: 2}\n",
			"imageResolver.timeout 2s is not under webhook.timeoutSeconds (2)"},
		{"podImagePullSecrets without its RBAC", "policy: {podImagePullSecrets: true}\n",
			"policy.podImagePullSecrets is true but imageResolver.podPullSecrets is not"},
		{"no lookups at all", "imageResolver: {maxLookups: 0}\n", `at '/imageResolver/maxLookups': minimum: got 0, want 1`},
		// Any caller of the webhook port names the namespace whose pull secrets would be read.
		{"pods' pull secrets without client certificates", "imageResolver: {podPullSecrets: true}\npolicy: {podImagePullSecrets: true}\n",
			"imageResolver.podPullSecrets needs webhook.clientAuth.caConfigMap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runHelm(t, templateArgs(t, valuesFile(t, tc.values))...)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Errorf("helm template: err %v, stderr %q, want an error with %q\n%.200s", err, stderr, tc.want, out)
			}
		})
	}
}

// TestHelmChartLinuxByDefault: issue 14. The Linux webhooks are always rendered, failurePolicy Ignore,
// for namespaces labelled default-os=linux; allNamespaces adds two for every unlabelled namespace but the
// excluded ones and sets the policy's linuxByDefault, which the policy value cannot set alone. Rendering
// only: TestHelmChart compares the default rendering with deploy/webhook, which the e2e tests install.
func TestHelmChartLinuxByDefault(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		webhooks     []string // the Linux webhooks and their namespace selectors
		linuxAll     bool
		excluded     []string
	}{
		{"default values", "", []string{
			`pods-linux.wincompat.io Ignore [wincompat.io/default-os In [linux]]`,
			`workloads-linux.wincompat.io Ignore [wincompat.io/default-os In [linux]]`,
		}, false, []string{"kube-system"}},
		{"all namespaces", "linuxByDefault: {allNamespaces: true, excludedNamespaces: [kube-system, monitoring], failurePolicy: Fail}\n", []string{
			`pods-linux.wincompat.io Fail [wincompat.io/default-os In [linux]]`,
			`workloads-linux.wincompat.io Fail [wincompat.io/default-os In [linux]]`,
			`pods-linux-all.wincompat.io Fail [wincompat.io/default-os DoesNotExist [] kubernetes.io/metadata.name NotIn [kube-system monitoring wincompat-system]]`,
			`workloads-linux-all.wincompat.io Fail [wincompat.io/default-os DoesNotExist [] kubernetes.io/metadata.name NotIn [kube-system monitoring wincompat-system]]`,
		}, true, []string{"kube-system", "monitoring"}},
		// kube-system stays out of the webhooks' namespaces even when the list leaves it out, as the
		// policy keeps it out of the decision.
		{"all namespaces with a list without kube-system", "linuxByDefault: {allNamespaces: true, excludedNamespaces: [monitoring]}\n", []string{
			`pods-linux.wincompat.io Ignore [wincompat.io/default-os In [linux]]`,
			`workloads-linux.wincompat.io Ignore [wincompat.io/default-os In [linux]]`,
			`pods-linux-all.wincompat.io Ignore [wincompat.io/default-os DoesNotExist [] kubernetes.io/metadata.name NotIn [monitoring kube-system wincompat-system]]`,
			`workloads-linux-all.wincompat.io Ignore [wincompat.io/default-os DoesNotExist [] kubernetes.io/metadata.name NotIn [monitoring kube-system wincompat-system]]`,
		}, true, []string{"monitoring"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var webhooks []string
			var pol *policy.Policy
			for _, obj := range renderChart(t, valuesFile(t, tc.values)) {
				switch obj.GetKind() {
				case "MutatingWebhookConfiguration":
					for _, w := range webhookConfigOf(t, obj).Webhooks {
						if !strings.Contains(w.Name, "linux") {
							if *w.FailurePolicy != admissionregistrationv1.Fail {
								t.Errorf("%s: failurePolicy %s, want the Windows webhooks' Fail", w.Name, *w.FailurePolicy)
							}
							continue
						}
						var sel []string
						for _, e := range w.NamespaceSelector.MatchExpressions {
							sel = append(sel, fmt.Sprintf("%s %s %v", e.Key, e.Operator, e.Values))
						}
						webhooks = append(webhooks, fmt.Sprintf("%s %s [%s]", w.Name, *w.FailurePolicy, strings.Join(sel, " ")))
					}
				case "ConfigMap":
					if obj.GetName() == "wincompat-policy" {
						pol = chartPolicy(t, obj)
					}
				}
			}
			if !slices.Equal(webhooks, tc.webhooks) {
				t.Errorf("Linux webhooks:\n%s\nwant:\n%s", strings.Join(webhooks, "\n"), strings.Join(tc.webhooks, "\n"))
			}
			if pol == nil || pol.LinuxByDefault != tc.linuxAll || !slices.Equal(pol.LinuxByDefaultExcludedNamespaces, tc.excluded) {
				t.Errorf("policy: %+v", pol)
			}
		})
	}
	t.Run("policy.linuxByDefault alone", func(t *testing.T) {
		out, stderr, err := runHelm(t, templateArgs(t, valuesFile(t, "policy: {linuxByDefault: true}\n"))...)
		if want := "policy.linuxByDefault is set by linuxByDefault.allNamespaces"; err == nil || !strings.Contains(stderr, want) {
			t.Errorf("helm template: err %v, stderr %q, want an error with %q\n%.200s", err, stderr, want, out)
		}
	})
}

// chartPolicy loads the policy file the chart's ConfigMap holds.
func chartPolicy(t *testing.T, cm *unstructured.Unstructured) *policy.Policy {
	t.Helper()
	data, _, _ := unstructured.NestedString(cm.Object, "data", "policy.yaml")
	pol, err := policy.Load([]byte(data))
	if err != nil {
		t.Fatalf("the policy ConfigMap does not load: %v\n%s", err, data)
	}
	return pol
}

// TestHelmChartEngine: issue 15. auto is hybrid exactly where the API server serves
// MutatingAdmissionPolicy v1; hybrid runs serve --engine=hybrid, sets the Windows webhooks to Ignore and
// installs the admission policies itself, granting wincompat no RBAC on them in any engine (issue 40);
// an explicit webhook.failurePolicy wins. Rendering only.
func TestHelmChartEngine(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		apiVersions  []string
		engine       string
		failure      admissionregistrationv1.FailurePolicyType
		policies     bool
	}{
		{"auto without MutatingAdmissionPolicy v1", "", nil, "webhook", admissionregistrationv1.Fail, false},
		{"auto with MutatingAdmissionPolicy v1", "", []string{"admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"}, "hybrid", admissionregistrationv1.Ignore, true},
		{"hybrid", "engine: hybrid\n", nil, "hybrid", admissionregistrationv1.Ignore, true},
		{"hybrid with Fail asked for", "engine: hybrid\nwebhook: {failurePolicy: Fail}\n", nil, "hybrid", admissionregistrationv1.Fail, true},
		{"webhook", "engine: webhook\n", []string{"admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"}, "webhook", admissionregistrationv1.Fail, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := templateArgs(t, valuesFile(t, tc.values))
			for _, v := range tc.apiVersions {
				args = append(args, "--api-versions", v)
			}
			var objs []*unstructured.Unstructured
			for _, doc := range strings.Split(string(helm(t, args...)), "\n---\n") {
				obj := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil || obj.Object == nil {
					continue
				}
				objs = append(objs, obj)
			}
			var engine string
			rbac, policies := false, false
			for _, obj := range objs {
				switch obj.GetKind() {
				case "Deployment":
					for _, a := range deploymentOf(t, obj).Spec.Template.Spec.Containers[0].Args {
						if v, ok := strings.CutPrefix(a, "--engine="); ok {
							engine = v
						}
					}
				case "MutatingAdmissionPolicy":
					policies = true
				case "ClusterRole":
					rules, _ := roleRules(obj)
					for _, r := range rules {
						rbac = rbac || slices.Contains(r.Resources, "mutatingadmissionpolicies")
					}
					if f := rbacFindings(obj); len(f) > 0 {
						t.Errorf("RBAC findings: %q", f)
					}
				case "MutatingWebhookConfiguration":
					for _, w := range webhookConfigOf(t, obj).Webhooks {
						if !strings.Contains(w.Name, "linux") && *w.FailurePolicy != tc.failure {
							t.Errorf("%s: failurePolicy %s, want %s", w.Name, *w.FailurePolicy, tc.failure)
						}
					}
				}
			}
			if engine != tc.engine || policies != tc.policies || rbac {
				t.Errorf("--engine=%q, admission policies installed %v, admission-policy RBAC %v; want %q, %v, false", engine, policies, rbac, tc.engine, tc.policies)
			}
		})
	}
	if _, stderr, err := runHelm(t, templateArgs(t, valuesFile(t, "engine: turbo\n"))...); err == nil || !strings.Contains(stderr, `at '/engine': value must be one of 'auto', 'webhook', 'hybrid'`) {
		t.Errorf("engine: turbo rendered: %v %s", err, stderr)
	}
}

// webhookConfigOf decodes a rendered MutatingWebhookConfiguration.
func webhookConfigOf(t *testing.T, obj *unstructured.Unstructured) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	var wc admissionregistrationv1.MutatingWebhookConfiguration
	js, _ := obj.MarshalJSON()
	if err := json.Unmarshal(js, &wc); err != nil {
		t.Fatal(err)
	}
	return &wc
}
