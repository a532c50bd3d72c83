package releases

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
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
	"github.com/wincompat/wincompat/policy/readmetest"
	"github.com/wincompat/wincompat/policy/truncate"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/striptable"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// Issue 30: the strip table proved against the API server's own validation, version by version.
//
// Every leaf field of the pod spec the API server serves (its OpenAPI v3 schema, walked by
// test/striptable), with each value of a boolean or an enum, is set alone on a pod. A probe is valid
// when the API server admits it for Linux (or, for fields Linux pods may not carry, with no OS). A valid
// probe the API server refuses for a Windows pod must be admitted once wincompat rewrote it; a row of
// the strip table no probe shows refused at this version, with the gates that touch pod validation on
// or off, is a field wincompat removes for nothing. What was found is kept per version in
// testdata/striptable/<version>.json (UPDATE_GOLDEN=1 rewrites it), from which test/k8s/README.md's
// compatibility table is made (TestStripTableDocs).

// gateSets are the feature-gate settings each version is probed with: its defaults, and every alpha and
// beta gate on, so that a refusal behind a gate is known before the gate is on by default. Every API is
// served with them, as Kubernetes' own alpha-feature test jobs do: some alpha gates (StorageVersionAPI)
// keep the API server from becoming ready without their API.
var gateSets = []struct {
	name  string
	flags []controlplane.Option
}{
	{striptable.GatesDefault, nil},
	{striptable.GatesAll, []controlplane.Option{
		controlplane.WithAPIServerFlag("feature-gates", "AllAlpha=true,AllBeta=true"),
		controlplane.WithAPIServerFlag("runtime-config", "api/all=true"),
	}},
}

const striptableDir = "testdata/striptable"

// grouped keeps one entry per field and outcome, its values joined, so that the report reads as fields.
func grouped(rs []striptable.Refusal) []striptable.Refusal {
	var out []striptable.Refusal
	for _, r := range rs {
		i := slices.IndexFunc(out, func(o striptable.Refusal) bool { return o.Field == r.Field && o.Handled == r.Handled })
		if i < 0 {
			out = append(out, striptable.Refusal{Field: r.Field, Values: r.Value, Handled: r.Handled})
			continue
		}
		out[i].Values += " " + r.Value
	}
	return out
}

func TestStripTableProbe(t *testing.T) {
	version := e2eutil.ReleaseUnderTest(t)
	report := striptable.Report{Version: version, Probes: map[string]int{}, Refused: map[string][]striptable.Refusal{}, Unprobed: map[string]string{}}
	var fieldsServed []string
	unprobed := map[string]bool{}
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
			unprobed[k] = true
		}
		for k, field := range res.ephemeralForbidden {
			if !slices.Contains(report.EphemeralForbidden, field) {
				report.EphemeralForbidden = append(report.EphemeralForbidden, field)
			}
			unprobed[k] = true
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
			refused = refused || slices.ContainsFunc(rs, func(r striptable.Refusal) bool { return under(r.Field, path) })
		}
		if served && !refused {
			t.Errorf("%s: wincompat strips %s, which the API server admits on a Windows pod with every gate setting probed", version, path)
		}
	}
	upstream, err := striptable.UpstreamOSSpecific(version)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(report.EphemeralForbidden)
	report.Upstream = crossCheck(t, version, upstream, fieldsServed, unprobed, report)
	got, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	// The version names the golden: one report per release, compared on that release's API server.
	e2eutil.CompareGolden(t, filepath.Join(striptableDir, version+".json"), got, "TestStripTableProbe with "+controlplane.VersionEnv+"="+version)
}

// crossCheck compares the probe's findings with the fields upstream lists as OS-specific. A listed field
// the walk does not reach, or reaches with no valid value, fails: the probe must cover at least what
// Kubernetes itself knows to be OS-specific.
func crossCheck(t *testing.T, version string, upstream, fieldsServed []string, unprobed map[string]bool, report striptable.Report) striptable.UpstreamCrossCheck {
	t.Helper()
	var refused []string
	for _, rs := range report.Refused {
		for _, r := range rs {
			refused = append(refused, r.Field)
		}
	}
	cc := striptable.UpstreamCrossCheck{OSSpecific: len(upstream), AdmittedForWindows: []string{}, RefusedNotListed: []string{}, Skipped: map[string]string{}}
	for _, field := range upstream {
		if skip, why := skippedPart(field); skip != "" {
			cc.Skipped[field] = why
			continue
		}
		served, probed := false, false
		for _, p := range fieldsServed {
			if under(p, field) {
				served, probed = true, probed || !unprobed[p]
			}
		}
		switch {
		case !served:
			t.Errorf("%s: TestValidateOSFields lists %s as OS-specific, and no field this API server serves is under it: the walk (test/striptable) or the name's translation (upstream.go) misses it", version, field)
		case !probed:
			t.Errorf("%s: TestValidateOSFields lists %s as OS-specific, and the walk gives none of its fields a value valid for Linux: give it one in test/striptable", version, field)
		case !slices.ContainsFunc(refused, func(r string) bool { return under(r, field) }):
			cc.AdmittedForWindows = append(cc.AdmittedForWindows, field)
		}
	}
	for _, r := range refused {
		listed := slices.ContainsFunc(upstream, func(f string) bool { return under(r, f) })
		if !listed && !slices.Contains(cc.RefusedNotListed, r) {
			cc.RefusedNotListed = append(cc.RefusedNotListed, r)
		}
	}
	slices.Sort(cc.AdmittedForWindows)
	slices.Sort(cc.RefusedNotListed)
	return cc
}

