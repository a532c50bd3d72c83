package admissionpolicy

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
)

// render is what `wincompat policy export` prints for pol.
func renderYAML(t *testing.T, pol *policy.Policy) []byte {
	t.Helper()
	policies, bindings := Render(pol, Options{Version: "v0.0.0-golden"})
	var b bytes.Buffer
	for i := range policies {
		for _, o := range []any{&policies[i], &bindings[i]} {
			y, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString("---\n")
			b.Write(y)
		}
	}
	return b.Bytes()
}

// The rendered policies of the default policy are pinned, so that a change of the generated CEL is
// seen in review; the e2e test (test/e2e/admissionpolicy_test.go) proves it on the real API server.
func TestRenderGolden(t *testing.T) {
	got := renderYAML(t, policy.Default())
	path := filepath.Join("testdata", "default.yaml")
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale; run UPDATE_GOLDEN=1 go test ./policy/admissionpolicy and review the diff", path)
	}
}

// One table drives Go and CEL: every row of the strip table is in the CEL of every shape, and the
// policy's values reach it.
func TestRenderFollowsTheTables(t *testing.T) {
	pol, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nnonRootUserName: WinUser\nwindowsNodeTaints: [{key: sku, value: win, effect: NoExecute}, {key: os, value: Windows, effect: NoSchedule}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	policies, _ := Render(pol, Options{Version: "v1"})
	// Two per shape (default-os=windows namespaces and the others), and pods twice that (namespaces that
	// enforce Pod Security restricted and the others).
	if want := 2*len(shapes) + 2; len(policies) != want {
		t.Fatalf("%d policies for %d shapes, want %d", len(policies), len(shapes), want)
	}
	for _, p := range policies {
		var all strings.Builder
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
		if !strings.Contains(cel, "'WinUser'") {
			t.Errorf("%s: nonRootUserName is not in the CEL", p.Name)
		}
		pod := strings.HasPrefix(p.Name, "wincompat-pods")
		if got := strings.Contains(cel, "t.key == 'sku'") && strings.Contains(cel, "'NoExecute'") && strings.Contains(cel, "'Windows'"); got != pod {
			t.Errorf("%s: the policy's taints in the CEL: %v, want %v (pods only)", p.Name, got, pod)
		}
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
		_, bindings := Render(pol, Options{Version: "v1"})
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

// The rewrites that narrow reach the pods' CEL exactly when the policy turns them on, and never a
// template's: templates keep their spec in both engines.
func TestRenderNarrowsOnlyWhenAsked(t *testing.T) {
	on, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nuserForRunAsNonRoot: true\nmemoryLimits: {fromRequests: true, default: 0.5Gi}\n"))
	if err != nil {
		t.Fatal(err)
	}
	marks := []string{"nonRootUserAt", "'512Mi'", "'/resources/limits/memory'", value(string(policy.RuleMemoryLimitFromRequest)).cel}
	for name, pol := range map[string]*policy.Policy{"off": policy.Default(), "on": on} {
		policies, _ := Render(pol, Options{Version: "v1"})
		for _, p := range policies {
			var all strings.Builder
			for _, v := range p.Spec.Variables {
				all.WriteString(v.Expression + "\n")
			}
			all.WriteString(p.Spec.Mutations[0].JSONPatch.Expression)
			want := name == "on" && strings.HasPrefix(p.Name, "wincompat-pods")
			for _, m := range marks {
				if got := strings.Contains(all.String(), m); got != want {
					t.Errorf("policy %s, %s: %s in the CEL: %v, want %v", name, p.Name, m, got, want)
				}
			}
		}
	}
}

// Every opted-in namespace, whatever its default-os and Pod Security labels, is selected by exactly one
// binding of each shape: the policies of one shape split the namespaces, never overlap or leave a gap.
func TestBindingsPartitionTheNamespaces(t *testing.T) {
	_, bindings := Render(policy.Default(), Options{Version: "v1"})
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
