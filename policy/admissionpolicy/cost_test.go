package admissionpolicy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
)

// The static cost budget of the generated policies (README.md, "Cost budget"): the API server's cost
// estimate of each expression (apiservercel_test.go: its admission environment and cost model, every
// unsized list, map and string of the object bounded at maxSize) held well below the API server's own
// limits, close above what the generator renders today, so that an expression or a policy that grows
// fails here before it reaches a cluster. Raise a figure only with the reason in the commit.
const (
	// costPerExpression: the dearest expression today is the pods policies' hugePages variable
	// (239,342: a loop over each container's limits and requests inside the loop over containers).
	costPerExpression = 250_000
	// costPerPolicy: every expression of one policy together; the dearest policy today is
	// wincompat-pods-default-os-restricted under the rewrites that narrow, 337,597 (322,100 for
	// wincompat-pods of the default policy).
	costPerPolicy = 360_000
	// costMatchConditions: one policy's matchConditions together, which the API server evaluates for
	// every object the policy's rules and binding select, with something to change or not. The dearest
	// today are the pods policies', up to 10,053, most of it changes: the tests of whether the record
	// would have an entry, without building one. At runtime its first clause turns away what the other
	// conditions turn away and, on a Windows pod without the marker, it stops at its second: only a
	// pod's second pass reads the tests (TestAdmissionPolicyRuntimeCost). The template policies' are
	// below 1,600.
	costMatchConditions = 12_000
)

// expressionCost is one expression of a rendered policy and its estimated cost.
type expressionCost struct {
	rendering, policy, expression string
	matchCondition                bool
	cost                          uint64
}

// renderedCosts estimates every expression of every policy of every rendering policiesShipped names.
func renderedCosts(t *testing.T) []expressionCost {
	t.Helper()
	var out []expressionCost
	renderings := policiesShipped(t)
	for _, name := range slices.Sorted(maps.Keys(renderings)) {
		policies := Render(renderings[name], Options{Version: "v1.2.3"}).Policies
		for _, p := range policies {
			exprs := mutatingPolicyExpressions(p)
			for i, r := range compileAll(t, exprs) {
				e := exprs[i]
				if r.err != nil {
					t.Fatalf("%s, %s: %v", name, e.where, r.err)
				}
				out = append(out, expressionCost{name, p.Name, strings.TrimPrefix(e.where, p.Name+" "), e.kind == matchCondition, r.cost})
			}
		}
	}
	return out
}

// TestAdmissionPolicyCostBudget reports the estimated cost of each expression and each policy, dearest
// first, and holds them to the budget above.
func TestAdmissionPolicyCostBudget(t *testing.T) {
	costs := renderedCosts(t)
	type total struct{ all, conditions uint64 }
	totals := map[[2]string]*total{}
	var order [][2]string
	for _, c := range costs {
		key := [2]string{c.rendering, c.policy}
		if totals[key] == nil {
			totals[key] = &total{}
			order = append(order, key)
		}
		totals[key].all = saturatingAdd(totals[key].all, c.cost)
		if c.matchCondition {
			totals[key].conditions = saturatingAdd(totals[key].conditions, c.cost)
		}
		if c.cost > costPerExpression {
			t.Errorf("%s, %s %s: estimated cost %s, over the budget of %d per expression", c.rendering, c.policy, c.expression, shownCost(c.cost), costPerExpression)
		}
	}
	for _, key := range order {
		tot := totals[key]
		if tot.all > costPerPolicy {
			t.Errorf("%s, %s: estimated cost %s, over the budget of %d per policy", key[0], key[1], shownCost(tot.all), costPerPolicy)
		}
		if tot.conditions > costMatchConditions {
			t.Errorf("%s, %s: matchConditions estimated at %s, over the budget of %d", key[0], key[1], shownCost(tot.conditions), costMatchConditions)
		}
	}

	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "policy (rendering)\ttotal\tmatchConditions\t\n")
	slices.SortStableFunc(order, func(a, b [2]string) int { return cmp.Compare(totals[b].all, totals[a].all) })
	for _, key := range order {
		fmt.Fprintf(w, "%s (%s)\t%d\t%d\t\n", key[1], key[0], totals[key].all, totals[key].conditions)
	}
	fmt.Fprintf(w, "\nexpression of the default policy's rendering\tcost\tshare of its policy\t\n")
	var defaults []expressionCost
	for _, c := range costs {
		if c.rendering == "default policy" {
			defaults = append(defaults, c)
		}
	}
	slices.SortStableFunc(defaults, func(a, b expressionCost) int { return cmp.Compare(b.cost, a.cost) })
	for _, c := range defaults {
		fmt.Fprintf(w, "%s %s\t%d\t%.1f%%\t\n", c.policy, c.expression, c.cost, 100*float64(c.cost)/float64(totals[[2]string{c.rendering, c.policy}].all))
	}
	w.Flush()
	t.Logf("estimated costs (budget: %d per expression, %d per policy, %d for a policy's matchConditions):\n%s", costPerExpression, costPerPolicy, costMatchConditions, b.String())
}
