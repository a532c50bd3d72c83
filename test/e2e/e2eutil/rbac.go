package e2eutil

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rbacGrant is what wincompat may do with one resource: verbs on any object, and verbs only on objects
// named by resourceNames.
type rbacGrant struct{ any, byName []string }

// allowedRBAC is every permission wincompat needs, per role kind, API group and resource (each one is
// explained in templates/rbac.yaml). A rule the chart renders beyond it fails TestChartSecurity: a new
// permission must be added here, on purpose, with its reason in the template.
var allowedRBAC = map[string]map[string]rbacGrant{
	"ClusterRole": {
		"/namespaces":                {any: []string{"get", "list", "watch"}},
		"/nodes":                     {any: []string{"list", "watch"}},
		"node.k8s.io/runtimeclasses": {any: []string{"get", "list", "watch", "create"}, byName: []string{"update", "delete"}},
		"events.k8s.io/events":       {any: []string{"create", "patch"}},
		// misplacedPods: watch pods and the kubelet's Events; with remediation on, ask a pod's
		// PodDisruptionBudget by an eviction in dry run, then delete it, both pinned by the chart's
		// ValidatingAdmissionPolicy (evictions only in dry run, deletes only of the pods remediation picks).
		// Gated placement: the leader reads gated pods and patches each to pin its build and remove the
		// gate, pinned by the same policy (only a pod carrying the gate, only that update); the chart's
		// uninstall hook lists and patches pods to remove the gate.
		"/pods":          {any: []string{"get", "list", "watch", "patch", "delete"}},
		"/pods/eviction": {any: []string{"create"}},
		"/events":        {any: []string{"list", "watch"}},
		"admissionregistration.k8s.io/mutatingwebhookconfigurations":   {byName: []string{"get", "update"}},
		"admissionregistration.k8s.io/validatingwebhookconfigurations": {byName: []string{"get", "update"}},
		// engine hybrid: nothing. The chart installs the MutatingAdmissionPolicies, their bindings and
		// params; no admission control sees writes of them, so wincompat may not touch them (issue 40).
	},
	"Role": {
		"coordination.k8s.io/leases": {any: []string{"create"}, byName: []string{"get", "update"}},
		"/events":                    {any: []string{"create", "patch"}},
		"events.k8s.io/events":       {any: []string{"create", "patch"}},
		"/secrets":                   {any: []string{"create"}, byName: []string{"get", "update"}},
		// The last good policy.
		"/configmaps": {byName: []string{"get", "patch"}},
	},
}

// RoleRules reads the rules of a ClusterRole or Role.
func RoleRules(obj *unstructured.Unstructured) ([]rbacv1.PolicyRule, error) {
	js, _ := obj.MarshalJSON()
	var role struct {
		Rules []rbacv1.PolicyRule `json:"rules"`
	}
	err := json.Unmarshal(js, &role)
	return role.Rules, err
}

// rbacFindings lists every permission a ClusterRole or Role grants beyond allowedRBAC.
func RBACFindings(obj *unstructured.Unstructured) []string {
	rules, err := RoleRules(obj)
	if err != nil {
		return []string{err.Error()}
	}
	allowed := allowedRBAC[obj.GetKind()]
	var findings []string
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			findings = append(findings, fmt.Sprintf("%s grants non-resource URLs %q", obj.GetKind(), r.NonResourceURLs))
		}
		for _, group := range r.APIGroups {
			for _, resource := range r.Resources {
				key := group + "/" + resource
				grant, known := allowed[key]
				for _, verb := range r.Verbs {
					switch {
					case !known:
						findings = append(findings, fmt.Sprintf("%s grants %s on %s, which wincompat has no use for", obj.GetKind(), verb, key))
					case slices.Contains(grant.any, verb):
					case slices.Contains(grant.byName, verb) && len(r.ResourceNames) > 0:
					case slices.Contains(grant.byName, verb):
						findings = append(findings, fmt.Sprintf("%s grants %s on every %s; only named ones are allowed", obj.GetKind(), verb, key))
					default:
						findings = append(findings, fmt.Sprintf("%s grants %s on %s; allowed: %q, by name: %q", obj.GetKind(), verb, key, grant.any, grant.byName))
					}
				}
			}
		}
	}
	return findings
}

// CheckRBAC logs every rule of a role, so that the test output is the chart's RBAC in full, and fails
// on every finding of rbacFindings.
func CheckRBAC(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	rules, _ := RoleRules(obj)
	for _, r := range rules {
		t.Logf("%s %s: apiGroups %q resources %q resourceNames %q verbs %q", obj.GetKind(), obj.GetName(), r.APIGroups, r.Resources, r.ResourceNames, r.Verbs)
	}
	for _, f := range RBACFindings(obj) {
		t.Errorf("%s %s: %s", obj.GetKind(), obj.GetName(), f)
	}
}

func DeploymentOf(t *testing.T, obj *unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	js, _ := obj.MarshalJSON()
	var d appsv1.Deployment
	if err := json.Unmarshal(js, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.Containers) == 0 || d.Spec.Template.Spec.Containers[0].SecurityContext == nil ||
		d.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities == nil || d.Spec.Template.Spec.SecurityContext == nil ||
		d.Spec.Template.Spec.SecurityContext.SeccompProfile == nil {
		t.Fatalf("the chart's Deployment lacks the security context the checks mutate: %s", js)
	}
	return &d
}
