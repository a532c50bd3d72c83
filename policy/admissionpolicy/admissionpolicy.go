// Package admissionpolicy renders the part of wincompat's decisions that needs no cluster state as
// MutatingAdmissionPolicies (admissionregistration.k8s.io/v1, GA in Kubernetes 1.36): CEL JSONPatch
// mutations the API server evaluates itself, with no network hop, certificate or replica to lose. The
// CEL is generated from the same tables the Go decisions use (policy.LinuxOnlyFields, the injector
// table), never written out by hand, and reads the policy's values from params (params.go), so that the
// policies are the same for every policy and one table keeps driving Go, CEL,
// docs and tests.
//
// What the admission policies do, for pods and the pod templates of the eight workload kinds in
// namespaces labelled wincompat.io/enabled=true: a pod that declares spec.os.name=windows, or is a
// Windows pod by its node constraints or its namespace's default-os label, gets spec.os, the non-root
// intent rule, the strip table in every container, init and ephemeral container, and the change record
// and wincompat.io/admission-policy in the same format as the webhook (pods, with the label
// wincompat.io/os=windows the webhook stamps too), the removal of mount propagation
// and the Linux-only injector opt-outs; pods also get the emptyDir, dnsPolicy, huge pages and deprecated
// annotation rewrites, the Pod Security restricted adjustments, the rewrites that narrow where the
// policy turns them on (rewrite_narrow.go), the OS nodeSelector and the configured tolerations, and the
// scheduling gate on pods whose build only their images could decide (build_schedule.go). The build,
// RuntimeClass, image resolution and tolerations of the taints found on nodes stay with the webhook and
// the leader (see README.md here for what differs and why).
//
// Each generator sits in the file named after its Go twin in policy: placement_trigger.go (the Windows
// test, spec.os), placement_scope.go (the skip label), strip.go (the strip table), strip_injectors.go
// (the injector opt-outs), rewrite.go and rewrite_narrow.go (the rewrites), build_schedule.go (the OS
// nodeSelector and the scheduling gate), placement_taints.go (the policy's tolerations) and record.go (the change record). This
// file renders the policies and bindings and joins the generators' parts in the Go decision's order;
// changes.go is the pods policies' changes matchCondition, cel.go the CEL text they share and
// containers.go the walkers over the lists of containers.
//
// The webhooks' matchConditions (deploy/webhook and the Helm chart) are generated here too, from the
// same tables (webhookconditions.go).
package admissionpolicy

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wincompat/wincompat/policy"
)

// shape is where a kind of object holds its pod spec.
type shape struct {
	name  string
	rules []admissionregistrationv1.NamedRuleWithOperations
	// spec and meta are CEL expressions of the pod spec and the metadata the record goes on; specPtr
	// and metaPtr the same as JSON pointers.
	spec, specPtr, meta, metaPtr string
	pod                          bool
	// restricted: bound only to namespaces labelled pod-security.kubernetes.io/enforce=restricted (a
	// pods policy; the other one is bound to the rest). matchConditions cannot read the namespace, and
	// the changes matchCondition must know whether the restricted rules apply, so the binding says it.
	restricted bool
}

func rule(group string, ops []admissionregistrationv1.OperationType, resources ...string) admissionregistrationv1.NamedRuleWithOperations {
	scope := admissionregistrationv1.NamespacedScope
	return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: ops,
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources, Scope: &scope},
	}}
}

var (
	create         = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	createOrUpdate = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
)

