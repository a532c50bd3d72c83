package admissionpolicy

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/mutation"
	baseversion "k8s.io/component-base/version"

	"github.com/wincompat/wincompat/policy"
)

// This file compiles every CEL expression wincompat ships with the API server's own compiler for
// admission (k8s.io/apiserver v0.36.3, the version of the test control plane), the way kube-apiserver
// 1.36 validates a policy or webhook configuration when it is written
// (k8s.io/kubernetes/pkg/apis/admissionregistration/validation): the base environment at the server's
// DefaultCompatibilityVersion in NewExpressions mode, strict cost, the same variable declarations
// (object, oldObject, request, namespaceObject, authorizer; JSONPatch types for mutations) and, for
// policies, variables composed in order. A type error is found here instead of on a cluster.
//
// The API server does not estimate the cost of admission CEL when it is written; it stops an evaluation
// that exceeds celconfig.PerCallLimit (1,000,000 per expression) or the budget of the whole policy
// (celconfig.RuntimeCELCostBudget, 10,000,000) or of a webhook's matchConditions
// (celconfig.RuntimeCELCostBudgetMatchConditions, 2,500,000). So the estimate here is cel-go's checker
// estimate with the API server's cost model (library.CostEstimator, as CustomResourceDefinitions and
// DRA use it when they do check statically) under a stated bound on the size of the object, below.

// admissionKind is where an expression sits, which decides the variables it may use and its type.
type admissionKind int

const (
	// matchCondition: a webhook's or a policy's matchConditions, compiled without variables (the
	// API server's stateless compiler), bool.
	matchCondition admissionKind = iota
	// variable: a policy's spec.variables, composed in order, any type.
	variable
	// validation: a ValidatingAdmissionPolicy's validations, bool.
	validation
	// jsonPatch: a MutatingAdmissionPolicy's JSONPatch expression, list(JSONPatch).
	jsonPatch
)

// celExpression is one expression wincompat ships, and where.
type celExpression struct {
	where string
	kind  admissionKind
	name  string // of a variable
	expr  string
}

// serverVersion is the Kubernetes version wincompat's CEL is compiled for: the test control plane's
// (bin/k8s, built from test/go.mod) and the first with MutatingAdmissionPolicy v1.
const serverVersion = "1.36"

// compatibilityVersion is the environment kube-apiserver 1.36 checks new expressions with: its minimum
// compatibility version, one minor below the binary, so that what is written still compiles after a
// rollback to 1.35. Stricter than the 1.36 environment it evaluates stored expressions with.
func compatibilityVersion(t *testing.T) *version.Version {
	t.Helper()
	if baseversion.DefaultKubeBinaryVersion != serverVersion {
		t.Fatalf("k8s.io/component-base is built for Kubernetes %s, want %s: align go.mod's k8s.io modules with the test control plane", baseversion.DefaultKubeBinaryVersion, serverVersion)
	}
	v := environment.DefaultCompatibilityVersion()
	if want := version.MajorMinor(1, 35); !v.EqualTo(want) {
		t.Fatalf("the API server's compatibility version is %s, want %s", v, want)
	}
	return v
}

// The budgets are the API server's own runtime limits: every expression within PerCallLimit
// (1,000,000), the matchConditions of one webhook or policy together within
// RuntimeCELCostBudgetMatchConditions (2,500,000), and all the expressions of one policy together
// within RuntimeCELCostBudget (10,000,000), which the API server applies per policy evaluation. At
// runtime the sums are smaller: variables are evaluated lazily and at most once, and matchConditions
// stop at the first false.
const (
	expressionBudget     = celconfig.PerCallLimit
	matchConditionBudget = celconfig.RuntimeCELCostBudgetMatchConditions
	policyBudget         = celconfig.RuntimeCELCostBudget
)

// maxSize bounds every list, map and string the estimate cannot size otherwise. object and oldObject
// are dynamically typed in admission CEL, so cel-go knows no size for any of their fields and
// estimates every comprehension over them as unbounded (math.MaxUint64): the estimate needs a bound to
// say anything, and one bound for all, as a dyn value's kind is unknown to the checker. The request's
// size limit (3 MiB) is no useful bound: any loop in a loop over it exceeds every budget.
//
// The bound is 4: four containers of each kind, four volume mounts, huge page resources, annotations,
// tolerations, nodeSelector terms and expressions, each string four bytes, the size of a chart's pod.
// The estimate is far dearer than what such a pod costs at runtime: it takes the dearer branch of
// every conditional, so every string goes through the whole escape chain grown to the most escaping
// can make of it, and every removal and record entry happens. Under that worst case the dearest
// expression, hugePages (one record entry per huge page limit and request of every container, two
// escaped strings each), is estimated at about a quarter of PerCallLimit; it grows as the fourth power
// of the bound, so at 6 it would pass PerCallLimit, while the API server measures 7,567 for all the
// variables of a chart's pod of three containers (README.md, "How the record is written"). What the
// estimate catches holds at any bound: another loop around a loop (16 times dearer here), a regular
// expression or an escape inside a loop that did not have one, a chain of replaces that does not scale.
const maxSize = 4

