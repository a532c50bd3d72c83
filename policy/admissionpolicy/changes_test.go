package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"google.golang.org/protobuf/types/known/structpb"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/mutation"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
)

// TestPodChangesConditionIsExact: the pods policies' changes matchCondition (podChanges) is false
// exactly when the policy's patch is empty, for every pods policy of every rendering and every Windows
// pod of the webhook's golden cases and the chart pod of make perf, as the API server evaluates it: the
// matchConditions without a namespace, the variables and the patch with one whose labels the policy's
// binding selects. On what the patch makes of the pod it is false (the reinvocation after the policy's
// own change costs nothing more) and the patch would be empty (nothing is lost by skipping it).
func TestPodChangesConditionIsExact(t *testing.T) {
	pods := goldenPods(t)
	c := newAdmissionCompiler(t)
	renderings := policiesShipped(t)
	checked, changed := 0, 0
	for _, name := range slices.Sorted(maps.Keys(renderings)) {
		policies, params := renderedForEvaluation(t, renderings[name])
		for _, p := range policies {
			if !strings.HasPrefix(p.Name, "wincompat-pods") {
				continue
			}
			e := compilePolicy(t, c, p, params)
			ns := map[string]any{"metadata": map[string]any{"name": "web", "labels": bindingLabels(p.Name)}}
			var all []namedPod
			for _, pod := range pods {
				// Each pod twice: as created, and with the marker already there, as the second pass
				// sees a pod when a webhook between the two changed it (here: undid everything).
				marked := deepCopyJSON(t, pod.obj).(map[string]any)
				meta := marked["metadata"].(map[string]any)
				ann, _ := meta["annotations"].(map[string]any)
				if ann == nil {
					ann = map[string]any{}
				}
				ann[policy.AnnotationAdmissionPolicy] = "v1.2.3"
				meta["annotations"] = ann
				all = append(all, pod, namedPod{pod.name + ", marked", marked})
			}
			for _, pod := range all {
				where := fmt.Sprintf("%s, %s, %s", name, p.Name, pod.name)
				first := e.evaluate(t, where, pod.obj, ns, nil)
				if !first.matched {
					continue
				}
				checked++
				if first.changes != (len(first.patch) > 0) {
					t.Errorf("%s: the changes matchCondition is %v, the patch has %d operations", where, first.changes, len(first.patch))
				}
				if len(first.patch) == 0 {
					continue
				}
				changed++
				again := e.evaluate(t, where+", patched", applyOps(t, where, pod.obj, first.patch), ns, nil)
				if again.changes || len(again.patch) > 0 {
					t.Errorf("%s: after the patch, the changes matchCondition is %v and the patch %v", where, again.changes, again.patch)
				}
			}
		}
	}
	if checked < 100 || changed < checked/2 {
		t.Fatalf("checked %d Windows pods, %d with a patch: the golden cases are not what this test expects", checked, changed)
	}
	// Each patched pod was checked again: changes false, and an empty patch.
	t.Logf("%d pods through a pods policy (half of them with the marker already), %d with a patch and checked again once patched", checked, changed)
}

// TestPodChangesConditionNeedsNoNamespace: matchConditions get no namespaceObject from the API server
// (README.md), so the pods policies' conditions must not read it; the restricted rules' namespace label
// is their binding's.
func TestPodChangesConditionNeedsNoNamespace(t *testing.T) {
	for name, pol := range policiesShipped(t) {
		for _, p := range Render(pol, Options{Version: "v1"}).Policies {
			for _, m := range p.Spec.MatchConditions {
				if strings.Contains(m.Expression, "namespaceObject") {
					t.Errorf("%s, %s: matchCondition %s reads namespaceObject", name, p.Name, m.Name)
				}
			}
		}
	}
}

// bindingLabels are the labels of an opted-in namespace web that the binding of the policy named name
// selects.
func bindingLabels(name string) map[string]any {
	l := map[string]any{policy.LabelEnabled: "true", "kubernetes.io/metadata.name": "web"}
	for k, v := range partitionLabels(name) {
		l[k] = v
	}
	return l
}

// partitionLabels are the labels that put a namespace in the part of the opted-in ones the binding of
// the policy named name selects: default-os=windows, Pod Security restricted, both or neither.
func partitionLabels(name string) map[string]string {
	l := map[string]string{}
	if strings.Contains(name, "-default-os") {
		l[policy.LabelDefaultOS] = "windows"
	}
	if strings.HasSuffix(name, "-restricted") {
		l[policy.LabelPodSecurityEnforce] = "restricted"
	}
	return l
}

