package admissionpolicy

import (
	"crypto/sha256"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"

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
)

// The harness that compiles wincompat's CEL with the API server's own compiler for admission
// (k8s.io/apiserver v0.37.2, the version of the test control plane), the way kube-apiserver validates a
// policy or webhook configuration when it is written
// (k8s.io/kubernetes/pkg/apis/admissionregistration/validation): the base environment at the server's
// DefaultCompatibilityVersion (here the oldest such version among the servers wincompat writes to) in NewExpressions mode, strict cost, the same variable declarations
// (object, oldObject, request, namespaceObject, authorizer; JSONPatch types for mutations) and, for
// policies, variables composed in order; then cel-go's cost estimate with the API server's cost model
// (library.CostEstimator, as CustomResourceDefinitions and DRA use it where they do check statically),
// held to the budgets below. The tests that use it are in compile_test.go,
// webhookconditions_test.go and ownwrites_test.go.

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
	// applyConfiguration: a MutatingAdmissionPolicy's ApplyConfiguration expression, an object.
	applyConfiguration
)

// celExpression is one expression wincompat ships, and where.
type celExpression struct {
	where string
	kind  admissionKind
	name  string // of a variable
	expr  string
	// params: the expression's policy has a paramKind, so it may read params.
	params bool
}

// serverVersion is the Kubernetes version of the compiler: go.mod's k8s.io modules, the test control
// plane's (bin/k8s/<version>, built from test/go.mod).
const serverVersion = "1.37"

// oldestServer is the oldest kube-apiserver wincompat writes its policies to: the first with
// MutatingAdmissionPolicy v1.
const oldestServer = "1.36"

// compatibilityVersion is the environment new expressions are checked with. A kube-apiserver checks them
// at its minimum compatibility version, one minor below the binary, so that what is written still compiles
// after a rollback: 1.35 for the oldest server wincompat writes to, stricter than the 1.36 of a 1.37
// server (checked too, so that a bump of the libraries is noticed here).
func compatibilityVersion(t testing.TB) *version.Version {
	t.Helper()
	if baseversion.DefaultKubeBinaryVersion != serverVersion {
		t.Fatalf("k8s.io/component-base is built for Kubernetes %s, want %s: align go.mod's k8s.io modules with the test control plane", baseversion.DefaultKubeBinaryVersion, serverVersion)
	}
	if v, want := environment.DefaultCompatibilityVersion(), version.MajorMinor(1, 36); !v.EqualTo(want) {
		t.Fatalf("the API server's compatibility version is %s, want %s", v, want)
	}
	return version.MustParseMajorMinor(oldestServer).SubtractMinor(1)
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
// The bound is 4: four containers of each kind, four of each list and map in them (volume mounts, huge
// page resources, annotations, tolerations, nodeSelector terms and expressions), strings of four bytes.
// The estimate is far dearer than what such a pod costs at runtime: it takes the dearer branch of
// every conditional, so every string goes through the whole escape chain grown to the most escaping
// can make of it, and every removal and record entry happens. Under that worst case the dearest
// expression, hugePages (one record entry per huge page limit and request of every container, two
// escaped strings each), is estimated at about a quarter of PerCallLimit; it grows about as the fourth
// power of the bound, so at 6 it would exceed PerCallLimit, while the API server measures 7,567 for all the
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
}