// shapes are the objects wincompat mutates, by where their pod spec sits: the same eight workload kinds
// and Pods as the webhook (deploy/webhook).
var shapes = []shape{
	{name: "pods", rules: []admissionregistrationv1.NamedRuleWithOperations{rule("", create, "pods")},
		spec: "object.spec", specPtr: "/spec", meta: "object.metadata", metaPtr: "/metadata", pod: true},
	{name: "workloads", rules: []admissionregistrationv1.NamedRuleWithOperations{
		rule("apps", createOrUpdate, "deployments", "replicasets", "statefulsets", "daemonsets"),
		rule("batch", createOrUpdate, "jobs"),
		rule("", createOrUpdate, "replicationcontrollers"),
	}, spec: "object.spec.template.spec", specPtr: "/spec/template/spec", meta: "object.spec.template.metadata", metaPtr: "/spec/template/metadata"},
	{name: "cronjobs", rules: []admissionregistrationv1.NamedRuleWithOperations{rule("batch", createOrUpdate, "cronjobs")},
		spec: "object.spec.jobTemplate.spec.template.spec", specPtr: "/spec/jobTemplate/spec/template/spec",
		meta: "object.spec.jobTemplate.spec.template.metadata", metaPtr: "/spec/jobTemplate/spec/template/metadata"},
	{name: "podtemplates", rules: []admissionregistrationv1.NamedRuleWithOperations{rule("", createOrUpdate, "podtemplates")},
		spec: "object.template.spec", specPtr: "/template/spec", meta: "object.template.metadata", metaPtr: "/template/metadata"},
}

// Options say how to render.
type Options struct {
	// Version is stamped into wincompat.io/admission-policy on every Windows pod (params' version).
	Version string
	// ExcludedNamespaces are never bound, besides the policy's excludedNamespaces.
	ExcludedNamespaces []string
	// ParamsName and ParamsNamespace name the ConfigMap the bindings take the policy's values from:
	// DefaultParamsName in kube-system when empty. Whoever may write it decides the user name and the
	// tolerations Windows pods get, so it belongs in a namespace where only administrators write.
	ParamsName, ParamsNamespace string
	// NoGate keeps Windows pods ungated (params' gate "false"): the chart sets it where
	// imageResolver.mode is fallback, in which the webhook never gates either. The zero value gates, as
	// the chart and wincompat serve do by default.
	NoGate bool
}

// DefaultParamsName is the params ConfigMap's name where Options names none (the chart names it
// <release>-admission-policy-params, in its namespace).
const DefaultParamsName = "wincompat-admission-policy-params"

// paramsRef is where the bindings read the params.
func (o Options) paramsRef() (name, namespace string) {
	name, namespace = o.ParamsName, o.ParamsNamespace
	if name == "" {
		name = DefaultParamsName
	}
	if namespace == "" {
		namespace = metav1.NamespaceSystem
	}
	return name, namespace
}

// Rendering is what installs the admission policies for one policy: the fixed policies (the same for
// every policy), their bindings (the policy's mode and excluded namespaces) and the params ConfigMap
// the bindings name (the policy's other values, which the policies read).
type Rendering struct {
	Policies []admissionregistrationv1.MutatingAdmissionPolicy
	Bindings []admissionregistrationv1.MutatingAdmissionPolicyBinding
	Params   corev1.ConfigMap
}

// Render returns the policies, one per shape of object and namespace partition (Names), their bindings
// for the opted-in namespaces the policy covers, and the params that make the policies do what pol says.
func Render(pol *policy.Policy, opts Options) Rendering {
	name, namespace := opts.paramsRef()
	return Rendering{
		Policies: Policies(),
		Bindings: Bindings(pol, opts),
		Params: corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "wincompat"}},
			Data:       Params(pol, opts),
		},
	}
}

// Policies are the MutatingAdmissionPolicies, the same whatever the policy: they read its values from
// their params (Params), so that nothing but a binding, which the chart writes, decides what they do,
// and a policy edit reaches them as a new params ConfigMap.
func Policies() []admissionregistrationv1.MutatingAdmissionPolicy {
	var policies []admissionregistrationv1.MutatingAdmissionPolicy
	for _, r := range rendered() {
		policies = append(policies, renderPolicy(r.shape, r.defaultWindows))
	}
	return policies
}