type namedPod struct {
	name string
	obj  map[string]any
}

// goldenPods are the pods of the webhook's golden cases (webhook/testdata/golden) and the chart pod.
func goldenPods(t *testing.T) []namedPod {
	t.Helper()
	_, chart := readChartPod(t)
	out := []namedPod{{"chart pod", chart}}
	files, err := filepath.Glob(filepath.Join("..", "..", "webhook", "testdata", "golden", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".out.yaml") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Object map[string]any `json:"object"`
		}
		if err := yaml.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.Object["kind"] == "Pod" {
			out = append(out, namedPod{filepath.Base(f), intsAsInt64(c.Object).(map[string]any)})
		}
	}
	return out
}

// compiledPolicy is one policy's expressions in order (matchConditions, variables, the patch), compiled
// in the environment the cost tests estimate them in (compile is the API server's own check).
type compiledPolicy struct {
	name        string
	expressions []compiledExpression
	// params is the policy's parameter object as the API server passes it (an unstructured ConfigMap).
	params map[string]any
}

type compiledExpression struct {
	celExpression
	prg cel.Program
}

func compilePolicy(t testing.TB, c *admissionCompiler, p admissionregistrationv1.MutatingAdmissionPolicy, params map[string]any) *compiledPolicy {
	t.Helper()
	out := &compiledPolicy{name: p.Name, params: params}
	for _, e := range mutatingPolicyExpressions(p) {
		prg, err := c.program(e.expr, plugincel.OptionalVariableDeclarations{HasAuthorizer: true, HasPatchTypes: e.kind == jsonPatch, HasParams: e.params})
		if err != nil {
			t.Fatalf("%s: %v", e.where, err)
		}
		out.expressions = append(out.expressions, compiledExpression{e, prg})
	}
	return out
}

type evaluation struct {
	matched, changes bool
	variables        map[string]any
	patch            []map[string]any
	// cost is what the API server evaluates: the matchConditions alone when one of them is false,
	// everything when they all hold.
	cost uint64
}

// conditions evaluates the matchConditions alone on obj, without a namespace, as the API server's
// matcher does: whether all but changes hold, what changes says, and what they cost together.
func (p *compiledPolicy) conditions(t testing.TB, where string, obj map[string]any) (matched, changes bool, cost uint64) {
	t.Helper()
	ev := p.evaluateConditions(t, where, obj, nil)
	return ev.matched, ev.changes, ev.cost
}

func (p *compiledPolicy) evaluateConditions(t testing.TB, where string, obj map[string]any, each func(expression string, cost uint64)) evaluation {
	t.Helper()
	ev := evaluation{matched: true}
	for _, e := range p.expressions {
		if e.kind != matchCondition {
			continue
		}
		val, details, err := e.prg.Eval(p.activation(map[string]any{"object": obj, "variables": map[string]any{}}))
		if err != nil {
			t.Fatalf("%s: %s: %v", where, e.where, err)
		}
		ev.cost += *details.ActualCost()
		p.report(e, *details.ActualCost(), each)
		if strings.HasSuffix(e.where, " changes") {
			ev.changes = val == types.True
		} else if val != types.True {
			ev.matched = false
		}
	}
	return ev
}

// evaluate runs the policy on obj: its matchConditions as conditions does; then, when the others hold,
// the variables and the patch with namespace ns whatever changes says, so that the patch can be set
// beside it. each, when not nil, gets every expression's runtime cost in order.
func (p *compiledPolicy) evaluate(t testing.TB, where string, obj, ns map[string]any, each func(expression string, cost uint64)) evaluation {
	t.Helper()
	ev := p.evaluateConditions(t, where, obj, each)
	if !ev.matched {
		return ev
	}
	conditions := ev.cost
	ev.variables = map[string]any{}
	for _, e := range p.expressions {
		if e.kind != variable && e.kind != jsonPatch {
			continue
		}
		val, details, err := e.prg.Eval(p.activation(map[string]any{"object": obj, "namespaceObject": ns, "variables": ev.variables}))
		if err != nil {
			t.Fatalf("%s: %s: %v", where, e.where, err)
		}
		ev.cost += *details.ActualCost()
		p.report(e, *details.ActualCost(), each)
		if e.kind == variable {
			ev.variables[e.name] = val
		} else {
			ev.patch = patchOps(t, where, val)
		}
	}
	if !ev.changes {
		ev.cost = conditions // the API server stops at changes
	}
	return ev
}

