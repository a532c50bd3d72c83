package chart

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/test/controlplane"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// The kinds an API server of each version serves that the chart looks for, as Helm lists them when it
// asked the API server (group/version/Kind), to render as if for that cluster.
var (
	servedBy130 = []string{"v1/Namespace", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"}
	servedBy136 = append([]string{"admissionregistration.k8s.io/v1/MutatingAdmissionPolicy", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicyBinding"}, servedBy130...)
	certManager = []string{"cert-manager.io/v1/Certificate", "cert-manager.io/v1/Issuer"}
)

// The engine's reasons, as the chart words them.
const (
	offlineReason   = "engine is auto and offline rendering (helm template) cannot see whether the cluster serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: for hybrid on Kubernetes 1.36 and later, pass --api-versions admissionregistration.k8s.io/v1/MutatingAdmissionPolicy or set engine: hybrid"
	servedReason    = "engine is auto and the API server serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy"
	notServedReason = "engine is auto and the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (Kubernetes 1.36 and later)"
	certManagerFix  = "cert-manager.io/v1/Certificate is not served: tls.mode cert-manager (the default) needs cert-manager: install it first (https://cert-manager.io/docs/installation/), or let wincompat issue and rotate its own certificate with --set tls.mode=self-managed"
)

// TestHelmTemplateOffline: issue 27. `helm template` renders with no flags at all (no kubeVersion in
// Chart.yaml to hold against Helm's built-in v1.20.0), and says in the Deployment, as an annotation and
// as the comment above it, which engine it chose and why. Where Helm knows what the cluster serves (as
// it does installing; simulated here with --api-versions that list kinds), a cluster older than 1.30, or
// one without what the values need, fails rendering with what to do; offline it renders. Rendering
// only: TestHelmChartPrerequisites installs on the real API server.
func TestHelmTemplateOffline(t *testing.T) {
	withKinds := func(kubeVersion string, kinds ...[]string) []string {
		args := []string{"--kube-version", kubeVersion}
		for _, list := range kinds {
			for _, k := range list {
				args = append(args, "--api-versions", k)
			}
		}
		return args
	}
	for _, tc := range []struct {
		name           string
		args           []string
		engine, reason string
		fails          string // the error, when rendering must fail
	}{
		{"no flags", nil, "webhook", offlineReason, ""},
		{"an old --kube-version alone", []string{"--kube-version", "1.29.0"}, "webhook", offlineReason, ""},
		{"--api-versions names MutatingAdmissionPolicy", []string{"--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"}, "hybrid",
			"engine is auto and --api-versions names admissionregistration.k8s.io/v1/MutatingAdmissionPolicy", ""},
		{"engine hybrid", []string{"--set", "engine=hybrid"}, "hybrid", "the values set engine: hybrid", ""},
		{"engine webhook", []string{"--set", "engine=webhook", "--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"}, "webhook", "the values set engine: webhook", ""},
		{"a 1.33 cluster", withKinds("1.33.4", servedBy130, certManager), "webhook", notServedReason, ""},
		{"a 1.36 cluster", withKinds("1.36.3", servedBy136, certManager), "hybrid", servedReason, ""},
		{"a 1.29 cluster", withKinds("1.29.8", []string{"v1/Namespace"}, certManager), "", "",
			"this cluster lacks what the release needs:\n  - Kubernetes v1.29.8: wincompat needs 1.30 or later"},
		{"a cluster without cert-manager", withKinds("1.36.3", servedBy136), "", "", "this cluster lacks what the release needs:\n  - " + certManagerFix},
		{"a cluster without cert-manager, self-managed TLS", append(withKinds("1.36.3", servedBy136), "--set", "tls.mode=self-managed"), "hybrid", servedReason, ""},
		{"engine hybrid on a 1.33 cluster", append(withKinds("1.33.4", servedBy130, certManager), "--set", "engine=hybrid"), "", "",
			"admissionregistration.k8s.io/v1/MutatingAdmissionPolicyBinding is not served: engine hybrid needs MutatingAdmissionPolicy v1 (Kubernetes 1.36 and later; this cluster is v1.33.4): set engine=auto or engine=webhook"},
		{"a ServiceMonitor without its CRD", append(withKinds("1.36.3", servedBy136, certManager), "--set", "metrics.serviceMonitor.enabled=true"), "", "",
			"monitoring.coreos.com/v1/ServiceMonitor is not served: metrics.serviceMonitor.enabled needs the Prometheus operator's ServiceMonitor CRD"},
		{"a PrometheusRule without its CRD", append(withKinds("1.36.3", servedBy136, certManager), "--set", "metrics.prometheusRule.enabled=true"), "", "",
			"monitoring.coreos.com/v1/PrometheusRule is not served: metrics.prometheusRule.enabled needs the Prometheus operator's PrometheusRule CRD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"template", "wincompat", e2eutil.ChartDir, "--namespace", e2eutil.OwnNamespace}, tc.args...)
			out, stderr, err := e2eutil.RunHelm(t, args...)
			if tc.fails != "" {
				checkHelmRefused(t, "helm template", err, stderr, []string{tc.fails})
				return
			}
			if err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr)
			}
			checkEngineSaid(t, string(out), tc.engine, tc.reason)
		})
	}
}