// Bindings are the policies' bindings, in Policies' order, for the namespaces pol covers, each naming
// the params ConfigMap of opts.
func Bindings(pol *policy.Policy, opts Options) []admissionregistrationv1.MutatingAdmissionPolicyBinding {
	excluded := append(append([]string{}, pol.ExcludedNamespaces...), opts.ExcludedNamespaces...)
	var bindings []admissionregistrationv1.MutatingAdmissionPolicyBinding
	for _, r := range rendered() {
		bindings = append(bindings, renderBinding(r.shape, r.defaultWindows, pol, opts, excluded))
	}
	return bindings
}

// Names are the names of the policies Render returns, and of their bindings, in Render's order,
// whatever the policy: the chart's bindings and RBAC list them.
func Names() []string {
	var names []string
	for _, r := range rendered() {
		names = append(names, policyName(r.shape, r.defaultWindows))
	}
	return names
}

// renderedPolicy is what tells one policy Render returns from the others.
type renderedPolicy struct {
	shape          shape
	defaultWindows bool
}

// rendered are the policies Render returns, in its order: per shape, for the namespaces labelled
// wincompat.io/default-os=windows or not, each variant.
func rendered() []renderedPolicy {
	var out []renderedPolicy
	for _, s := range shapes {
		for _, defaultWindows := range []bool{false, true} {
			for _, v := range variants(s) {
				out = append(out, renderedPolicy{v, defaultWindows})
			}
		}
	}
	return out
}

// policyName is the name of the policy, and of its binding, of shape s for the namespaces labelled
// wincompat.io/default-os=windows (defaultWindows) or the other ones.
func policyName(s shape, defaultWindows bool) string {
	name := "wincompat-" + s.name
	if defaultWindows {
		name += "-default-os"
	}
	if s.restricted {
		name += "-restricted"
	}
	return name
}

// variants are the policies of one shape: pods twice, for namespaces that enforce Pod Security
// restricted and for the others, whatever the policy says of podSecurityRestricted, so that the set of
// names (which the chart's bindings and RBAC list) does not depend on it.
func variants(s shape) []shape {
	if !s.pod {
		return []shape{s}
	}
	r := s
	r.restricted = true
	return []shape{s, r}
}

// renderPolicy renders the policy of one shape for the namespaces labelled wincompat.io/default-os=windows
// (defaultWindows) or the other opted-in ones. The split mirrors the webhooks': matchConditions cannot
// read the namespace, so only the binding's namespaceSelector can tell the two, and unpinned pods in the
// other namespaces (Linux pods, mostly) never reach the CEL.
func renderPolicy(s shape, defaultWindows bool) admissionregistrationv1.MutatingAdmissionPolicy {
	name := policyName(s, defaultWindows)
	fail := admissionregistrationv1.Fail
	vars, patch, changes := render(s, defaultWindows)
	conditions := []admissionregistrationv1.MatchCondition{
		{Name: "windows", Expression: trigger(s, defaultWindows)},
		{Name: "not-skipped", Expression: notSkipped(s)},
	}
	if changes != "" {
		conditions = append(conditions, admissionregistrationv1.MatchCondition{Name: "changes", Expression: changes})
	}
	return admissionregistrationv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "wincompat"}},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			// The policy's values, as Params writes them.
			ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: s.rules},
			MatchConditions:  conditions,
			Variables:        vars,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: patch},
			}},
			// Fail: a broken expression must not let a Windows pod through unvalidated; the API
			// server then rejects it with the evaluation error, as it would the unmutated pod.
			FailurePolicy:      &fail,
			ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy,
		},
	}
}