func newAdmissionCompiler(t testing.TB) *admissionCompiler {
	t.Helper()
	c, err := newAdmissionCompilerAt(compatibilityVersion(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newAdmissionCompilerAt(v *version.Version) (*admissionCompiler, error) {
	composed, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(v))
	if err != nil {
		return nil, err
	}
	return &admissionCompiler{version: v, composed: composed, stateless: plugincel.NewCompiler(environment.MustBaseEnvSet(v))}, nil
}

// The tests compile the same expressions many times over: every rendering has the same policies (only
// their params differ), and several tests compile, estimate and evaluate them. cel-go's type check of
// the generated expressions (long list and map literals) is nearly all of this package's test time, so
// each distinct policy goes through the API server's compiler once per test binary (compileAll), and
// each distinct expression is checked, estimated and planned once in its cost environment. What a test
// reads from the memo is what a fresh compile of the same input gives.

// memo computes the value of each key once, for whichever test asks first.
type memo[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*memoEntry[V]
}

type memoEntry[V any] struct {
	once sync.Once
	v    V
	err  error
}

func (m *memo[K, V]) get(k K, f func() (V, error)) (V, error) {
	m.mu.Lock()
	if m.m == nil {
		m.m = map[K]*memoEntry[V]{}
	}
	e := m.m[k]
	if e == nil {
		e = &memoEntry[V]{}
		m.m[k] = e
	}
	m.mu.Unlock()
	e.once.Do(func() { e.v, e.err = f() })
	return e.v, e.err
}

// envKey names a cost environment, exprKey an expression checked in one.
type envKey struct {
	version string
	opts    plugincel.OptionalVariableDeclarations
}

type exprKey struct {
	envKey
	expr string
}

var (
	costEnvs       memo[envKey, *cel.Env]
	checkedASTs    memo[exprKey, *cel.Ast]
	estimatedCosts memo[exprKey, uint64]
	programs       memo[exprKey, cel.Program]
	compiledAll    memo[[sha256.Size]byte, []compileResult]
)

// compileResult is what the API server's compiler says of one expression: its estimated cost, or why
// it does not compile.
type compileResult struct {
	cost uint64
	err  error
}

// compileAll compiles the expressions of one configuration or policy in order with one fresh compiler,
// as the API server does, leaving out those of a kind it has no compiler for (their result is zero).
func compileAll(t testing.TB, exprs []celExpression) []compileResult {
	t.Helper()
	v := compatibilityVersion(t)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", v)
	for _, e := range exprs {
		fmt.Fprintf(h, "%d %q %v %q\n", e.kind, e.name, e.params, e.expr)
	}
	results, err := compiledAll.get([sha256.Size]byte(h.Sum(nil)), func() ([]compileResult, error) {
		c, err := newAdmissionCompilerAt(v)
		if err != nil {
			return nil, err
		}
		out := make([]compileResult, len(exprs))
		for i, e := range exprs {
			if e.kind >= 0 {
				out[i].cost, out[i].err = c.compile(e)
			}
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return results
}

// compile compiles e as the API server validates it, and returns its estimated cost.
func (c *admissionCompiler) compile(e celExpression) (uint64, error) {
	// HasAuthorizer: every admission expression may call the authorizer; params where the policy has a
	// paramKind (the API server's HasParams, compilePolicy in plugin/policy/mutating).
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true, HasParams: e.params}
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
	case applyConfiguration:
		opts.HasPatchTypes = true
		result = c.composed.CompileCELExpression(&patch.ApplyConfigurationCondition{Expression: strings.TrimSpace(e.expr)}, opts, environment.NewExpressions)
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
	env, checked, err := c.check(e.expr, opts)
	if err != nil {
		return 0, err
	}
	return estimatedCosts.get(exprKey{c.envKey(opts), e.expr}, func() (uint64, error) {
		est, err := env.EstimateCost(checked, newBoundedSizes())
		if err != nil {
			return 0, err
		}
		return est.Max, nil
	})
}

// check is expr checked in the cost environment of opts.
func (c *admissionCompiler) check(expr string, opts plugincel.OptionalVariableDeclarations) (*cel.Env, *cel.Ast, error) {
	env, err := c.costEnv(opts)
	if err != nil {
		return nil, nil, err
	}
	checked, err := checkedASTs.get(exprKey{c.envKey(opts), expr}, func() (*cel.Ast, error) {
		checked, issues := env.Compile(expr)
		if issues.Err() != nil {
			return nil, fmt.Errorf("the cost environment does not compile what the API server's does: %w", issues.Err())
		}
		return checked, nil
	})
	return env, checked, err
}

// program is expr checked and planned in the cost environment of opts, for evaluation.
func (c *admissionCompiler) program(expr string, opts plugincel.OptionalVariableDeclarations) (cel.Program, error) {
	env, checked, err := c.check(expr, opts)
	if err != nil {
		return nil, err
	}
	return programs.get(exprKey{c.envKey(opts), expr}, func() (cel.Program, error) { return env.Program(checked) })
}

func (c *admissionCompiler) envKey(opts plugincel.OptionalVariableDeclarations) envKey {
	return envKey{c.version.String(), opts}
}

func (c *admissionCompiler) costEnv(opts plugincel.OptionalVariableDeclarations) (*cel.Env, error) {
	return costEnvs.get(c.envKey(opts), func() (*cel.Env, error) { return c.newCostEnv(opts) })
}

func (c *admissionCompiler) newCostEnv(opts plugincel.OptionalVariableDeclarations) (*cel.Env, error) {
	request, namespace := plugincel.BuildRequestType(), plugincel.BuildNamespaceType()
	vars := []cel.EnvOption{
		cel.Variable(plugincel.ObjectVarName, cel.DynType),
		cel.Variable(plugincel.OldObjectVarName, cel.DynType),
		cel.Variable(plugincel.NamespaceVarName, namespace.CelType()),
		cel.Variable(plugincel.RequestVarName, request.CelType()),
		cel.Variable(plugincel.VariableVarName, cel.MapType(cel.StringType, cel.DynType)),
	}
	if opts.HasParams {
		vars = append(vars, cel.Variable(plugincel.ParamsVarName, cel.DynType))
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
	return set.Env(environment.NewExpressions)
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
	results := compileAll(t, exprs)
	var problems []string
	var conditions, all uint64
	for i, e := range exprs {
		if e.kind < 0 {
			problems = append(problems, e.where+": no compiler for this kind of expression")
			continue
		}
		cost, err := results[i].cost, results[i].err
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s does not compile on kube-apiserver %s and later: %v\n%s", e.where, oldestServer, err, e.expr))
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
