package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/striptable"
)

// Issue 30: the strip table proved against the API server's own validation, version by version.
//
// Every leaf field of the pod spec the API server serves (its OpenAPI v3 schema, walked by
// test/striptable), with each value of a boolean or an enum, is set alone on a pod. A probe is valid
// when the API server admits it for Linux (or, for fields Linux pods may not carry, with no OS). A valid
// probe the API server refuses for a Windows pod must be admitted once wincompat rewrote it; a row of
// the strip table no probe shows refused at this version, with the gates that touch pod validation on
// or off, is a field wincompat removes for nothing. What was found is kept per version in
// testdata/striptable/<version>.json (UPDATE_GOLDEN=1 rewrites it), from which the README's
// compatibility table is made (TestStripTableDocs).

// gateSets are the feature-gate settings each version is probed with: its defaults, and every alpha and
// beta gate on, so that a refusal behind a gate is known before the gate is on by default. Every API is
// served with them, as Kubernetes' own alpha-feature test jobs do: some alpha gates (StorageVersionAPI)
// keep the API server from becoming ready without their API.
var gateSets = []struct {
	name  string
	flags []controlplane.Option
}{
	{"default", nil},
	{"all alpha and beta", []controlplane.Option{
		controlplane.WithAPIServerFlag("feature-gates", "AllAlpha=true,AllBeta=true"),
		controlplane.WithAPIServerFlag("runtime-config", "api/all=true"),
	}},
}

const striptableDir = "testdata/striptable"

// probeReport is what one version's API server said, as kept in testdata/striptable.
type probeReport struct {
	Version string `json:"version"`
	// Probes counts the probes sent per gate setting.
	Probes map[string]int `json:"probes"`
	// Refused lists, per gate setting, the probes the API server refused for Windows and admitted for
	// Linux: each must be handled by wincompat.
	Refused map[string][]probeRefusal `json:"refused"`
	// Unprobed are the fields whose probes the API server refused for Linux and with no OS too, with the
	// first refusal: their values prove nothing about Windows. A reviewer reads them for fields the walk
	// should give a better value.
	Unprobed map[string]string `json:"unprobed"`
}

type probeRefusal struct {
	Field   string `json:"field"`
	Value   string `json:"-"`
	Values  string `json:"values"` // the values refused, joined by spaces
	Handled bool   `json:"handledByWincompat"`
}

// grouped keeps one entry per field and outcome, its values joined, so that the report reads as fields.
func grouped(rs []probeRefusal) []probeRefusal {
	var out []probeRefusal
	for _, r := range rs {
		i := slices.IndexFunc(out, func(o probeRefusal) bool { return o.Field == r.Field && o.Handled == r.Handled })
		if i < 0 {
			out = append(out, probeRefusal{Field: r.Field, Values: r.Value, Handled: r.Handled})
			continue
		}
		out[i].Values += " " + r.Value
	}
	return out
}

func TestStripTableProbe(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	version, err := controlplane.Version(root)
	if err != nil {
		t.Fatal(err)
	}
	report := probeReport{Version: version, Probes: map[string]int{}, Refused: map[string][]probeRefusal{}, Unprobed: map[string]string{}}
	var fieldsServed []string
	for _, gates := range gateSets {
		cp := controlplane.LaunchBare(t, gates.flags...)
		probes := probeCluster(t, cp.Config, cp.Client)
		res := runProbes(t, cp.Config, probes)
		report.Probes[gates.name] = len(probes)
		report.Refused[gates.name] = grouped(res.refused)
		for k, v := range res.unprobed {
			if _, ok := report.Unprobed[k]; !ok {
				report.Unprobed[k] = v
			}
		}
		for _, p := range probes {
			fieldsServed = append(fieldsServed, p.Path)
		}
		for _, r := range res.refused {
			if !r.Handled {
				t.Errorf("%s, %s gates: the API server refuses %s=%s on a Windows pod and wincompat does not rewrite it: %s",
					version, gates.name, r.Field, r.Value, res.messages[r.Field+"="+r.Value])
			}
		}
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	}
	// A row of the strip table whose field this version serves must be refused under one gate setting.
	for _, f := range policy.LinuxOnlyFields() {
		path := striptableField(f)
		served := slices.ContainsFunc(fieldsServed, func(p string) bool { return under(p, path) })
		refused := false
		for _, rs := range report.Refused {
			refused = refused || slices.ContainsFunc(rs, func(r probeRefusal) bool { return under(r.Field, path) })
		}
		if served && !refused {
			t.Errorf("%s: wincompat strips %s, which the API server admits on a Windows pod with every gate setting probed", version, path)
		}
	}
	got, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	// The version names the golden: one report per release, compared on that release's API server.
	compareGolden(t, filepath.Join(striptableDir, version+".json"), got, "TestStripTableProbe with "+controlplane.VersionEnv+"="+version)
}