// renderBinding renders the binding of the policy of one shape (renderPolicy).
func renderBinding(s shape, defaultWindows bool, pol *policy.Policy, opts Options, excluded []string) admissionregistrationv1.MutatingAdmissionPolicyBinding {
	name := policyName(s, defaultWindows)
	defaultOS := metav1.LabelSelectorOpNotIn
	if defaultWindows {
		defaultOS = metav1.LabelSelectorOpIn
	}
	namespaces := []metav1.LabelSelectorRequirement{
		{Key: policy.LabelEnabled, Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}},
		{Key: policy.LabelDefaultOS, Operator: defaultOS, Values: []string{"windows"}},
	}
	if s.pod {
		restricted := metav1.LabelSelectorOpNotIn
		if s.restricted {
			restricted = metav1.LabelSelectorOpIn
		}
		namespaces = append(namespaces, metav1.LabelSelectorRequirement{Key: policy.LabelPodSecurityEnforce, Operator: restricted, Values: []string{"restricted"}})
	}
	namespaces = append(namespaces,
		metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: excluded},
		enforced(pol))
	paramsName, paramsNamespace := opts.paramsRef()
	// Deny: without its params a policy cannot say what the policy is, and a Windows pod must not go
	// through unmutated; the API server refuses what the binding selects until the params exist.
	deny := admissionregistrationv1.DenyAction
	return admissionregistrationv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "wincompat"}},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			ParamRef:   &admissionregistrationv1.ParamRef{Name: paramsName, Namespace: paramsNamespace, ParameterNotFoundAction: &deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchExpressions: namespaces},
			},
		},
	}
}

// enforced selects the namespaces whose mode is enforce, as policy.ModeFor reads the label: a value
// other than warn or enforce leaves the policy's mode. In warn mode nothing may change, so the policies
// are not bound there and the webhook answers alone, with warnings.
func enforced(pol *policy.Policy) metav1.LabelSelectorRequirement {
	if pol.Mode == policy.ModeWarn {
		return metav1.LabelSelectorRequirement{Key: policy.LabelMode, Operator: metav1.LabelSelectorOpIn, Values: []string{policy.ModeEnforce}}
	}
	return metav1.LabelSelectorRequirement{Key: policy.LabelMode, Operator: metav1.LabelSelectorOpNotIn, Values: []string{policy.ModeWarn}}
}

// part is one possible change as two CEL expressions over the same condition: its record entry (a
// list of zero or one JSON object strings) and its JSONPatch operations (a list). CEL map literals must
// be homogeneous, so the two cannot share one map.
//
// any is a CEL bool, true exactly when records is not empty: what the pods policies' changes
// matchCondition reads, without building a record entry or reading variables.names.
type part struct{ records, ops, any string }

func change(cond string, action policy.Action, rule policy.Rule, path jsonText, from, to jsonValue, why, ops string) part {
	return changeWhy(cond, action, rule, path, from, to, fixed(rule, why, nil), ops)
}

// changeWhy is change with a reason the rules table may derive from the change's value.
func changeWhy(cond string, action policy.Action, rule policy.Rule, path jsonText, from, to jsonValue, why reason, ops string) part {
	return part{records: fmt.Sprintf("(%s ? [%s] : [])", cond, entry(action, rule, path, from, to, why)), ops: fmt.Sprintf("(%s ? %s : [])", cond, ops), any: "(" + cond + ")"}
}

// join concatenates parts into one part.
func join(parts ...part) part {
	var r, o, a []string
	for _, p := range parts {
		r, o, a = append(r, p.records), append(o, p.ops), append(a, p.any)
	}
	return part{records: "(" + strings.Join(r, " + ") + ")", ops: "(" + strings.Join(o, " + ") + ")", any: anyOf(a)}
}