// activation is vars with the policy's params, when it has any.
func (p *compiledPolicy) activation(vars map[string]any) map[string]any {
	if p.params != nil {
		vars["params"] = p.params
	}
	return vars
}

func (p *compiledPolicy) report(e compiledExpression, cost uint64, each func(expression string, cost uint64)) {
	if each != nil {
		each(strings.TrimPrefix(e.where, p.name+" "), cost)
	}
}

// patchOps turns the patch expression's value into JSON patch operations as the API server does
// (admission/plugin/policy/mutating/patch, evaluatePatchExpression).
func patchOps(t testing.TB, where string, val ref.Val) []map[string]any {
	t.Helper()
	list, ok := val.(traits.Lister)
	if !ok {
		t.Fatalf("%s: the patch is a %T", where, val)
	}
	var ops []map[string]any
	for it := list.Iterator(); it.HasNext() == types.True; {
		native, err := it.Next().ConvertToNative(reflect.TypeOf(&mutation.JSONPatchVal{}))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		op := native.(*mutation.JSONPatchVal)
		m := map[string]any{"op": op.Op, "path": op.Path}
		if op.From != "" {
			m["from"] = op.From
		}
		if op.Val != nil {
			v, err := op.Val.ConvertToNative(reflect.TypeOf(&structpb.Value{}))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			m["value"] = json.RawMessage(b)
		}
		ops = append(ops, m)
	}
	return ops
}

// applyOps applies ops to obj as the API server applies a policy's patch, and returns the result as the
// API server's unstructured objects hold it.
func applyOps(t testing.TB, where string, obj map[string]any, ops []map[string]any) map[string]any {
	t.Helper()
	doc, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	patched, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("%s: applying %s: %v", where, raw, err)
	}
	var out map[string]any
	if err := json.Unmarshal(patched, &out); err != nil {
		t.Fatal(err)
	}
	return intsAsInt64(out).(map[string]any)
}