// striptableField is a strip-table row's field as a probe path.
func striptableField(f policy.LinuxOnlyField) string {
	if f.Scope == policy.ContainerSecurityContextScope {
		return "spec." + f.Path()
	}
	return f.Path()
}

// under reports whether probe path p is field or one of its subfields.
func under(p, field string) bool {
	return p == field || strings.HasPrefix(p, field+".") || strings.HasPrefix(p, field+"[")
}

// probeCluster prepares what the probes' pods refer to and returns the probes the API server's own pod
// schema yields.
func probeCluster(t *testing.T, cfg *rest.Config, c client.Client) []striptable.Probe {
	t.Helper()
	ctx := context.Background()
	create(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace}})
	// No controller creates ServiceAccounts here; the probes name the default one and "probe".
	for _, sa := range []string{"default", "probe"} {
		create(ctx, t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: probeNamespace}})
	}
	create(ctx, t, c, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Handler: "probe"})
	create(ctx, t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Value: 1})

	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + "/openapi/v3/api/v1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc striptable.Document
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	probes, err := striptable.Probes(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return probes
}

const probeNamespace = "probe"

type probeResults struct {
	refused  []probeRefusal
	unprobed map[string]string
	messages map[string]string // field=value: the Windows probeRefusal
}

// runProbes sends every probe as a Linux pod, a Windows pod and, when refused for Windows, as wincompat
// rewrites that Windows pod: dry runs, strict field validation.
func runProbes(t *testing.T, cfg *rest.Config, probes []striptable.Probe) probeResults {
	t.Helper()
	rc := rest.CopyConfig(cfg)
	rc.QPS, rc.Burst = -1, 0
	rc.WarningHandler = rest.NoWarnings{}
	c, err := client.New(rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	facts := policy.Facts{Operation: policy.Create, Namespace: policy.Namespace{Name: probeNamespace, Labels: map[string]string{policy.LabelEnabled: "true"}}}
	ctx := context.Background()
	type outcome struct {
		unprobed string
		refused  *probeRefusal
		message  string
		err      error
	}
	outcomes := make([]outcome, len(probes))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(probes) {
					return
				}
				p := probes[i]
				o := &outcomes[i]
				linux := probeCreate(ctx, c, fieldProbePod(p, "linux"))
				if linux != nil {
					if errNoOS := probeCreate(ctx, c, fieldProbePod(p, "")); errNoOS != nil {
						o.unprobed = firstLine(linux.Error())
						continue
					}
				}
				raw := fieldProbePod(p, "windows")
				win := probeCreate(ctx, c, raw)
				if win == nil {
					continue
				}
				r := probeRefusal{Field: p.Path, Value: p.Value}
				o.message = firstLine(win.Error())
				mutated, err := mutate(policy.Default(), raw, facts)
				if err != nil {
					o.err = fmt.Errorf("%s=%s: wincompat: %w", p.Path, p.Value, err)
					continue
				}
				r.Handled = probeCreate(ctx, c, mutated) == nil
				o.refused = &r
			}
		})
	}
	wg.Wait()
	res := probeResults{unprobed: map[string]string{}, messages: map[string]string{}}
	// A path is unprobed when none of its values was valid for Linux.
	probed := map[string]bool{}
	for i, o := range outcomes {
		if o.unprobed == "" {
			probed[probes[i].Path] = true
		}
	}
	for i, o := range outcomes {
		switch {
		case o.err != nil:
			t.Error(o.err)
		case o.unprobed != "":
			if _, ok := res.unprobed[probes[i].Path]; !ok && !probed[probes[i].Path] {
				res.unprobed[probes[i].Path] = probes[i].Value + ": " + o.unprobed
			}
		case o.refused != nil:
			res.refused = append(res.refused, *o.refused)
			res.messages[o.refused.Field+"="+o.refused.Value] = o.message
		}
	}
	return res
}