// render returns the policy's variables and its JSONPatch expression. The JSONPatch type exists only in
// the mutation's own expression, so the variables hold data (what to remove, the record) and the
// expression builds the operations.
func render(s shape, defaultWindows bool) (vars []admissionregistrationv1.Variable, patch, changes string) {
	// In the Go decision's order: spec.os, the non-root intent, the strip table, the rewrites, the
	// injector opt-outs, scheduling.
	parts := []part{inferOS(s)}
	parts = append(parts, nonRootIntent(s)...)
	removals, memory, mountPropagation, stops, huge, deprecated :=
		strips(s), memoryVolumes(s), propagation(s), stopSignals(s), hugePages(s), deprecatedAnnotations(s)
	parts = append(parts, stripGroups(removals))
	if s.pod {
		parts = append(parts,
			removeEach(memory),
			dnsPolicy(s))
	}
	parts = append(parts, removeEach(mountPropagation), removeEach(stops))
	if s.pod {
		parts = append(parts,
			removeEach(huge),
			removeEach(deprecated))
	}
	if s.pod && s.restricted {
		parts = append(parts, restricted(s)...)
	}
	if s.pod {
		parts = append(parts, runAsNonRootUser(s), memoryLimits(s))
	}
	optOuts, labelsNeeded := injectorOptOuts(s)
	parts = append(parts, optOuts...)
	prelude := metaPrelude(s, labelsNeeded)
	if s.pod {
		parts = append(parts, osNodeSelector(s), tolerations(s))
		// A pod without tolerations gets the list first; every toleration then appends to it.
		prelude += fmt.Sprintf(` + (!%s.?tolerations.hasValue() && %s ? [JSONPatch{op: "add", path: %s, value: []}] : [])`,
			optional(s.spec), untoleratedTaints(s), quote(s.specPtr+"/tolerations"))
	}
	all := join(parts...)
	recordKey := policy.AnnotationTemplateChanges
	if s.pod {
		recordKey = policy.AnnotationChanges
	}
	meta := optional(s.meta)
	// The prelude made sure the annotations exist.
	annotate := fmt.Sprintf(`[JSONPatch{op: "add", path: %s + "/annotations/" + jsonpatch.escapeKey(%s), value: variables.record}]`, quote(s.metaPtr), quote(recordKey))
	if s.pod {
		// Every Windows pod the admission policy saw carries its marker; wincompat.io/version stays the
		// webhook's, so that the audit tells pods admitted without the webhook (no build decision).
		annotate += fmt.Sprintf(` +
    (%[1]s.?annotations[?%[3]s].orValue('') == %[4]s ? [] : [JSONPatch{op: "add", path: %[2]s + "/annotations/" + jsonpatch.escapeKey(%[3]s), value: %[4]s}])`,
			meta, quote(s.metaPtr), quote(policy.AnnotationAdmissionPolicy), param(paramVersion))
	}
	// A Windows pod with nothing to change still gets the marker (the audit counts it as seen) and the
	// OS label (the leader watches it).
	unchanged := "[]"
	if s.pod {
		unchanged = fmt.Sprintf(`(%[1]s.?annotations[?%[3]s].orValue('') == %[4]s ? [] :
    %[1]s.?annotations.hasValue() ?
      [JSONPatch{op: "add", path: %[2]s + "/annotations/" + jsonpatch.escapeKey(%[3]s), value: %[4]s}] :
      [JSONPatch{op: "add", path: %[2]s + "/annotations", value: {%[3]s: %[4]s}}]) +
    %[5]s`,
			meta, quote(s.metaPtr), quote(policy.AnnotationAdmissionPolicy), param(paramVersion), osLabel(s))
	}
	vars = []admissionregistrationv1.Variable{
		{Name: "inferred", Expression: inferred(s, defaultWindows)},
		{Name: "hostProcess", Expression: hostProcessExpr(s)},
		{Name: "names", Expression: containerNames(s)},
		removals.variable(),
		{Name: "stripGroups", Expression: stripGroupsExpr},
		memory.variable(),
		mountPropagation.variable(),
		stops.variable(),
		huge.variable(),
		deprecated.variable(),
	}
	if s.pod {
		vars = append(vars, narrowVariables(s)...)
		vars = append(vars, admissionregistrationv1.Variable{Name: "taints", Expression: taintsExpr})
		changes = podChanges(s, defaultWindows, vars, all.any)
	}
	vars = append(vars, admissionregistrationv1.Variable{Name: "records", Expression: all.records})
	patch = fmt.Sprintf("size(variables.records) == 0 ? %s :\n  %s + %s +\n  %s", unchanged, prelude, all.ops, annotate)
	if s.pod {
		// Unrecorded, like the OS label, and after it: with a record to write or none.
		patch = fmt.Sprintf("(%s) +\n  %s", patch, gateOps(s))
	}
	return append(vars, []admissionregistrationv1.Variable{
		{Name: "recorded", Expression: fmt.Sprintf("%s.?annotations[?%s].orValue('')", meta, quote(recordKey))},
		{Name: "record", Expression: recordExpr},
	}...), patch, changes
}