// checkEngineSaid finds the Deployment in a rendering and checks its engine, its annotations and the
// comment above it.
func checkEngineSaid(t *testing.T, manifests, engine, reason string) {
	t.Helper()
	for _, doc := range strings.Split(manifests, "\n---\n") {
		if !strings.Contains(doc, "\nkind: Deployment\n") {
			continue
		}
		if comment := "# wincompat engine " + engine + ", because " + reason + ".\n"; !strings.Contains(doc, comment) {
			t.Errorf("the Deployment's manifest lacks the comment %q:\n%.600s", comment, doc)
		}
		var obj struct {
			Metadata metav1.ObjectMeta
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if got := obj.Metadata.Annotations; got["wincompat.io/engine"] != engine || got["wincompat.io/engine-reason"] != reason {
			t.Errorf("the Deployment's annotations %q, want engine %s because %q", got, engine, reason)
		}
		if !strings.Contains(doc, "- --engine="+engine+"\n") {
			t.Errorf("the Deployment does not run --engine=%s", engine)
		}
		return
	}
	t.Errorf("no Deployment rendered:\n%.300s", manifests)
}

// TestHelmChartPrerequisites: issue 27. On a real API server (1.36) without cert-manager, the default
// install fails while rendering, saying what to do, instead of with Helm's `no matches for kind
// "Certificate"`, and stores no release; with tls.mode=self-managed it installs (server dry run), and its
// NOTES and Deployment say the engine is hybrid because the API server serves MutatingAdmissionPolicy;
// once cert-manager's CRDs are served the default install passes the check. Issue 43: installed as a
// dependency of an umbrella chart, with the umbrella's globals.
func TestHelmChartPrerequisites(t *testing.T) {
	ctx := context.Background()
	cp := controlplane.LaunchBare(t)
	cl := &e2eutil.Cluster{CP: cp, Cfg: cp.Config, C: cp.Client}
	e2eutil.SetUpNamespace(ctx, t, cp.Client, e2eutil.OwnNamespace, nil, nil)
	admin := e2eutil.WriteKubeConfig(t, cl, "chart-admin", "system:masters")
	install := func(extra ...string) (string, error) {
		args := append([]string{"install", "wincompat", e2eutil.ChartDir, "--namespace", e2eutil.OwnNamespace, "--kubeconfig", admin}, extra...)
		out, stderr, err := e2eutil.RunHelm(t, args...)
		return string(out) + stderr, err
	}

	for _, dryRun := range []string{"--dry-run=server", ""} {
		var extra []string
		if dryRun != "" {
			extra = []string{dryRun}
		}
		out, err := install(extra...)
		checkHelmRefused(t, "helm install "+dryRun, err, out, []string{"this cluster lacks what the release needs:\n  - " + certManagerFix})
		t.Logf("helm install %s:\n%s", dryRun, out)
		if strings.Contains(out, "no matches for kind") {
			t.Errorf("helm install %s: Helm's raw error instead of the chart's:\n%s", dryRun, out)
		}
	}
	// Nothing was stored: neither a release nor any object of it.
	var secrets corev1.SecretList
	if err := cp.Client.List(ctx, &secrets, client.InNamespace(e2eutil.OwnNamespace), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) > 0 {
		t.Errorf("a refused install stored a release: %s", secrets.Items[0].Name)
	}
	var accounts corev1.ServiceAccountList
	if err := cp.Client.List(ctx, &accounts, client.InNamespace(e2eutil.OwnNamespace), client.MatchingLabels{"app.kubernetes.io/name": "wincompat"}); err != nil {
		t.Fatal(err)
	}
	if len(accounts.Items) > 0 {
		t.Errorf("a refused install created %s", accounts.Items[0].Name)
	}

	out, err := install("--dry-run=server", "--set", "tls.mode=self-managed")
	if err != nil {
		t.Fatalf("helm install --dry-run=server --set tls.mode=self-managed: %v\n%s", err, out)
	}
	// What auto picks is what this API server serves (1.34 and 1.35 serve no admission policies).
	engine, reason := "hybrid", servedReason
	if !e2eutil.AdmissionPoliciesServed(t, cp.Config) {
		engine, reason = "webhook", notServedReason
	}
	if notes := "Engine: " + engine + ", because " + reason + "."; !strings.Contains(out, notes) {
		t.Errorf("the NOTES lack %q:\n%s", notes, out)
	}
	checkEngineSaid(t, out, engine, reason)

	certManagerCRDs, _ := filepath.Glob(filepath.Join(e2eutil.ModuleDir(t, e2eutil.CertManagerModule), "deploy", "crds", "cert-manager.io_*.yaml"))
	e2eutil.InstallCRDs(ctx, t, cp.Client, certManagerCRDs)
	if out, err := install("--dry-run=server"); err != nil {
		t.Errorf("helm install --dry-run=server with cert-manager's CRDs: %v\n%s", err, out)
	}

	// As a dependency of an umbrella chart, which passes its globals (TestHelmChartAsSubchart).
	installUmbrella(ctx, t, cp.Client, admin)
}