// maxEscapeGrowth is how much longer escaping makes a string: encoding/json's longest escape of one
// character is six bytes (\u00XX). cel-go estimates each replace of a chain on the worst case of the
// one before, so the record's escape chain (one replace per escaped character, record.go) is
// estimated exponentially long, past math.MaxUint64. Each replace of the chain rewrites characters no
// earlier one wrote, so a chain's result is at most maxEscapeGrowth times the string it started from.
const maxEscapeGrowth = 6

// boundedSizes is the API server's cost model (library.CostEstimator) under the bounds above.
type boundedSizes struct{ apiserver *library.CostEstimator }

func newBoundedSizes() boundedSizes {
	return boundedSizes{apiserver: &library.CostEstimator{SizeEstimator: unsizedToMax{}}}
}

func (b boundedSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	return b.apiserver.EstimateSize(n)
}

func (b boundedSizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	est := b.apiserver.EstimateCallCost(function, overloadID, target, args)
	if function != "replace" || target == nil || est == nil || est.ResultSize == nil {
		return est
	}
	// A replace of a replace of a value of the object: a link of an escape chain.
	start := (*target).Expr()
	links := 0
	for start.Kind() == ast.CallKind && start.AsCall().FunctionName() == "replace" && start.AsCall().IsMemberFunction() {
		start, links = start.AsCall().Target(), links+1
	}
	if links > 0 && !isConcatenation(start) && est.ResultSize.Max > maxSize*maxEscapeGrowth {
		est.ResultSize = &checker.SizeEstimate{Min: est.ResultSize.Min, Max: maxSize * maxEscapeGrowth}
	}
	return est
}

func isConcatenation(e ast.Expr) bool {
	return e.Kind() == ast.CallKind && e.AsCall().FunctionName() == operators.Add
}

// unsizedToMax sizes what the checker cannot at maxSize.
type unsizedToMax struct{}

func (unsizedToMax) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: maxSize}
}

func (unsizedToMax) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// admissionCompiler compiles as the API server does for one webhook configuration or policy: a fresh
// composited compiler, so that variables are declared in order, and the stateless one for
// matchConditions.
type admissionCompiler struct {
	version   *version.Version
	composed  *plugincel.CompositedCompiler
	stateless plugincel.Compiler
	costEnvs  map[plugincel.OptionalVariableDeclarations]*cel.Env
}

func newAdmissionCompiler(t *testing.T) *admissionCompiler {
	t.Helper()
	v := compatibilityVersion(t)
	composed, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(v))
	if err != nil {
		t.Fatal(err)
	}
	return &admissionCompiler{version: v, composed: composed, stateless: plugincel.NewCompiler(environment.MustBaseEnvSet(v)),
		costEnvs: map[plugincel.OptionalVariableDeclarations]*cel.Env{}}
}

// compile compiles e as the API server validates it, and returns its estimated cost.
func (c *admissionCompiler) compile(e celExpression) (uint64, error) {
	// HasAuthorizer: every admission expression may call the authorizer; no params: wincompat's
	// policies have no paramKind.
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	var result plugincel.CompilationResult
	switch e.kind {
	case matchCondition:
		result = c.stateless.CompileCELExpression(&matchconditions.MatchCondition{Expression: e.expr}, opts, environment.NewExpressions)
	case variable:
		result = c.composed.CompileAndStoreVariable(&validating.Variable{Name: e.name, Expression: e.expr}, opts, environment.NewExpressions)
	case validation:
		result = c.composed.CompileCELExpression(&validating.ValidationCondition{Expression: e.expr}, opts, environment.NewExpressions)
	case jsonPatch:
		opts.HasPatchTypes = true
		result = c.composed.CompileCELExpression(&patch.JSONPatchCondition{Expression: strings.TrimSpace(e.expr)}, opts, environment.NewExpressions)
	}
	if result.Error != nil {
		return 0, result.Error
	}
	return c.estimate(e, opts)
}

