package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// chartPodPath is the Windows chart pod of `make perf` (test/lab/perf ChartPod(2), in namespace perf),
// which test/lab/perf's TestChartPodTestdata keeps equal to it.
var chartPodPath = filepath.Join("testdata", "chartpod.json")

// TestAdmissionPolicyRuntimeCost reports what the default wincompat-pods policy costs at admission for
// the chart pod of `make perf`: each expression evaluated once, in order, with the API server's
// runtime cost tracking (the environment's program options: library.CostEstimator under strict cost,
// presence tests free), variables evaluated once each as the API server's composition does. The
// estimate (TestAdmissionPolicyCostBudget) is a worst case; this is one real pod, the one the perf
// figures are measured with. runtimePodBudget holds the sum.
func TestAdmissionPolicyRuntimeCost(t *testing.T) {
	raw, pod := readChartPod(t)
	policies, params := renderedForEvaluation(t, policy.Default())
	p := policies[0]
	if p.Name != "wincompat-pods" {
		t.Fatalf("the first policy is %s", p.Name)
	}
	namespace := perfNamespace()
	exprs := mutatingPolicyExpressions(p)
	for i, r := range compileAll(t, exprs) {
		if r.err != nil {
			t.Fatalf("%s: %v", exprs[i].where, r.err)
		}
	}
	c := newAdmissionCompiler(t)
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "expression\tcost\t\n")
	each := func(expression string, cost uint64) { fmt.Fprintf(w, "%s\t%d\t\n", expression, cost) }
	compiled := compilePolicy(t, c, p, params)
	ev := compiled.evaluate(t, "the chart pod", pod, namespace, each)
	if !ev.matched || !ev.changes {
		t.Fatalf("%s does not run on the chart pod: matchConditions %v, changes %v", p.Name, ev.matched, ev.changes)
	}
	total := ev.cost
	fmt.Fprintf(w, "total\t%d\t\n", total)
	// The API server reinvokes the policy on what its patch made (it changed the object, and its
	// reinvocationPolicy is IfNeeded): there the matchConditions alone run, and changes turns it away.
	again := compiled.evaluate(t, "the patched chart pod", applyOps(t, "the chart pod", pod, ev.patch), namespace, nil)
	if again.changes {
		t.Errorf("%s: changes is true for the patched chart pod: the reinvocation would run the policy again", p.Name)
	}
	fmt.Fprintf(w, "reinvoked: matchConditions\t%d\t\n", again.cost)
	w.Flush()
	t.Logf("%s for the chart pod of make perf (budget %d):\n%s", p.Name, runtimePodBudget, b.String())
	if len(ev.patch) < 20 {
		t.Errorf("the patch for the chart pod: %v", ev.patch)
	}
	if total > runtimePodBudget {
		t.Errorf("%s costs %d for the chart pod, over the budget of %d", p.Name, total, runtimePodBudget)
	}
	// The record it writes is the webhook's for the same changes, byte for byte: the Go decision's but
	// for what needs the cluster or a warning (the build, the readiness checks), the old value of a list
	// or an object, which CEL cannot render, not kept (policy.FromNotKept).
	var typed corev1.Pod
	if err := json.Unmarshal(raw, &typed); err != nil {
		t.Fatal(err)
	}
	d, err := policy.Default().Decide(&typed, policy.Facts{Operation: policy.Create, Version: "v1.2.3",
		Namespace: policy.Namespace{Name: "perf", Labels: map[string]string{policy.LabelEnabled: "true"}}})
	if err != nil {
		t.Fatal(err)
	}
	var shared []policy.Change
	for _, c := range d.Changes {
		if c.Action == policy.Warn || c.Rule == policy.RuleBuild {
			continue
		}
		shared = append(shared, policy.AsRecordedInCEL(c))
	}
	if got, want := fmt.Sprint(ev.variables["record"]), policy.EncodeChanges(shared); got != want {
		t.Errorf("the admission policy records\n %s\nthe webhook, for the same changes,\n %s", got, want)
	}
}

// runtimePodBudget: the default wincompat-pods policy's runtime cost for the chart pod, all
// expressions together: 6,503 (2026-11-28, with the scheduling gate: 6,335 without it; 6,312 with the
// branches for records of versions 1 and 2; 6,253 before the patch added the wincompat.io/os label, 5,211
// when the policy's values were rendered into the CEL), of which the record (records and record) is
// 1,475, the strip table's removals 1,122, the taints read from the params 87 and the patch 2,672.
const runtimePodBudget = 9_000

// intsAsInt64 turns encoding/json's float64 numbers into int64 where they are whole, as the API
// server's unstructured objects hold them.
func intsAsInt64(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = intsAsInt64(x)
		}
	case []any:
		for i, x := range v {
			v[i] = intsAsInt64(x)
		}
	case float64:
		if v == float64(int64(v)) {
			return int64(v)
		}
	}
	return v
}

// readChartPod reads the chart pod of make perf, raw and as the API server's unstructured objects hold it.
// perfNamespace is the namespace object of the chart pod of `make perf`: opted in, nothing else.
func perfNamespace() map[string]any {
	return map[string]any{"metadata": map[string]any{"name": "perf", "labels": map[string]any{policy.LabelEnabled: "true"}}}
}

// chartPodPolicy is the default wincompat-pods policy compiled as the API server compiles it, with the
// chart pod of `make perf` and its namespace, for the benchmarks of what the API server evaluates.
func chartPodPolicy(tb testing.TB) (p *compiledPolicy, pod, namespace map[string]any) {
	tb.Helper()
	_, pod = readChartPod(tb)
	policies, params := renderedForEvaluation(tb, policy.Default())
	if policies[0].Name != "wincompat-pods" {
		tb.Fatalf("the first policy is %s", policies[0].Name)
	}
	return compilePolicy(tb, newAdmissionCompiler(tb), policies[0], params), pod, perfNamespace()
}

func readChartPod(t testing.TB) ([]byte, map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(chartPodPath)
	if err != nil {
		t.Fatal(err)
	}
	var pod map[string]any
	if err := json.Unmarshal(raw, &pod); err != nil {
		t.Fatal(err)
	}
	return raw, intsAsInt64(pod).(map[string]any)
}
