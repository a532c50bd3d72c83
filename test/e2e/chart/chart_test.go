package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestHelmChart: issue 5. helm lint and helm template with default and non-default values, then every
// rendered object created in the real API server (server-side apply, with cert-manager's and the
// Prometheus operator's CRDs installed from their Go modules). The API server compiles the webhooks' CEL
// and validates every field; the chart's webhooks must equal deploy/webhook's, and its RBAC stays within
// allowedRBAC (security_test.go).
func TestHelmChart(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(e2eutil.NonDefaultValues), 0o644); err != nil {
		t.Fatal(err)
	}
	e2eutil.Helm(t, "lint", "--strict", "deploy/helm/wincompat")
	e2eutil.Helm(t, "lint", "--strict", "deploy/helm/wincompat", "--values", values)

	// A control plane without the webhook configuration the other tests install: the chart brings its own.
	_, c := controlplane.Start(t)
	cl := &e2eutil.Cluster{C: c}
	ctx := context.Background()
	certManager := filepath.Join(e2eutil.ModuleDir(t, e2eutil.CertManagerModule), "deploy", "crds")
	crds, _ := filepath.Glob(filepath.Join(certManager, "cert-manager.io_*.yaml"))
	promCRDs := filepath.Join(e2eutil.ModuleDir(t, e2eutil.PromOperatorModule), "example", "prometheus-operator-crd")
	crds = append(crds, filepath.Join(promCRDs, "monitoring.coreos.com_servicemonitors.yaml"), filepath.Join(promCRDs, "monitoring.coreos.com_prometheusrules.yaml"))
	e2eutil.InstallCRDs(ctx, t, cl.C, crds)
	e2eutil.SetUpNamespace(ctx, t, cl.C, e2eutil.OwnNamespace, nil, nil)

	for _, tc := range []struct{ name, values string }{{"default values", ""}, {"non-default values", values}} {
		t.Run(tc.name, func(t *testing.T) {
			objs := e2eutil.RenderChart(t, tc.values)
			kinds := map[string]int{}
			for _, obj := range objs {
				kinds[obj.GetKind()]++
				if _, hook := obj.GetAnnotations()["helm.sh/hook"]; hook {
					// A hook is made anew each time (hook-delete-policy before-hook-creation): a Job's
					// template cannot be changed in place.
					_ = cl.C.Delete(ctx, obj.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationBackground))
					e2eutil.WaitUntil(t, 10*time.Second, "the previous hook object to go", func() bool {
						return apierrors.IsNotFound(cl.C.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy()))
					})
				}
				// Server-side apply, as `kubectl apply --server-side` or Argo CD would.
				if err := cl.C.Patch(ctx, obj, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
					t.Errorf("%s %s rejected by the API server: %v", obj.GetKind(), obj.GetName(), err)
				}
				if obj.GetKind() == "ClusterRole" || obj.GetKind() == "Role" {
					e2eutil.CheckRBAC(t, obj)
				}
			}
			t.Logf("created %d objects: %v", len(objs), kinds)
			// No wincompat serves here: the policy check must not refuse the next subtest's ConfigMap.
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: e2eutil.WebhookConfigName}}
			if err := cl.C.Delete(ctx, vwc); err != nil {
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
			deployment = e2eutil.DeploymentOf(t, obj)
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
		{"default values", "", []string{"--resolve-images=true", "--image-resolver-mode=lookup", "--image-lookup-timeout=1s", "--image-tag-ttl=5m", "--image-max-lookups=64", "--image-max-lookups-per-registry=16", "--image-bytes-in-flight=32Mi", "--image-allow-private-networks=false"}, nil, false},
		// Gated placement reads only the cache at admission: still image resolution, by the leader.
		{"gate mode", "imageResolver: {mode: gate, gateTimeout: 1m30s}\n", []string{"--resolve-images=true", "--image-resolver-mode=gate", "--image-lookup-timeout=1s", "--image-tag-ttl=5m", "--image-max-lookups=64", "--image-max-lookups-per-registry=16", "--image-bytes-in-flight=32Mi", "--image-allow-private-networks=false"}, nil, false},
		{"off", "imageResolver: {enabled: false, pullSecret: registry-creds, podPullSecrets: true}\n",
			[]string{"--resolve-images=false", "--image-resolver-mode=lookup"}, nil, false},
		{"pull secret", "imageResolver: {pullSecret: registry-creds, pullSecretNamespaces: wincompat.io/registry-credentials=true, timeout: 0.5s, maxLookups: 16, maxLookupsPerRegistry: 4, allowPrivateNetworks: true}\nwebhook: {timeoutSeconds: 1}\n",
			[]string{"--resolve-images=true", "--image-resolver-mode=lookup", "--image-lookup-timeout=0.5s", "--image-tag-ttl=5m", "--image-max-lookups=16", "--image-max-lookups-per-registry=4", "--image-bytes-in-flight=32Mi", "--image-allow-private-networks=true", "--image-pull-secret=registry-creds", "--image-pull-secret-namespaces=wincompat.io/registry-credentials=true"},
			[]string{`Role get ["registry-creds"]`}, false},
		{"cloud credentials", "imageResolver: {cloudCredentials: [ecr, acr], ecrRegions: [us-east-1, cn-north-1], azureCloud: AzureChinaCloud, pullSecretNamespaces: wincompat.io/registry-credentials=true}\nwebhook: {clientAuth: {caConfigMap: apiserver-ca}}\n",
			[]string{"--resolve-images=true", "--image-resolver-mode=lookup", "--image-lookup-timeout=1s", "--image-tag-ttl=5m", "--image-max-lookups=64", "--image-max-lookups-per-registry=16", "--image-bytes-in-flight=32Mi", "--image-allow-private-networks=false", "--image-cloud-credentials=ecr,acr", "--image-ecr-regions=us-east-1,cn-north-1", "--image-azure-cloud=AzureChinaCloud", "--image-pull-secret-namespaces=wincompat.io/registry-credentials=true"},
			nil, false},
		{"pods' pull secrets", "imageResolver: {podPullSecrets: true}\npolicy: {podImagePullSecrets: true}\nwebhook: {clientAuth: {caConfigMap: apiserver-ca}}\n",
			[]string{"--resolve-images=true", "--image-resolver-mode=lookup", "--image-lookup-timeout=1s", "--image-tag-ttl=5m", "--image-max-lookups=64", "--image-max-lookups-per-registry=16", "--image-bytes-in-flight=32Mi", "--image-allow-private-networks=false"},
			[]string{`ClusterRole get []`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var imageArgs, secretRules []string
			var pol *policy.Policy
			for _, obj := range e2eutil.RenderChart(t, e2eutil.ValuesFile(t, tc.values)) {
				switch obj.GetKind() {
				case "Deployment":
					for _, a := range e2eutil.DeploymentOf(t, obj).Spec.Template.Spec.Containers[0].Args {
						if strings.HasPrefix(a, "--resolve-images") || strings.HasPrefix(a, "--image-") {
							imageArgs = append(imageArgs, a)
						}
					}
				case "ClusterRole", "Role":
					rules, err := e2eutil.RoleRules(obj)
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
					if tc.podPullSecrets && obj.GetKind() == "ClusterRole" && obj.GetName() == "wincompat" {
						want = []string{"ClusterRole grants get on /secrets, which wincompat has no use for"}
					}
					if got := e2eutil.RBACFindings(obj); !slices.Equal(got, want) {
						t.Errorf("%s findings: %q, want %q", obj.GetKind(), got, want)
					}
				case "ConfigMap":
					if obj.GetName() == "wincompat-policy" {
						pol = e2eutil.ChartPolicy(t, obj)
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
		// A registry slow for a minute must not turn every gated pod into a fallback.
		{"gate timeout under 30s", "imageResolver: {gateTimeout: 29s}\n", "imageResolver.gateTimeout 29s: use at least 30s"},
		{"an unknown mode", "imageResolver: {mode: cache}\n", `at '/imageResolver/mode': value must be one of 'lookup', 'gate', 'fallback'`},
		// Any caller of the webhook port names the namespace whose pull secrets would be read.
		{"pods' pull secrets without client certificates", "imageResolver: {podPullSecrets: true}\npolicy: {podImagePullSecrets: true}\n",
			"imageResolver.podPullSecrets needs webhook.clientAuth.caConfigMap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := e2eutil.RunHelm(t, e2eutil.TemplateArgs(t, e2eutil.ValuesFile(t, tc.values))...)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Errorf("helm template: err %v, stderr %q, want an error with %q\n%.200s", err, stderr, tc.want, out)
			}
		})
	}
}

// optInWebhook only warns of a mistyped opt-in label: failurePolicy Ignore whatever the values.
const optInWebhook = "pods-opt-in.wincompat.io"

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
			for _, obj := range e2eutil.RenderChart(t, e2eutil.ValuesFile(t, tc.values)) {
				switch obj.GetKind() {
				case "MutatingWebhookConfiguration":
					for _, w := range webhookConfigOf(t, obj).Webhooks {
						if w.Name == optInWebhook {
							if *w.FailurePolicy != admissionregistrationv1.Ignore {
								t.Errorf("%s: failurePolicy %s, want Ignore: it only warns", w.Name, *w.FailurePolicy)
							}
							continue
						}
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
						pol = e2eutil.ChartPolicy(t, obj)
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
		out, stderr, err := e2eutil.RunHelm(t, e2eutil.TemplateArgs(t, e2eutil.ValuesFile(t, "policy: {linuxByDefault: true}\n"))...)
		if want := "policy.linuxByDefault is set by linuxByDefault.allNamespaces"; err == nil || !strings.Contains(stderr, want) {
			t.Errorf("helm template: err %v, stderr %q, want an error with %q\n%.200s", err, stderr, want, out)
		}
	})
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
			args := e2eutil.TemplateArgs(t, e2eutil.ValuesFile(t, tc.values))
			for _, v := range tc.apiVersions {
				args = append(args, "--api-versions", v)
			}
			var objs []*unstructured.Unstructured
			for _, doc := range strings.Split(string(e2eutil.Helm(t, args...)), "\n---\n") {
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
					for _, a := range e2eutil.DeploymentOf(t, obj).Spec.Template.Spec.Containers[0].Args {
						if v, ok := strings.CutPrefix(a, "--engine="); ok {
							engine = v
						}
					}
				case "MutatingAdmissionPolicy":
					policies = true
				case "ClusterRole":
					rules, _ := e2eutil.RoleRules(obj)
					for _, r := range rules {
						rbac = rbac || slices.Contains(r.Resources, "mutatingadmissionpolicies")
					}
					if f := e2eutil.RBACFindings(obj); len(f) > 0 {
						t.Errorf("RBAC findings: %q", f)
					}
				case "MutatingWebhookConfiguration":
					for _, w := range webhookConfigOf(t, obj).Webhooks {
						want := tc.failure
						if w.Name == optInWebhook {
							want = admissionregistrationv1.Ignore // it only warns, in every engine
						}
						if !strings.Contains(w.Name, "linux") && *w.FailurePolicy != want {
							t.Errorf("%s: failurePolicy %s, want %s", w.Name, *w.FailurePolicy, want)
						}
					}
				}
			}
			if engine != tc.engine || policies != tc.policies || rbac {
				t.Errorf("--engine=%q, admission policies installed %v, admission-policy RBAC %v; want %q, %v, false", engine, policies, rbac, tc.engine, tc.policies)
			}
		})
	}
	if _, stderr, err := e2eutil.RunHelm(t, e2eutil.TemplateArgs(t, e2eutil.ValuesFile(t, "engine: turbo\n"))...); err == nil || !strings.Contains(stderr, `at '/engine': value must be one of 'auto', 'webhook', 'hybrid'`) {
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