// estimate is the checker's cost estimate of e with the API server's cost model. The compiler above
// keeps its checked AST to itself, so e is checked again in an environment made of the same parts
// (createEnvForOpts in plugin/cel/compile.go), with the variables of composition declared dyn: each
// variable's own cost is estimated where it is defined, and its value, read here, is bounded like the
// object's.
func (c *admissionCompiler) estimate(e celExpression, opts plugincel.OptionalVariableDeclarations) (uint64, error) {
	env, err := c.costEnv(opts)
	if err != nil {
		return 0, err
	}
	ast, issues := env.Compile(e.expr)
	if issues.Err() != nil {
		return 0, fmt.Errorf("the cost environment does not compile what the API server's does: %w", issues.Err())
	}
	est, err := env.EstimateCost(ast, newBoundedSizes())
	if err != nil {
		return 0, err
	}
	return est.Max, nil
}

func (c *admissionCompiler) costEnv(opts plugincel.OptionalVariableDeclarations) (*cel.Env, error) {
	if env, ok := c.costEnvs[opts]; ok {
		return env, nil
	}
	request, namespace := plugincel.BuildRequestType(), plugincel.BuildNamespaceType()
	vars := []cel.EnvOption{
		cel.Variable(plugincel.ObjectVarName, cel.DynType),
		cel.Variable(plugincel.OldObjectVarName, cel.DynType),
		cel.Variable(plugincel.NamespaceVarName, namespace.CelType()),
		cel.Variable(plugincel.RequestVarName, request.CelType()),
		cel.Variable(plugincel.VariableVarName, cel.MapType(cel.StringType, cel.DynType)),
	}
	if opts.HasAuthorizer {
		vars = append(vars, cel.Variable(plugincel.AuthorizerVarName, library.AuthorizerType),
			cel.Variable(plugincel.RequestResourceAuthorizerVarName, library.ResourceCheckType))
	}
	set, err := environment.MustBaseEnvSet(c.version).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        vars,
		DeclTypes:         []*apiservercel.DeclType{namespace, request},
	}, environment.StrictCostOpt)
	if err != nil {
		return nil, err
	}
	if opts.HasPatchTypes {
		set, err = set.Extend(environment.VersionedOptions{
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions: []cel.EnvOption{
				common.ResolverEnvOption(&mutation.DynamicTypeResolver{}),
				environment.UnversionedLib(library.JSONPatch),
			},
		})
		if err != nil {
			return nil, err
		}
	}
	env, err := set.Env(environment.NewExpressions)
	if err != nil {
		return nil, err
	}
	c.costEnvs[opts] = env
	return env, nil
}

// mutatingPolicyExpressions are the expressions of p in the order the API server compiles them.
func mutatingPolicyExpressions(p admissionregistrationv1.MutatingAdmissionPolicy) []celExpression {
	var out []celExpression
	for _, m := range p.Spec.MatchConditions {
		out = append(out, celExpression{where: p.Name + " matchConditions " + m.Name, kind: matchCondition, expr: m.Expression})
	}
	for _, v := range p.Spec.Variables {
		out = append(out, celExpression{where: p.Name + " variables " + v.Name, kind: variable, name: v.Name, expr: v.Expression})
	}
	for i, m := range p.Spec.Mutations {
		if m.JSONPatch != nil {
			out = append(out, celExpression{where: fmt.Sprintf("%s mutations[%d]", p.Name, i), kind: jsonPatch, expr: m.JSONPatch.Expression})
		}
		if m.ApplyConfiguration != nil {
			// wincompat renders JSONPatch only; an ApplyConfiguration would need its own accessor here.
			out = append(out, celExpression{where: fmt.Sprintf("%s mutations[%d] applyConfiguration", p.Name, i), kind: -1})
		}
	}
	return out
}

// checkCompiles reports every problem compileProblems finds.
func checkCompiles(t *testing.T, exprs []celExpression, isPolicy bool) {
	t.Helper()
	for _, p := range compileProblems(t, exprs, isPolicy) {
		t.Error(p)
	}
}

// compileProblems compiles the expressions of one configuration or policy with one compiler, as the
// API server does, and checks their estimated costs against the budgets: each expression's, the
// matchConditions' together and, for a policy, all of them together.
func compileProblems(t *testing.T, exprs []celExpression, isPolicy bool) []string {
	t.Helper()
	c := newAdmissionCompiler(t)
	var problems []string
	var conditions, all uint64
	for _, e := range exprs {
		if e.kind < 0 {
			problems = append(problems, e.where+": no compiler for this kind of expression")
			continue
		}
		cost, err := c.compile(e)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s does not compile on kube-apiserver %s: %v\n%s", e.where, serverVersion, err, e.expr))
			continue
		}
		if testing.Verbose() {
			t.Logf("%s: estimated cost %s", e.where, shownCost(cost))
		}
		if cost > expressionBudget {
			problems = append(problems, fmt.Sprintf("%s: estimated cost %s exceeds the API server's limit per expression, %d", e.where, shownCost(cost), expressionBudget))
		}
		all = saturatingAdd(all, cost)
		if e.kind == matchCondition {
			conditions = saturatingAdd(conditions, cost)
		}
	}
	if conditions > matchConditionBudget {
		problems = append(problems, fmt.Sprintf("the matchConditions' estimated costs add up to %s, over the API server's budget of %d", shownCost(conditions), matchConditionBudget))
	}
	if isPolicy && all > policyBudget {
		problems = append(problems, fmt.Sprintf("the policy's estimated costs add up to %s, over the API server's budget of %d", shownCost(all), policyBudget))
	}
	return problems
}

func saturatingAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func shownCost(c uint64) string {
	if c == math.MaxUint64 {
		return "unbounded"
	}
	return fmt.Sprint(c)
}

// policiesShipped are the policies whose rendering must compile: the default, which the chart's
// hybrid engine applies unchanged, and the other branches of the generator (no inference from node
// constraints, no non-root user, no Pod Security, no injectors, several taints).
func policiesShipped(t *testing.T) map[string]*policy.Policy {
	t.Helper()
	other, err := policy.Load([]byte(`apiVersion: wincompat.io/v1alpha1
kind: Policy
inferOSFromNodeSelector: false
nonRootUserName: ""
podSecurityRestricted: false
injectorOptOuts: []
windowsNodeTaints: [{key: sku, value: win, effect: NoExecute}, {key: os, value: Windows, effect: NoSchedule}, {key: node.kubernetes.io/os, effect: NoSchedule}]
`))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*policy.Policy{"default policy": policy.Default(), "other branches": other}
}

// Every MutatingAdmissionPolicy `wincompat policy export` and hybrid mode write compiles on the API
// server, and each expression's estimated cost is within its budget.
func TestMutatingAdmissionPoliciesCompile(t *testing.T) {
	for name, pol := range policiesShipped(t) {
		t.Run(name, func(t *testing.T) {
			policies, _ := Render(pol, Options{Version: "v1.2.3"})
			for _, p := range policies {
				t.Run(p.Name, func(t *testing.T) { checkCompiles(t, mutatingPolicyExpressions(p), true) })
			}
		})
	}
}

// The check fails where the API server would refuse or stop an expression: a type error, a variable
// used before it is defined, a matchCondition that is not a bool, a patch that is not a list of
// JSONPatch, and the dearest variable of the shipped pods policy inside a loop in a loop.
func TestCompileCatchesBrokenExpressions(t *testing.T) {
	policies, _ := Render(policy.Default(), Options{Version: "v1"})
	vars := map[string]string{}
	for _, v := range policies[0].Spec.Variables {
		vars[v.Name] = v.Expression
	}
	nested := fmt.Sprintf("object.spec.containers.map(a, object.spec.volumes.map(b, %s))", vars["hugePages"])
	for _, tc := range []struct {
		name  string
		exprs []celExpression
		want  string
	}{
		{"type error", []celExpression{{where: "c", kind: matchCondition, expr: "object.metadata.name.size() == 'a'"}}, "does not compile"},
		{"not a bool", []celExpression{{where: "c", kind: matchCondition, expr: "object.metadata.name"}}, "must evaluate to bool"},
		{"variable in a matchCondition", []celExpression{{where: "c", kind: matchCondition, expr: "variables.removals.size() > 0"}}, "does not compile"},
		{"undefined variable", []celExpression{{where: "v", kind: variable, name: "a", expr: "variables.b"}}, "undefined field 'b'"},
		{"not a patch", []celExpression{{where: "p", kind: jsonPatch, expr: "[{'op': 'remove', 'path': '/spec/os'}]"}}, "must evaluate to list(JSONPatch)"},
		{"a loop in a loop", []celExpression{{where: "names", kind: variable, name: "names", expr: vars["names"]}, {where: "nested", kind: variable, name: "nested", expr: nested}}, "exceeds the API server's limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := strings.Join(compileProblems(t, tc.exprs, true), "\n")
			if !strings.Contains(problems, tc.want) {
				t.Errorf("want a problem with %q, got %q", tc.want, problems)
			}
		})
	}
}

// The webhooks' matchConditions compile on the API server, alone and within the matchConditions'
// budget, as it validates a webhook configuration.
func TestWebhookConditionsCompile(t *testing.T) {
	conds := append(WebhookConditions(), PolicyConfigMapCondition(plainPolicyConfigMap))
	for _, c := range conds {
		t.Run(c.Name, func(t *testing.T) {
			checkCompiles(t, []celExpression{{where: "webhook matchConditions " + c.Name, kind: matchCondition, expr: c.Expression}}, false)
		})
	}
}
