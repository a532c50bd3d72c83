package e2eutil

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
)

// Modules whose CRDs the chart's objects need, pinned: cert-manager's (Issuer, Certificate) and the
// Prometheus operator's (ServiceMonitor, PrometheusRule). Their YAML ships inside the Go modules.
const (
	CertManagerModule  = "github.com/cert-manager/cert-manager@v1.21.2"
	PromOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

// NonDefaultValues turns on everything the defaults leave off.
const NonDefaultValues = `
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

func Helm(t *testing.T, args ...string) []byte {
	t.Helper()
	out, stderr, err := RunHelm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// RunHelm runs bin/helm in the repository root.
func RunHelm(t *testing.T, args ...string) (stdout []byte, stderr string, err error) {
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

// TemplateArgs are the arguments of `helm template` for a release named wincompat, rendered offline for
// the Kubernetes release under test.
func TemplateArgs(t *testing.T, valuesFile string) []string {
	t.Helper()
	args := []string{"template", "wincompat", "deploy/helm/wincompat", "--namespace", OwnNamespace, "--kube-version", ReleaseUnderTest(t)}
	if valuesFile != "" {
		args = append(args, "--values", valuesFile)
	}
	return args
}

// ValuesFile writes values for helm to a file, in a directory whose name has no comma: helm splits
// --values at commas, and t.TempDir is named after the test.
func ValuesFile(t *testing.T, values string) string {
	t.Helper()
	if values == "" {
		return ""
	}
	dir, err := os.MkdirTemp("", "helm-values-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	file := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// RenderChart renders the chart as `helm template` does for a release named wincompat.
func RenderChart(t *testing.T, valuesFile string) []*unstructured.Unstructured {
	t.Helper()
	return Manifests(t, Helm(t, TemplateArgs(t, valuesFile)...))
}

// Manifests decodes helm's rendered YAML documents, leaving out empty ones.
func Manifests(t *testing.T, rendered []byte) []*unstructured.Unstructured {
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

// ModuleDir downloads a pinned module through the Go module proxy and returns where it lies.
func ModuleDir(t *testing.T, module string) string {
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

// InstallCRDs creates the CRDs in files and waits until the API server serves them.
func InstallCRDs(ctx context.Context, t *testing.T, c client.Client, files []string) {
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
			Create(ctx, t, c, &crd)
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

// ChartPolicy loads the policy file the chart's ConfigMap holds.
func ChartPolicy(t *testing.T, cm *unstructured.Unstructured) *policy.Policy {
	t.Helper()
	data, _, _ := unstructured.NestedString(cm.Object, "data", "policy.yaml")
	pol, err := policy.Load([]byte(data))
	if err != nil {
		t.Fatalf("the policy ConfigMap does not load: %v\n%s", err, data)
	}
	return pol
}

// ChartDir is the chart, relative to the repository root.
const ChartDir = "deploy/helm/wincompat"

// WebhookConfigName is wincompat's Mutating- and ValidatingWebhookConfiguration in deploy/webhook, and
// the chart's for release "wincompat". Its prefix puts it before vpcWebhookConfig in the API server's
// order (deploy/webhook/README.md, "Order among webhooks").
const WebhookConfigName = "0100-wincompat"
