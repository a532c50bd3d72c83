package operations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// monitoringValues turn on everything the chart ships for Prometheus and Grafana.
const monitoringValues = `
metrics:
  serviceMonitor: {enabled: true}
  prometheusRule: {enabled: true}
  dashboard: {enabled: true}
`

// targetLabels are the labels Prometheus, through the Prometheus operator's ServiceMonitor, adds to every
// series it scrapes from a Service's endpoints: a query may match and group by them on any metric.
var targetLabels = []string{"job", "namespace", "instance", "pod", "service", "endpoint", "container"}

// TestMonitoringQueries: issue 28, item 6. The chart's PrometheusRule and Grafana dashboard ask only for
// what wincompat exports. An in-process `wincompat serve` with what the chart turns on (the policy file,
// the image resolver, RuntimeClass management) answers a few pods through the real API server; its
// /metrics is scraped, and every PromQL expression of the rendered rule and dashboard, parsed with
// Prometheus's own parser, must name wincompat_* series that the scrape has (a histogram's by its
// _bucket, _sum and _count) and match and group by labels those series carry (or the target labels
// Prometheus adds). Every expression selects this release's job and namespace, and every wincompat
// series the scrape has appears on the dashboard. The PrometheusRule's shape is TestHelmChart's: it
// applies it with the Prometheus operator's CRD installed.
func TestMonitoringQueries(t *testing.T) {
	objs := e2eutil.RenderChart(t, e2eutil.ValuesFile(t, monitoringValues))
	queries := monitoringQueries(t, objs)
	var service string
	for _, obj := range objs {
		if obj.GetKind() == "Service" {
			service = obj.GetName()
		}
	}

	exported := scrapeServer(t)
	names := make([]string, 0, len(exported))
	for n := range exported {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("scraped %d wincompat series names: %v", len(names), names)

	used := map[string]bool{}
	for _, q := range queries {
		for _, err := range checkQuery(q.expr, exported) {
			t.Errorf("%s: %v\n\t%s", q.where, err, q.expr)
		}
		for _, err := range checkScope(q.expr, service, e2eutil.OwnNamespace) {
			t.Errorf("%s: %v\n\t%s", q.where, err, q.expr)
		}
		if q.dashboard {
			for _, m := range seriesNames(q.expr) {
				used[m] = true
			}
		}
	}
	// A series wincompat exports that the dashboard never shows is a signal nobody looks at.
	for _, n := range names {
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if !used[n] && !used[family+"_bucket"] && !used[family] {
			t.Errorf("wincompat exports %s, which no dashboard panel shows", n)
		}
	}
}

// TestAlertsHaveRunbooks: every alert the chart renders has its row in the chart README's alert table
// (what fires it, what to do), every row is an alert the chart renders, and a row's link to a runbook
// in the README leads to a heading there.
func TestAlertsHaveRunbooks(t *testing.T) {
	objs := e2eutil.RenderChart(t, e2eutil.ValuesFile(t, monitoringValues))
	rendered := map[string]bool{}
	for _, q := range monitoringQueries(t, objs) {
		if name, ok := strings.CutPrefix(q.where, "alert "); ok {
			rendered[name] = true
		}
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "wincompat", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		if heading, ok := strings.CutPrefix(line, "#"); ok {
			heading = strings.ToLower(strings.TrimSpace(strings.TrimLeft(heading, "#")))
			anchors[strings.Map(func(r rune) rune {
				switch {
				case r == ' ':
					return '-'
				case r == '-' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
					return r
				}
				return -1
			}, heading)] = true
		}
	}
	rows := map[string]bool{}
	row := regexp.MustCompile("^\\| `(Wincompat[A-Za-z]+)` \\|")
	link := regexp.MustCompile(`\]\(#([a-z0-9-]+)\)`)
	for _, line := range strings.Split(string(readme), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows[m[1]] = true
		if !rendered[m[1]] {
			t.Errorf("the README's alert table has %s, which the chart does not render", m[1])
		}
		for _, l := range link.FindAllStringSubmatch(line, -1) {
			if !anchors[l[1]] {
				t.Errorf("%s's row links to #%s, which is no heading of the README", m[1], l[1])
			}
		}
	}
	for name := range rendered {
		if !rows[name] {
			t.Errorf("the chart renders %s, which the README's alert table does not describe", name)
		}
	}
	if len(rendered) == 0 {
		t.Fatal("the chart rendered no alert")
	}
}

// TestMonitoringQueryChecker: the checker catches what it is there to catch (TestMonitoringQueries
// only ever sees queries that pass).
func TestMonitoringQueryChecker(t *testing.T) {
	exported := map[string]map[string]bool{
		"wincompat_admission_total":                   {"resource": true, "operation": true, "result": true, "mode": true},
		"wincompat_admission_duration_seconds_bucket": {"resource": true, "le": true},
		"wincompat_admission_duration_seconds_count":  {"resource": true},
	}
	for _, tc := range []struct {
		expr string
		want string // in the only error; empty: no error
	}{
		{`sum by (result, mode) (rate(wincompat_admission_total{job="w"}[5m]))`, ""},
		{`histogram_quantile(0.99, sum by (le) (rate(wincompat_admission_duration_seconds_bucket[5m]))) > 2`, ""},
		{`absent(up{job="w"} == 1)`, ""},
		{`sum(rate(wincompat_admision_total[5m]))`, "wincompat_admision_total is not exported"},
		{`sum(rate(wincompat_admission_duration_seconds[5m]))`, "wincompat_admission_duration_seconds is not exported"},
		{`sum(rate(wincompat_admission_total{reslt="error"}[5m]))`, `wincompat_admission_total has no label "reslt"`},
		{`sum by (outcome) (rate(wincompat_admission_total[5m]))`, `wincompat_admission_total has no label "outcome"`},
		{`sum without (le) (rate(wincompat_admission_duration_seconds_count[5m]))`, `wincompat_admission_duration_seconds_count has no label "le"`},
		{`sum(rate(wincompat_admission_total[5m])) / on (reason) sum(rate(wincompat_admission_total[5m]))`, `wincompat_admission_total has no label "reason"`},
		{`{__name__="wincompat_admissions_total"}`, "wincompat_admissions_total is not exported"},
		{`sum(rate(wincompat_admission_total[5m])`, "parse error"},
	} {
		errs := checkQuery(tc.expr, exported)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", tc.expr, errs)
		case tc.want != "" && (len(errs) == 0 || !strings.Contains(errors.Join(errs...).Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.expr, errs, tc.want)
		}
	}
	if errs := checkScope(`sum(rate(wincompat_admission_total{job="w",namespace="other"}[5m])) / sum(rate(wincompat_admission_total{job="w"}[5m]))`, "w", "ns"); len(errs) != 2 {
		t.Errorf("a selector of another namespace and one without any: %v, want 2 errors", errs)
	}
}

type monitoringQuery struct {
	where, expr string
	dashboard   bool
}

// monitoringQueries are the expressions of the rendered PrometheusRule's alerts and of the dashboard's
// panels; it fails unless the chart rendered both.
func monitoringQueries(t *testing.T, objs []*unstructured.Unstructured) []monitoringQuery {
	t.Helper()
	var out []monitoringQuery
	var rule, dashboard bool
	for _, obj := range objs {
		switch {
		case obj.GetKind() == "PrometheusRule":
			rule = true
			groups, _, _ := unstructured.NestedSlice(obj.Object, "spec", "groups")
			for _, g := range groups {
				rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, r := range rules {
					r := r.(map[string]any)
					out = append(out, monitoringQuery{where: fmt.Sprintf("alert %v", r["alert"]), expr: fmt.Sprint(r["expr"])})
				}
			}
		case obj.GetKind() == "ConfigMap" && obj.GetLabels()["grafana_dashboard"] == "1":
			dashboard = true
			data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
			for file, content := range data {
				var d struct {
					Panels []struct {
						Title   string
						Targets []struct{ Expr string }
					}
				}
				if err := json.Unmarshal([]byte(content), &d); err != nil {
					t.Fatalf("dashboard %s: %v", file, err)
				}
				for _, p := range d.Panels {
					for _, tg := range p.Targets {
						out = append(out, monitoringQuery{where: fmt.Sprintf("panel %q", p.Title), expr: tg.Expr, dashboard: true})
					}
				}
			}
		}
	}
	if !rule || !dashboard {
		t.Fatalf("the chart rendered a PrometheusRule: %v, a dashboard ConfigMap labelled grafana_dashboard=1: %v; want both", rule, dashboard)
	}
	return out
}

// scrapeServer serves wincompat in-process with what the chart runs (the policy file, the image
// resolver, the RuntimeClass controller), sends it a few Windows pods through the API server, and returns
// the wincompat_* series names its /metrics has, each with its label names.
func scrapeServer(t *testing.T) map[string]map[string]bool {
	t.Helper()
	policyFile := t.TempDir() + "/policy.yaml"
	if err := os.WriteFile(policyFile, []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsAddr := e2eutil.FreeAddr(t)
	cl := e2eutil.StartClusterWith(t, nil, func(o *server.Options) {
		o.MetricsAddr = metricsAddr
		o.PolicyFile, o.PolicyPollInterval = policyFile, 100*time.Millisecond
		o.ManageRuntimeClasses = true
		// No registry answers here: lookups fail fast, which is what gives the failure series values.
		o.Images = &server.ImageOptions{Timeout: 200 * time.Millisecond}
	})
	ctx := context.Background()
	for i, image := range []string{"mcr.microsoft.com/windows/nanoserver:ltsc2022", "127.0.0.1:1/app:1.4.2", "example.invalid/app:10.0.17763.5830"} {
		pod := e2eutil.WindowsPod(e2eutil.ReadyNamespace, fmt.Sprintf("monitored-%d", i))
		pod.Spec.Containers[0].Image = image
		if err := cl.C.Create(ctx, pod); err != nil {
			t.Fatalf("creating a pod of %s: %v", image, err)
		}
	}
	// The policy file's gauges are set when the reloader starts, which may follow the first review.
	var exported map[string]map[string]bool
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		exported, err = scrape("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if exported["wincompat_policy_valid"] != nil || time.Now().After(deadline) {
			return exported
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape reads a /metrics endpoint: the wincompat_* series names, each with its label names; a
// histogram's as Prometheus stores them (_bucket with le, _sum, _count).
func scrape(url string) (map[string]map[string]bool, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	out := map[string]map[string]bool{}
	add := func(name string, m *dto.Metric, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range m.GetLabel() {
			out[name][l.GetName()] = true
		}
		for _, l := range extra {
			out[name][l] = true
		}
	}
	for name, f := range families {
		if !strings.HasPrefix(name, "wincompat_") {
			continue
		}
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out, nil
}

// checkQuery parses expr as Prometheus does and holds it to exported (series name to label names): every
// wincompat_* series it selects must be exported, and every label its selectors match and its
// aggregations and vector matchings (by, without, on, ignoring, group_left/right) name must be on every
// wincompat_* series below them, or be a target label. Series of other names (up) are Prometheus's own.
// Labels are held to the series selected below the clause, not to what inner aggregations leave of
// them: the chart's queries aggregate once.
func checkQuery(expr string, exported map[string]map[string]bool) []error {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return []error{fmt.Errorf("parse error: %w", err)}
	}
	var errs []error
	checkLabels := func(under parser.Node, clause string, names []string) {
		for _, vs := range vectorSelectors(under) {
			name := selectorName(vs)
			have, ok := exported[name]
			if !strings.HasPrefix(name, "wincompat_") || !ok {
				continue // reported below, once
			}
			for _, l := range names {
				if !have[l] && !slices.Contains(targetLabels, l) {
					errs = append(errs, fmt.Errorf("%s: %s has no label %q (it has %v)", clause, name, l, sortedKeys(have)))
				}
			}
		}
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			name := selectorName(n)
			if !strings.HasPrefix(name, "wincompat_") {
				return nil
			}
			if _, ok := exported[name]; !ok {
				errs = append(errs, fmt.Errorf("%s is not exported by wincompat serve", name))
				return nil
			}
			var matched []string
			for _, m := range n.LabelMatchers {
				if m.Name != labels.MetricName {
					matched = append(matched, m.Name)
				}
			}
			checkLabels(n, "matcher", matched)
		case *parser.AggregateExpr:
			checkLabels(n.Expr, n.Op.String(), n.Grouping)
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil {
				checkLabels(n, "vector matching", append(slices.Clone(vm.MatchingLabels), vm.Include...))
			}
		}
		return nil
	})
	return errs
}

// checkScope: every selector of expr matches exactly this release's job and namespace, so that the
// alerts and panels of two releases never mix.
func checkScope(expr, job, namespace string) []error {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, vs := range vectorSelectors(e) {
		want := map[string]string{"job": job, "namespace": namespace}
		for _, m := range vs.LabelMatchers {
			if w, ok := want[m.Name]; ok && m.Type == labels.MatchEqual && m.Value == w {
				delete(want, m.Name)
			}
		}
		if len(want) > 0 {
			errs = append(errs, fmt.Errorf("%s does not select %v", vs, want))
		}
	}
	return errs
}

// seriesNames are the series names expr selects.
func seriesNames(expr string) []string {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil
	}
	var out []string
	for _, vs := range vectorSelectors(e) {
		out = append(out, selectorName(vs))
	}
	return out
}

func vectorSelectors(n parser.Node) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(n, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// selectorName is the series name a selector asks for, written before the braces or as __name__="...".
func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