// TestPodChangesConditionBudget: changes is one expression, held to the API server's runtime limit per
// expression (1,000,000, which each of the policy's variables has to itself) and to the matchConditions'
// budget (2,500,000). So it reads the record only of a pod with at most changesItemLimit items: at the
// limit, in the dearest case (the marker there and every container with everything to strip, as after
// a webhook that put it all back), it stays within both; past it, changes is true at once and the
// policy runs as without it. The figures
// per container are logged for the chart pod's containers and bare ones.
func TestPodChangesConditionBudget(t *testing.T) {
	_, chart := readChartPod(t)
	chartContainer := chart["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	// One item each (no mounts, no resources), with every field the strip table removes.
	stripped := deepCopyJSON(t, chartContainer).(map[string]any)
	delete(stripped, "volumeMounts")
	delete(stripped, "resources")
	bare := map[string]any{"name": "c", "image": "app"}
	policies, params := renderedForEvaluation(t, policy.Default())
	c := newAdmissionCompiler(t)
	ns := perfNamespace()
	withContainers := func(container map[string]any, n int, marked bool) map[string]any {
		pod := deepCopyJSON(t, chart).(map[string]any)
		spec := pod["spec"].(map[string]any)
		delete(spec, "volumes")
		var containers []any
		for i := range n {
			ct := deepCopyJSON(t, container).(map[string]any)
			ct["name"] = fmt.Sprintf("c%d", i)
			containers = append(containers, ct)
		}
		spec["containers"] = containers
		meta := pod["metadata"].(map[string]any)
		meta["annotations"] = map[string]any{}
		if marked {
			meta["annotations"] = map[string]any{policy.AnnotationAdmissionPolicy: "v1.2.3"}
		}
		return pod
	}
	for _, p := range policies {
		if p.Name != "wincompat-pods" && p.Name != "wincompat-pods-restricted" {
			continue
		}
		e := compilePolicy(t, c, p, params)
		for _, kind := range []struct {
			name      string
			container map[string]any
		}{{"chart containers", chartContainer}, {"bare containers", bare}} {
			second := func(n int) uint64 {
				pod := withContainers(kind.container, n, false)
				again := e.evaluate(t, p.Name+", patched", applyOps(t, p.Name, pod, e.evaluate(t, p.Name, pod, ns, nil).patch), ns, nil)
				if again.changes {
					t.Fatalf("%s, %d %s: changes is true on the patched pod", p.Name, n, kind.name)
				}
				return again.cost
			}
			first := func(n int) uint64 {
				return e.evaluate(t, p.Name, withContainers(kind.container, n, false), ns, nil).cost
			}
			t.Logf("%s, %s: per container, the policy %.0f on the first pass, changes %.0f on the second", p.Name, kind.name,
				float64(first(64)-first(8))/56, float64(second(64)-second(8))/56)
		}
		// At the limit, two pods: one with everything to strip in every container, and the same pod
		// as the policy leaves it, where no condition holds and changes reads every one of them, the
		// dearest case now that it builds no entry. The second has as many containers as the limit
		// leaves room for beside the patch's annotations and toleration; changes being false proves
		// that it is within the limit.
		atLimit := withContainers(stripped, changesItemLimit-1, true)
		if ev := e.evaluate(t, p.Name, atLimit, ns, nil); !ev.changes || len(ev.patch) == 0 {
			t.Fatalf("%s: at the limit, with everything to strip: changes %v, %d operations", p.Name, ev.changes, len(ev.patch))
		}
		one := withContainers(stripped, 1, true)
		clean := applyOps(t, p.Name, one, e.evaluate(t, p.Name, one, ns, nil).patch)
		spec, meta := clean["spec"].(map[string]any), clean["metadata"].(map[string]any)
		room := changesItemLimit - len(meta["annotations"].(map[string]any)) - len(spec["tolerations"].([]any))
		cleanContainer := spec["containers"].([]any)[0]
		var containers []any
		for range room {
			containers = append(containers, deepCopyJSON(t, cleanContainer))
		}
		spec["containers"] = containers
		for _, pod := range []struct {
			name string
			obj  map[string]any
			want bool
		}{{"everything to strip", atLimit, true}, {"nothing to change", clean, false}} {
			_, changes, cost := e.conditions(t, p.Name+", at the limit, "+pod.name, pod.obj)
			if changes != pod.want {
				t.Fatalf("%s, at the limit, %s: changes is %v", p.Name, pod.name, changes)
			}
			t.Logf("%s: the matchConditions at the limit (%s) cost %d (limit 1,000,000)", p.Name, pod.name, cost)
			if cost >= 1_000_000 {
				t.Errorf("%s: at the limit (%s) the matchConditions cost %d, over the API server's limit of 1,000,000 per expression", p.Name, pod.name, cost)
			}
		}
		// Past it, changes does not read the record.
		_, changes, pastCost := e.conditions(t, p.Name+", past the limit", withContainers(stripped, changesItemLimit+1, true))
		if !changes {
			t.Errorf("%s: past the limit changes is false", p.Name)
		}
		if pastCost > 1000 {
			t.Errorf("%s: past the limit the matchConditions cost %d: the record was read", p.Name, pastCost)
		}
	}
}

func deepCopyJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return intsAsInt64(out)
}

// BenchmarkPodChangesSecondPass is what the API server evaluates on every reinvocation of the default
// wincompat-pods policy after its own change: its matchConditions on the chart pod of make perf as the
// policy's patch left it, where changes is false.
func BenchmarkPodChangesSecondPass(b *testing.B) {
	p, pod, ns := chartPodPolicy(b)
	patched := applyOps(b, p.name, pod, p.evaluate(b, p.name, pod, ns, nil).patch)
	if matched, changes, _ := p.conditions(b, p.name, patched); !matched || changes {
		b.Fatalf("on the patched pod: matched %v, changes %v", matched, changes)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.conditions(b, p.name, patched)
	}
}

// BenchmarkPodFirstPass is what the API server evaluates when the default wincompat-pods policy first
// sees the chart pod of make perf: its matchConditions, variables and patch.
func BenchmarkPodFirstPass(b *testing.B) {
	p, pod, ns := chartPodPolicy(b)
	if ev := p.evaluate(b, p.name, pod, ns, nil); !ev.changes || len(ev.patch) == 0 {
		b.Fatalf("on the chart pod: changes %v, %d operations", ev.changes, len(ev.patch))
	}
	b.ReportAllocs()
	for b.Loop() {
		p.evaluate(b, p.name, pod, ns, nil)
	}
}
