package admissionpolicy

import (
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/wincompat/wincompat/policy"
)

// Every CEL expression wincompat ships compiles with the API server's compiler within its budgets
// (apiservercel_test.go): the admission policies' here, the webhooks' matchConditions in
// webhookconditions_test.go, and the chart's own-writes policy in ownwrites_test.go.

// mutatingPolicyExpressions are the expressions of p in the order the API server compiles them.
func mutatingPolicyExpressions(p admissionregistrationv1.MutatingAdmissionPolicy) []celExpression {
	var out []celExpression
	defer func() {
		for i := range out {
			out[i].params = p.Spec.ParamKind != nil
		}
	}()
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
			out = append(out, celExpression{where: fmt.Sprintf("%s mutations[%d]", p.Name, i), kind: applyConfiguration, expr: m.ApplyConfiguration.Expression})
		}
	}
	return out
}

// policiesShipped are the policies whose rendering must compile: the default, which the chart's
// hybrid engine applies unchanged, and the other branches of the generator (no inference from node
// constraints, no non-root user, no Pod Security, no injectors, several taints; the rewrites that
// narrow).
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
	// The rewrites that narrow, off by default, with Pod Security restricted's adjustments, whose effect
	// the user rule reads (without them that condition is the literal false).
	narrow, err := policy.Load([]byte(`apiVersion: wincompat.io/v1alpha1
kind: Policy
userForRunAsNonRoot: true
memoryLimits: {fromRequests: true, default: 512Mi}
`))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*policy.Policy{"default policy": policy.Default(), "other branches": other, "narrowing rewrites": narrow}
}

// Every MutatingAdmissionPolicy `wincompat policy export` and hybrid mode write compiles on the API
// server, and each expression's estimated cost is within its budget.
func TestMutatingAdmissionPoliciesCompile(t *testing.T) {
	for name, pol := range policiesShipped(t) {
		t.Run(name, func(t *testing.T) {
			policies := Render(pol, Options{Version: "v1.2.3"}).Policies
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
	policies := Render(policy.Default(), Options{Version: "v1"}).Policies
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
		{"not an apply configuration", []celExpression{{where: "p", kind: applyConfiguration, expr: "[Object{}]"}}, "does not compile"},
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