// fieldProbePod is a minimal valid pod with the probe's field set, for os ("" for none), as JSON.
func fieldProbePod(p striptable.Probe, os string) []byte {
	spec := map[string]any{"containers": []any{map[string]any{"name": "c", "image": "probe"}}}
	if !strings.HasPrefix(p.Path, "spec.volumes") {
		// A volume for the mounts and file references that name one; a probed volume is the only one.
		spec["volumes"] = []any{map[string]any{"name": "probe", "emptyDir": map[string]any{}}}
	}
	striptable.Merge(spec, p.Spec)
	if os != "" {
		spec["os"] = map[string]any{"name": os}
	}
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "probe", "namespace": probeNamespace},
		"spec":     spec,
	})
	return raw
}

// probeCreate dry-runs raw with strict field validation: a field this API server does not know is an
// error, not silently dropped.
func probeCreate(ctx context.Context, c client.Client, raw []byte) error {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return err
	}
	err := c.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict"))
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	s = strings.TrimPrefix(s, `Pod "probe" is invalid: `)
	return policy.CutAtRune(s, 160)
}

// TestStripTableDocs: the README's table of what each version refuses on a Windows pod and wincompat
// rewrites is made from testdata/striptable, one column per version probed (UPDATE_GOLDEN=1 rewrites it).
func TestStripTableDocs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(striptableDir, "v*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no probe reports in %s: %v", striptableDir, err)
	}
	var reports []probeReport
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r probeReport
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		reports = append(reports, r)
	}
	slices.SortFunc(reports, func(a, b probeReport) int { return semverCompare(a.Version, b.Version) })
	table := versionsTable(reports)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(root, "README.md")
	raw, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- versions:begin -->\n", "<!-- versions:end -->"
	before, rest, ok1 := strings.Cut(string(raw), begin)
	_, after, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("README.md has no %q ... %q section", begin, end)
	}
	if rest[:len(rest)-len(after)-len(end)] == table {
		return
	}
	if updateGolden() {
		if err := os.WriteFile(readme, []byte(before+begin+table+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's table of versions is stale (UPDATE_GOLDEN=1 go test ./e2e -run TestStripTableDocs):\n%s", table)
}

// versionsTable renders one row per rule (a strip-table row, or the field when it is not one: the
// containers' and init containers' fields together) and one column per version: refused by default,
// only with alpha or beta gates on, or not at all.
func versionsTable(reports []probeReport) string {
	type cell struct{ byDefault, gated bool }
	rows := map[string]map[string]*cell{}
	var order []string
	for _, r := range reports {
		for gates, refused := range r.Refused {
			for _, f := range refused {
				key := ruleOfField(f.Field)
				if rows[key] == nil {
					rows[key] = map[string]*cell{}
					order = append(order, key)
				}
				c := rows[key][r.Version]
				if c == nil {
					c = &cell{}
					rows[key][r.Version] = c
				}
				if gates == "default" {
					c.byDefault = true
				} else {
					c.gated = true
				}
			}
		}
	}
	slices.Sort(order)
	var b strings.Builder
	b.WriteString("| refused on a Windows pod, rewritten by wincompat |")
	for _, r := range reports {
		b.WriteString(" " + r.Version + " |")
	}
	b.WriteString("\n| --- |" + strings.Repeat(" :---: |", len(reports)) + "\n")
	for _, key := range order {
		b.WriteString("| `" + key + "` |")
		for _, r := range reports {
			switch c := rows[key][r.Version]; {
			case c == nil:
				b.WriteString(" – |")
			case c.byDefault:
				b.WriteString(" yes |")
			default:
				b.WriteString(" gate |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ruleOfField is the strip-table row a refused field belongs to, as the table's path, or the field itself.
func ruleOfField(field string) string {
	field = strings.Replace(field, "spec.initContainers[*].", "spec.containers[*].", 1)
	for _, f := range policy.LinuxOnlyFields() {
		if under(field, striptableField(f)) {
			return f.Path()
		}
	}
	return strings.TrimPrefix(field, "spec.")
}

// semverCompare orders Kubernetes versions vMAJOR.MINOR.PATCH numerically.
func semverCompare(a, b string) int {
	num := func(v string) []int {
		var out []int
		for _, p := range strings.Split(strings.TrimPrefix(strings.SplitN(v, "-", 2)[0], "v"), ".") {
			n := 0
			fmt.Sscan(p, &n)
			out = append(out, n)
		}
		return out
	}
	return slices.Compare(num(a), num(b))
}