// removeEach is the part that removes what the variable l lists: maps of a JSON pointer ("ptr") and the
// record entry of its removal ("record").
func removeEach(l listVar) part {
	return part{records: "variables." + l.name + ".map(r, r.record)", ops: "variables." + l.name + `.map(r, JSONPatch{op: "remove", path: r.ptr})`,
		any: l.any}
}

// listVar is the variable name, listing what to remove, and the test of whether it lists anything. any
// reads the same conditions as list but builds no pointer or record entry, so that the pods policies'
// changes matchCondition, evaluated on every reinvocation, costs the tests alone.
type listVar struct{ name, list, any string }

// nothingListed is the listVar of a variable that lists nothing, for a kind of object without what it
// lists.
func nothingListed(name string) listVar { return listVar{name: name, list: "[]", any: "false"} }

func (l listVar) variable() admissionregistrationv1.Variable {
	return admissionregistrationv1.Variable{Name: l.name, Expression: l.list}
}

// metaPrelude makes the metadata and its annotations (and labels: a pod's always, as it gets the OS
// label; a template's when an injector opt-out needs them) exist, so that every later operation adds
// one key.
func metaPrelude(s shape, labelsNeeded string) string {
	meta := optional(s.meta)
	out := fmt.Sprintf(`(!%[1]s.hasValue() ? [JSONPatch{op: "add", path: %[2]s, value: {}}] : []) +
  (!%[1]s.?annotations.hasValue() ? [JSONPatch{op: "add", path: %[3]s, value: {}}] : [])`, meta, quote(s.metaPtr), quote(s.metaPtr+"/annotations"))
	if s.pod {
		// The label's own operation makes the labels when there are none, before the opt-outs add theirs.
		return out + " +\n  " + osLabel(s)
	}
	if labelsNeeded != "" {
		out += fmt.Sprintf(` +
  (!%s.?labels.hasValue() && (%s) ? [JSONPatch{op: "add", path: %s, value: {}}] : [])`, meta, labelsNeeded, quote(s.metaPtr+"/labels"))
	}
	return out
}

// osLabel gives a pod policy.LabelOS=windows, as the Go decision stamps it on every Windows pod beside
// its marker: the leader watches only the pods that carry it. Not a change of the pod's, so it has no
// record entry, and none of the parts' conditions. It makes the labels when the pod has none, with the
// label in them; where the label holds windows already, as on every pass after the first, it adds
// nothing.
func osLabel(s shape) string {
	meta := optional(s.meta)
	return fmt.Sprintf(`(!%[1]s.?labels.hasValue() ? [JSONPatch{op: "add", path: %[2]s, value: {%[3]s: %[4]s}}] :
    %[1]s.?labels[?%[3]s].orValue('') == %[4]s ? [] : [JSONPatch{op: "add", path: %[5]s + jsonpatch.escapeKey(%[3]s), value: %[4]s}])`,
		meta, quote(s.metaPtr+"/labels"), quote(policy.LabelOS), quote(string(corev1.Windows)), quote(s.metaPtr+"/labels/"))
}