// skippedPart returns the part of the pod spec the walk leaves out that field is under, and why.
func skippedPart(field string) (string, string) {
	for part, why := range striptable.Skipped() {
		if under(field, part) {
			return part, why
		}
	}
	return "", ""
}

// striptableField is a strip-table row's field as a probe path.
func striptableField(f policy.LinuxOnlyField) string {
	if f.Level == policy.ContainerSecurityContextLevel {
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
	e2eutil.Create(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace}})
	// No controller creates ServiceAccounts here; the probes name the default one and "probe".
	for _, sa := range []string{"default", "probe"} {
		e2eutil.Create(ctx, t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: probeNamespace}})
	}
	e2eutil.Create(ctx, t, c, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Handler: "probe"})
	e2eutil.Create(ctx, t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Value: 1})
	// The pods ephemeral container probes are added to: stored, as a debugger finds them.
	for _, os := range []string{"linux", "", "windows"} {
		pod := &unstructured.Unstructured{}
		if err := pod.UnmarshalJSON(fieldProbePod(striptable.Probe{Path: "spec.ephemeralContainers"}, os)); err != nil {
			t.Fatal(err)
		}
		e2eutil.Create(ctx, t, c, pod)
	}

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

// ephemeralForbidden is how the API server refuses a field no ephemeral container may carry.
var ephemeralForbidden = regexp.MustCompile(`spec\.ephemeralContainers\[0\]\.([^ :]+): Forbidden: cannot be set for an Ephemeral Container`)

// ephemeralHost names the pod, one per operating system, that ephemeral container probes are added to.
func ephemeralHost(os string) string {
	if os == "" {
		return "probe-no-os"
	}
	return "probe-" + os
}

type probeResults struct {
	refused  []striptable.Refusal
	unprobed map[string]string
	// ephemeralForbidden maps the paths of probes refused in any ephemeral container to the field
	// refused.
	ephemeralForbidden map[string]string
	messages           map[string]string // field=value: the Windows pod's refusal
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
		unprobed           string
		ephemeralForbidden string
		refused            *striptable.Refusal
		message            string
		err                error
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
				linux := probeSend(ctx, c, p, fieldProbePod(p, "linux"))
				if linux != nil {
					if errNoOS := probeSend(ctx, c, p, fieldProbePod(p, "")); errNoOS != nil {
						o.unprobed = firstLine(linux.Error())
						if m := ephemeralForbidden.FindStringSubmatch(o.unprobed); p.Ephemeral() && m != nil {
							o.ephemeralForbidden = "spec.ephemeralContainers[*]." + strings.ReplaceAll(m[1], "[0]", "[*]")
						}
						continue
					}
				}
				raw := fieldProbePod(p, "windows")
				win := probeSend(ctx, c, p, raw)
				if win == nil {
					continue
				}
				r := striptable.Refusal{Field: p.Path, Value: p.Value}
				o.message = firstLine(win.Error())
				f := facts
				if p.Ephemeral() {
					f.Operation = policy.Update
				}
				mutated, err := e2eutil.Mutate(policy.Default(), raw, f)
				if err != nil {
					o.err = fmt.Errorf("%s=%s: wincompat: %w", p.Path, p.Value, err)
					continue
				}
				r.Handled = probeSend(ctx, c, p, mutated) == nil
				o.refused = &r
			}
		})
	}
	wg.Wait()
	res := probeResults{unprobed: map[string]string{}, ephemeralForbidden: map[string]string{}, messages: map[string]string{}}
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
		case o.ephemeralForbidden != "":
			res.ephemeralForbidden[probes[i].Path] = o.ephemeralForbidden
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
	name := "probe"
	if os != "" {
		spec["os"] = map[string]any{"name": os}
	}
	if p.Ephemeral() {
		name = ephemeralHost(os)
	}
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": probeNamespace},
		"spec":     spec,
	})
	return raw
}

// probeSend dry-runs a probe's pod with strict field validation (a field this API server does not know is
// an error, not silently dropped), as the API server receives it: created, or for an ephemeral
// container's field, added to the existing pod through its ephemeralcontainers subresource (where the
// API server takes only the ephemeral containers from the body).
func probeSend(ctx context.Context, c client.Client, p striptable.Probe, raw []byte) error {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return err
	}
	if p.Ephemeral() {
		return c.SubResource("ephemeralcontainers").Update(ctx, obj, client.DryRunAll, client.FieldValidation("Strict"))
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
	return truncate.AtRune(s, 160)
}

// TestStripTableDocs: test/k8s/README.md's table of what each version refuses on a Windows pod and
// wincompat rewrites is made from testdata/striptable, one column per version probed (UPDATE_GOLDEN=1 rewrites it).
func TestStripTableDocs(t *testing.T) {
	reports, err := striptable.ReadReports(striptableDir)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(reports, func(a, b striptable.Report) int { return semverCompare(a.Version, b.Version) })
	table := versionsTable(reports)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readmetest.Check(t, filepath.Join(root, "test", "k8s", "README.md"), "<!-- versions:begin -->\n", "<!-- versions:end -->", table,
		"UPDATE_GOLDEN=1 go test ./e2e/releases -run TestStripTableDocs (in test/)")
}

// versionsTable renders one row per rule (a strip-table row, or the field when it is not one: the
// fields of every kind of container together) and one column per version: refused by default,
// only with alpha or beta gates on, or not at all.
func versionsTable(reports []striptable.Report) string {
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
				if gates == striptable.GatesDefault {
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
	for _, list := range []string{"spec.initContainers[*].", "spec.ephemeralContainers[*]."} {
		field = strings.Replace(field, list, "spec.containers[*].", 1)
	}
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
