package admissionpolicy

import (
	"bytes"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
)

// renderYAML is what `wincompat policy export` prints for pol but the policies, which are the same for
// every policy and pinned by the chart's file (TestChartAdmissionPoliciesFile): the params and the
// bindings.
func renderYAML(t *testing.T, pol *policy.Policy) []byte {
	t.Helper()
	r := Render(pol, Options{Version: "v0.0.0-golden"})
	objs := []any{&r.Params}
	for i := range r.Bindings {
		objs = append(objs, &r.Bindings[i])
	}
	var b bytes.Buffer
	writeYAMLStream(t, &b, objs)
	return b.Bytes()
}

// writeYAMLStream writes objs as documents of one YAML stream.
func writeYAMLStream(t *testing.T, b *bytes.Buffer, objs []any) {
	t.Helper()
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
}

// The params and bindings of the default policy are pinned (the policies in the chart's file), so that a
// change of the generated CEL is seen in review; the e2e test (test/e2e/engines/admissionpolicy_test.go) proves it on the real API server.
func TestRenderGolden(t *testing.T) {
	checkGenerated(t, filepath.Join("testdata", "default.yaml"), renderYAML(t, policy.Default()), "the default policy's params and bindings are rendered by Render")
}

// One table drives Go and CEL: every row of the strip table is in the CEL of every shape, the pods
// policies read every param (and the templates' those that are not for pods alone), and the policy's
// values reach the params.
func TestRenderFollowsTheTables(t *testing.T) {
	pol, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nnonRootUserName: WinUser\nwindowsNodeTaints: [{key: sku, value: win, effect: NoExecute}, {key: os, value: Windows, effect: NoSchedule}, {key: node.kubernetes.io/os, effect: NoSchedule}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := Render(pol, Options{Version: "v1"})
	// Two per shape (default-os=windows namespaces and the others), and pods twice that (namespaces that
	// enforce Pod Security restricted and the others).
	if want := 2*len(shapes) + 2; len(r.Policies) != want {
		t.Fatalf("%d policies for %d shapes, want %d", len(r.Policies), len(shapes), want)
	}
	podsOnly := []string{paramVersion, paramPodSecurityRestricted, paramUserForRunAsNonRoot, paramMemoryFromRequests, paramDefaultMemoryLimit, paramWindowsNodeTaints, paramGate}
	for _, p := range r.Policies {
		var all strings.Builder
		for _, m := range p.Spec.MatchConditions {
			all.WriteString(m.Expression + "\n")
		}
		for _, v := range p.Spec.Variables {
			all.WriteString(v.Expression + "\n")
		}
		all.WriteString(p.Spec.Mutations[0].JSONPatch.Expression)
		cel := all.String()
		for _, f := range policy.LinuxOnlyFields() {
			if !strings.Contains(cel, ".?"+f.Name) || !strings.Contains(cel, "/"+f.Name+"'") {
				t.Errorf("%s: strip-table row %s is not in the CEL", p.Name, f.Path())
			}
		}
		pod := strings.HasPrefix(p.Name, "wincompat-pods")
		for key := range r.Params.Data {
			// Pod Security restricted's rules are only in the policies of namespaces that enforce it.
			want := pod || !slices.Contains(podsOnly, key)
			if key == paramPodSecurityRestricted {
				want = pod && strings.HasSuffix(p.Name, "-restricted")
			}
			if got := strings.Contains(cel, param(key)); got != want {
				t.Errorf("%s reads params' %s: %v, want %v", p.Name, key, got, want)
			}
		}
	}
	want := map[string]string{paramNonRootUserName: "WinUser", paramWindowsNodeTaints: "sku=win:NoExecute,os=Windows:NoSchedule,node.kubernetes.io/os=:NoSchedule", paramVersion: "v1"}
	for k, v := range want {
		if r.Params.Data[k] != v {
			t.Errorf("params' %s is %q, want %q", k, r.Params.Data[k], v)
		}
	}
	if ref := r.Bindings[0].Spec.ParamRef; ref == nil || ref.Name != r.Params.Name || ref.Namespace != r.Params.Namespace {
		t.Errorf("the bindings read the params at %+v, the params are %s/%s", ref, r.Params.Namespace, r.Params.Name)
	}
}

// The policies change objects, so they are bound exactly where the mode is enforce, reading the
// namespace label as the webhook reads it (policy.ModeFor), whatever the policy's own mode.
func TestBindingsFollowTheMode(t *testing.T) {
	warnByDefault, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nmode: warn\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pol := range []*policy.Policy{policy.Default(), warnByDefault} {
		bindings := Render(pol, Options{Version: "v1"}).Bindings
		for _, label := range []string{"", policy.ModeWarn, policy.ModeEnforce, "Warn", "off"} {
			ns := policy.Namespace{Name: "web", Labels: map[string]string{policy.LabelEnabled: "true", "kubernetes.io/metadata.name": "web"}}
			if label != "" {
				ns.Labels[policy.LabelMode] = label
			}
			mode, _ := pol.ModeFor(ns)
			for _, b := range bindings {
				// Each binding in the namespaces of its own partition (default-os, Pod Security).
				in := labels.Set(maps.Clone(ns.Labels))
				maps.Copy(in, partitionLabels(b.Name))
				sel, err := metav1.LabelSelectorAsSelector(b.Spec.MatchResources.NamespaceSelector)
				if err != nil {
					t.Fatal(err)
				}
				if bound := sel.Matches(in); bound != (mode == policy.ModeEnforce) {
					t.Errorf("policy mode %s, label %q: %s bound %v, but the mode there is %s", pol.Mode, label, b.Name, bound, mode)
				}
			}
		}
	}
}

// Every opted-in namespace, whatever its default-os and Pod Security labels, is selected by exactly one
// binding of each shape: the policies of one shape split the namespaces, never overlap or leave a gap.
func TestBindingsPartitionTheNamespaces(t *testing.T) {
	bindings := Render(policy.Default(), Options{Version: "v1"}).Bindings
	for _, defaultOS := range []string{"", "windows", "linux"} {
		for _, enforce := range []string{"", "restricted", "baseline", "privileged"} {
			ns := labels.Set{policy.LabelEnabled: "true", "kubernetes.io/metadata.name": "web"}
			if defaultOS != "" {
				ns[policy.LabelDefaultOS] = defaultOS
			}
			if enforce != "" {
				ns[policy.LabelPodSecurityEnforce] = enforce
			}
			for _, s := range shapes {
				var selected []string
				for _, b := range bindings {
					if b.Name != "wincompat-"+s.name && !strings.HasPrefix(b.Name, "wincompat-"+s.name+"-") {
						continue
					}
					sel, err := metav1.LabelSelectorAsSelector(b.Spec.MatchResources.NamespaceSelector)
					if err != nil {
						t.Fatal(err)
					}
					if sel.Matches(ns) {
						selected = append(selected, b.Name)
					}
				}
				if len(selected) != 1 {
					t.Errorf("%s objects in a namespace labelled %v: selected by %v, want exactly one binding", s.name, ns, selected)
				}
			}
		}
	}
}

// chartPoliciesFile is where the chart keeps the policies it installs (templates/admissionpolicies.yaml
// adds its labels to each).
var chartPoliciesFile = filepath.Join("..", "..", "deploy", "helm", "wincompat", "files", "admissionpolicies.yaml")

// chartPoliciesYAML is what the chart's file must hold: Policies, without the labels the chart sets.
func chartPoliciesYAML(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("# Generated from policy/admissionpolicy (Policies): do not edit, run UPDATE_GOLDEN=1 go test ./policy/admissionpolicy.\n")
	var objs []any
	for _, p := range Policies() {
		p.Labels = nil
		objs = append(objs, &p)
	}
	writeYAMLStream(t, &b, objs)
	return b.Bytes()
}

// The chart installs the policies the Go code renders: its file is rewritten by UPDATE_GOLDEN=1 and
// this fails while it is stale.
func TestChartAdmissionPoliciesFile(t *testing.T) {
	checkGenerated(t, chartPoliciesFile, chartPoliciesYAML(t), "the chart's policies are rendered by Policies")
}
