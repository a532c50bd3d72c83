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
// policy turns them on (narrow.go), the OS nodeSelector and the configured tolerations. The build, RuntimeClass, image resolution and tolerations of the taints found on nodes
// stay with the webhook (see README.md here for what differs and why).
//
// The webhooks' matchConditions (deploy/webhook and the Helm chart) are generated here too, from the
// same tables (webhookconditions.go).
package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
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

// nsRestricted is the CEL of whether the restricted rules apply: the namespace enforces Pod Security
// restricted, as the binding of this policy selects it, and the policy's podSecurityRestricted is on.
func nsRestricted(s shape) string {
	if s.restricted {
		return paramOn(paramPodSecurityRestricted)
	}
	return "false"
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

// notSkipped: neither the object nor its pod template is labelled wincompat.io/skip=true (the webhook's
// objectSelector reads the object's labels, the policy the template's).
func notSkipped(s shape) string {
	cond := fmt.Sprintf("object.metadata.?labels[?%s].orValue('') != 'true'", quote(policy.LabelSkip))
	if !s.pod {
		cond += fmt.Sprintf(" && %s.?labels[?%s].orValue('') != 'true'", optional(s.meta), quote(policy.LabelSkip))
	}
	return cond
}

// trigger is the Windows test, as policy's windowsReason makes it: spec.os.name=windows, or no spec.os
// and node constraints that admit only Windows (with inferOSFromNodeSelector), or, in a default-os=windows
// namespace, constraints that admit Windows at all.
func trigger(s shape, defaultWindows bool) string {
	spec := optional(s.spec)
	declared := fmt.Sprintf("%s.?os.?name.orValue('') == 'windows'", spec)
	if defaultWindows {
		return fmt.Sprintf("%s || (!%s.?os.hasValue() && %s)", declared, spec, osAllowed(s, corev1.Windows))
	}
	return fmt.Sprintf("%s || (%s && !%s.?os.hasValue() && %s && !%s)", declared, paramOn(paramInferOS), spec, osAllowed(s, corev1.Windows), osAllowed(s, corev1.Linux))
}

// inferred is the reason recorded with the spec.os a pod without one gets (the matchCondition made it a
// Windows pod), escaped for JSON (jsonText), or "" when it has spec.os already.
func inferred(s shape, defaultWindows bool) string {
	spec := optional(s.spec)
	if !defaultWindows {
		return fmt.Sprintf("%s.?os.hasValue() ? '' : %s", spec, text(policy.ReasonPinnedToWindows))
	}
	return fmt.Sprintf("%s.?os.hasValue() ? '' : %s && %s && !%s ? %s : %s", spec, paramOn(paramInferOS), osAllowed(s, corev1.Windows), osAllowed(s, corev1.Linux),
		text(policy.ReasonPinnedToWindows), text(policy.ReasonDefaultOSWindows))
}

// osAllowed is true when the nodeSelector and the required node affinity admit nodes of os, as policy's
// allowedOS reads them: every OS label of the nodeSelector names it, and (when there are terms) some
// term's OS expressions all admit it.
func osAllowed(s shape, os corev1.OSName) string {
	spec := optional(s.spec)
	labels := celList(policy.OSLabels())
	name := quote(string(os))
	return fmt.Sprintf(`(%[1]s.all(l, %[2]s.?nodeSelector[?l].orValue(%[3]s) == %[3]s) &&
  (size(%[2]s.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([])) == 0 ||
   %[2]s.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).exists(t,
     t.?matchExpressions.orValue([]).all(e, !(e.key in %[1]s) ||
       (e.operator == 'In' ? %[3]s in e.?values.orValue([]) : e.operator == 'NotIn' ? !(%[3]s in e.?values.orValue([])) : e.operator != 'DoesNotExist')))))`,
		labels, spec, name)
}

// optional turns a path such as object.spec.template.spec into its optional form
// object.?spec.?template.?spec, which is absent rather than an error when a member is missing.
func optional(path string) string {
	parts := strings.Split(path, ".")
	return parts[0] + ".?" + strings.Join(parts[1:], ".?")
}

// celList renders strings as a CEL list literal.
func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// quote renders s as a CEL string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
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

// anyOf is the CEL disjunction of the bools in a.
func anyOf(a []string) string {
	if len(a) == 0 {
		return "false"
	}
	return "(" + strings.Join(a, " || ") + ")"
}

// kindOf is the kind of the Go field with JSON name name in t, pointers followed.
func kindOf(t reflect.Type, name string) reflect.Kind {
	for i := range t.NumField() {
		f := t.Field(i)
		if strings.Split(f.Tag.Get("json"), ",")[0] != name {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		return ft.Kind()
	}
	return reflect.Invalid
}

var scopeTypes = map[policy.Scope]reflect.Type{
	policy.PodScope:                      reflect.TypeFor[corev1.PodSpec](),
	policy.PodSecurityContextScope:       reflect.TypeFor[corev1.PodSecurityContext](),
	policy.ContainerSecurityContextScope: reflect.TypeFor[corev1.SecurityContext](),
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
	return append(vars, []admissionregistrationv1.Variable{
		{Name: "recorded", Expression: fmt.Sprintf("%s.?annotations[?%s].orValue('')", meta, quote(recordKey))},
		{Name: "record", Expression: recordExpr},
	}...), fmt.Sprintf("size(variables.records) == 0 ? %s :\n  %s + %s +\n  %s", unchanged, prelude, all.ops, annotate), changes
}

// podChanges is the pods policies' last matchCondition: false exactly when the patch would be empty,
// which is when there is no record to write (recordsAny, the parts' conditions, with no entry built)
// and the pod has the marker of this version and the OS label (osLabel). The API server
// then skips the variables, the patch, and the encode, apply and decode of the pod around an empty
// patch. That is every reinvocation of the policy after its own change (the API server reinvokes an
// IfNeeded policy that changed the object; README.md, "Reinvocation") unless a later webhook gave it
// something to do again, and every pod created as the policy leaves it. A pod the first condition turns
// away (Linux pods, in an opted-in namespace) costs it nothing: the API server evaluates every
// matchCondition, and stops only at its budget.
//
// Templates have no marker, so for them this would be the whole record, evaluated once more for every
// template in the namespace, Linux ones too; they keep the patch's own test (size(records) == 0).
func podChanges(s shape, defaultWindows bool, vars []admissionregistrationv1.Variable, recordsAny string) string {
	// The variables are bound, and so evaluated, only past the first clauses.
	return fmt.Sprintf("!(%s) || %s.?annotations[?%s].orValue('') != %s || %s.?labels[?%s].orValue('') != %s ||\n%s ||\n%s",
		trigger(s, defaultWindows), optional(s.meta), quote(policy.AnnotationAdmissionPolicy), param(paramVersion),
		optional(s.meta), quote(policy.LabelOS), quote(string(corev1.Windows)),
		tooLarge(s), inlineVariables(recordsAny, vars))
}

// changesItemLimit is how many items the record loops over (tooLarge) a pod may have for changes to
// read its record's conditions. Past it changes is true and the policy runs as if changes were not
// there. changes is one expression, held to the API server's limit of 1,000,000 per expression, which
// the policy's variables each have to themselves; at the limit its conditions cost about 52,000 when
// none holds, the dearest case (TestPodChangesConditionBudget). Charts' pods have a few dozen.
const changesItemLimit = 500

// tooLarge is true when the pod has more than changesItemLimit of what the record loops over: its
// containers of every kind, their mounts and resource names, its volumes, tolerations and annotations.
// The sizes of the pod's own lists come first, so that a pod of many containers is not looped over.
func tooLarge(s shape) string {
	spec := optional(s.spec)
	own := []string{
		fmt.Sprintf("size(%s.?volumes.orValue([]))", spec),
		fmt.Sprintf("size(%s.?tolerations.orValue([]))", spec),
		fmt.Sprintf("size(%s.?annotations.orValue({}))", optional(s.meta)),
	}
	var nested []string
	for _, l := range containerLists {
		list := fmt.Sprintf("%s.?%s.orValue([])", spec, l)
		own = append(own, "size("+list+")")
		nested = append(nested, fmt.Sprintf("%s.map(c, size(c.?volumeMounts.orValue([])) + size(c.?resources.?limits.orValue({})) + size(c.?resources.?requests.orValue({}))).sum()", list))
	}
	top := strings.Join(own, " + ")
	return fmt.Sprintf("%[1]s > %[3]d || %[1]s + %[2]s > %[3]d", top, strings.Join(nested, " + "), changesItemLimit)
}

var variableRef = regexp.MustCompile(`\bvariables\.([A-Za-z_][A-Za-z0-9_]*)\b`)

// inlineVariables rewrites expr, which reads vars, for a matchCondition, where variables do not exist:
// each variable it needs, directly or through another, is evaluated once, in order, and bound by a
// comprehension over a list of that one value (the API server's CEL has no cel.bind), so that the
// cost stays what the variables cost, never once per use.
func inlineVariables(expr string, vars []admissionregistrationv1.Variable) string {
	needed := map[string]bool{}
	read := func(expr string) string {
		for _, m := range variableRef.FindAllStringSubmatch(expr, -1) {
			needed[m[1]] = true
		}
		return variableRef.ReplaceAllString(expr, "v_$1")
	}
	body := read(expr)
	for i := len(vars) - 1; i >= 0; i-- {
		if v := vars[i]; needed[v.Name] {
			body = fmt.Sprintf("[%s].exists(v_%s,\n%s)", read(v.Expression), v.Name, body)
		}
	}
	return body
}

// restricted makes a pod in a namespace that enforces Pod Security restricted pass it, as policy's
// satisfyRestricted does after the strip table and the non-root intent: runAsNonRoot true at pod level
// and in no container false, and (when no user is named everywhere) a non-admin user at pod level.
// HostProcess pods are left alone. The conditions read the object before this patch, so they account for
// what the non-root intent rule adds in the same patch.
func restricted(s shape) []part {
	spec := optional(s.spec)
	sc := spec + ".?securityContext"
	// Rendered only into the policy bound to namespaces that enforce restricted (variants), and acting
	// only where the policy's podSecurityRestricted is on.
	enforced := paramOn(paramPodSecurityRestricted) + " && !variables.hostProcess"
	nonRoot := sc + ".?runAsNonRoot"
	podNonRoot := join(
		change(fmt.Sprintf("%s && !%s.hasValue()", enforced, nonRoot), policy.Inject, policy.RuleRestrictedNonRoot, text("spec.securityContext.runAsNonRoot"), none, value(true), policy.ReasonRestrictedNonRoot,
			fmt.Sprintf(`(%s.hasValue() ? [JSONPatch{op: "add", path: %s, value: true}] : [JSONPatch{op: "add", path: %s, value: {"runAsNonRoot": true}}])`,
				sc, quote(s.specPtr+"/securityContext/runAsNonRoot"), quote(s.specPtr+"/securityContext"))),
		change(fmt.Sprintf("%s && %s.orValue(true) == false", enforced, nonRoot), policy.Rewrite, policy.RuleRestrictedNonRoot, text("spec.securityContext.runAsNonRoot"), value(false), value(true), policy.ReasonRestrictedNonRoot,
			fmt.Sprintf(`[JSONPatch{op: "replace", path: %s, value: true}]`, quote(s.specPtr+"/securityContext/runAsNonRoot"))))
	containers := eachContainer(s, func(c, ptr string, path jsonText) part {
		return change(fmt.Sprintf("%s && %s.?securityContext.?runAsNonRoot.orValue(true) == false", enforced, c), policy.Rewrite, policy.RuleRestrictedNonRoot, concat(path, text(".securityContext.runAsNonRoot")), value(false), value(true),
			policy.ReasonRestrictedNonRoot, fmt.Sprintf(`[JSONPatch{op: "replace", path: %s + '/securityContext/runAsNonRoot', value: true}]`, ptr))
	})
	parts := []part{podNonRoot, containers}
	// Named after the non-root intent rule: the pod's own user, or the one the rule sets from a pod
	// runAsUser; a container's own, or the one the rule sets from its runAsUser when the pod names none.
	podNamed := fmt.Sprintf("(%s.?windowsOptions.?runAsUserName.hasValue() || %s.?runAsUser.orValue(0) != 0)", sc, sc)
	var allNamed []string
	for _, l := range containerLists {
		allNamed = append(allNamed, fmt.Sprintf("%s.?%s.orValue([]).all(c, c.?securityContext.hasValue() && (c.?securityContext.?windowsOptions.?runAsUserName.hasValue() || c.?securityContext.?runAsUser.orValue(0) != 0))", spec, l))
	}
	// The pod's securityContext exists by now when it did not before: runAsNonRoot was added with it.
	parts = append(parts, change(fmt.Sprintf("%s && %s && !%s && !(%s)", userSet, enforced, podNamed, strings.Join(allNamed, " && ")), policy.Inject, policy.RuleRestrictedUser,
		text("spec.securityContext.windowsOptions.runAsUserName"), none, userJSON(), policy.ReasonRestrictedUser,
		fmt.Sprintf(`(%s.?windowsOptions.hasValue() ? [JSONPatch{op: "add", path: %s, value: %s}] : [JSONPatch{op: "add", path: %s, value: {"runAsUserName": %s}}])`,
			sc, quote(s.specPtr+"/securityContext/windowsOptions/runAsUserName"), userCEL, quote(s.specPtr+"/securityContext/windowsOptions"), userCEL)))
	return parts
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

// memoryVolumes are the emptyDir volumes with medium Memory, which Windows backs with node disk anyway:
// their medium goes (policy.ReasonMemoryEmptyDir).
func memoryVolumes(s shape) listVar {
	if !s.pod {
		return nothingListed("memoryVolumes")
	}
	const cond = "v.?emptyDir.?medium.orValue('') == 'Memory'"
	entry := entry(policy.Rewrite, policy.RuleMemoryEmptyDir, concat(text("spec.volumes["), escaped("v.name"), text("].emptyDir.medium")), value("Memory"), value(""),
		fixed(policy.RuleMemoryEmptyDir, policy.ReasonMemoryEmptyDir, nil))
	return listVar{name: "memoryVolumes", list: fmt.Sprintf(`%s.?volumes.orValue([]).transformList(i, v, %s ? [{"ptr": %s + '/volumes/' + string(i) + '/emptyDir/medium', "record": %s}] : []).flatten()`,
		optional(s.spec), cond, quote(s.specPtr), entry),
		any: fmt.Sprintf("%s.?volumes.orValue([]).exists(v, %s)", optional(s.spec), cond)}
}

// pointerEscaped is the CEL of a key escaped for a JSON pointer (RFC 6901): jsonpatch.escapeKey exists
// only in the mutation's own expression, not in variables.
func pointerEscaped(key string) string {
	return key + `.replace('~', '~0').replace('/', '~1')`
}

// hugePages lists the containers' huge page limits and requests, which Windows has none of, in the Go
// decision's order: per container, limits then requests, each by resource name.
func hugePages(s shape) listVar {
	if !s.pod {
		return nothingListed("hugePages")
	}
	const isHugePages = "k.startsWith('hugepages-')"
	list := strings.Join(perContainer(s, func(ptr string, path jsonText) string {
		var lists []string
		for _, l := range []string{"limits", "requests"} {
			entry := entry(policy.Rewrite, policy.RuleHugePages, concat(path, text(".resources."+l+"["), escaped("k"), text("]")),
				escaped("string(c.resources."+l+"[k])").str(), none, fixed(policy.RuleHugePages, policy.ReasonHugePages, nil))
			lists = append(lists, fmt.Sprintf(`c.?resources.?%[1]s.orValue({}).filter(k, %[5]s).sort().map(k, {"ptr": %[2]s + '/resources/%[1]s/' + %[4]s, "record": %[3]s})`,
				l, ptr, entry, pointerEscaped("k"), isHugePages))
		}
		return strings.Join(lists, " + ")
	}), " +\n")
	return listVar{name: "hugePages", list: list, any: anyContainer(s, containerLists, func(c string) string {
		return fmt.Sprintf("%[1]s.?resources.?limits.orValue({}).exists(k, %[2]s) || %[1]s.?resources.?requests.orValue({}).exists(k, %[2]s)", c, isHugePages)
	})}
}

// deprecatedAnnotations lists the pod's deprecated seccomp and AppArmor annotations, by key.
func deprecatedAnnotations(s shape) listVar {
	if !s.pod {
		return nothingListed("deprecatedAnnotations")
	}
	key, prefixes := policy.DeprecatedLinuxAnnotations()
	match := "k == " + quote(key)
	for _, p := range prefixes {
		match += " || k.startsWith(" + quote(p) + ")"
	}
	meta := optional(s.meta)
	entry := entry(policy.Rewrite, policy.RuleDeprecatedAnnotation, concat(text("metadata.annotations["), escaped("k"), text("]")),
		escaped(meta+".?annotations.orValue({})[k]").str(), none, fixed(policy.RuleDeprecatedAnnotation, policy.ReasonDeprecatedAnnotation, nil))
	return listVar{name: "deprecatedAnnotations", list: fmt.Sprintf(`%s.?annotations.orValue({}).filter(k, %s).sort().map(k, {"ptr": %s + '/annotations/' + %s, "record": %s})`,
		meta, match, quote(s.metaPtr), pointerEscaped("k"), entry),
		any: fmt.Sprintf("%s.?annotations.orValue({}).exists(k, %s)", meta, match)}
}

// dnsPolicy rewrites ClusterFirstWithHostNet, which Windows does not support, to ClusterFirst.
func dnsPolicy(s shape) part {
	return change(fmt.Sprintf("%s.?dnsPolicy.orValue('') == 'ClusterFirstWithHostNet'", optional(s.spec)), policy.Rewrite, policy.RuleDNSPolicy, text("spec.dnsPolicy"),
		value("ClusterFirstWithHostNet"), value("ClusterFirst"), policy.ReasonDNSPolicy,
		fmt.Sprintf(`[JSONPatch{op: "replace", path: %s, value: "ClusterFirst"}]`, quote(s.specPtr+"/dnsPolicy")))
}

// injectorOptOuts gives the pod or template the opt-out of each Linux-only injector the policy names
// whose key the object does not set, as a label or an annotation: one record entry per form, as the Go
// decision records them. It also returns the condition under which labels are added.
func injectorOptOuts(s shape) ([]part, string) {
	meta := optional(s.meta)
	type optOut struct {
		policy.Injector
		missing string
	}
	// In the injector table's order, as the Go decision names them, whatever the policy's order; each
	// only when the policy names it (params' injectorOptOuts, the names joined by commas).
	byForm := map[bool][]optOut{}
	for _, in := range policy.Injectors() {
		missing := fmt.Sprintf("%[3]s && !%[1]s.?labels[?%[2]s].hasValue() && !%[1]s.?annotations[?%[2]s].hasValue()", meta, quote(in.Key), injectorNamed(in.Name))
		byForm[in.Label] = append(byForm[in.Label], optOut{in, missing})
	}
	var parts []part
	labelsNeeded := ""
	for _, label := range []bool{true, false} {
		outs := byForm[label]
		if len(outs) == 0 {
			continue
		}
		form := "annotations"
		if label {
			form = "labels"
		}
		var any, named, ops []string
		for _, o := range outs {
			any = append(any, "("+o.missing+")")
			named = append(named, fmt.Sprintf("(%s ? [%s] : [])", o.missing, value(o.Name).cel))
			ops = append(ops, fmt.Sprintf(`(%s ? [JSONPatch{op: "add", path: %s + jsonpatch.escapeKey(%s), value: %s}] : [])`,
				o.missing, quote(s.metaPtr+"/"+form+"/"), quote(o.Key), quote(o.Value)))
		}
		cond := strings.Join(any, " || ")
		// The record's "to" is the injectors' names, from which the webhook's record derives the keys
		// set and the reason (policy.EncodeChanges); each name is a constant encoded now.
		record := entry(policy.Inject, policy.RuleInjectorOptOuts, text("metadata."+form), none,
			jsonValue{"'[' + (" + strings.Join(named, " + ") + ").join(',') + ']'"}, reason{omitted: "true"})
		parts = append(parts, part{records: fmt.Sprintf("(%s ? [%s] : [])", cond, record), ops: "(" + strings.Join(ops, " + ") + ")", any: "(" + cond + ")"})
		if label {
			labelsNeeded = cond
		}
	}
	return parts, labelsNeeded
}

// hostProcessExpr: the pod or any container runs as a Windows HostProcess container (policy.HostProcess).
func hostProcessExpr(s shape) string {
	spec := optional(s.spec)
	expr := spec + ".?securityContext.?windowsOptions.?hostProcess.orValue(false)"
	for _, l := range containerLists {
		expr += fmt.Sprintf(" ||\n  %s.?%s.orValue([]).exists(c, c.?securityContext.?windowsOptions.?hostProcess.orValue(false))", spec, l)
	}
	return expr
}

// inferOS sets spec.os for a pod that is a Windows pod by its node constraints or its namespace.
func inferOS(s shape) part {
	derived := policy.Change{Rule: policy.RuleWindowsOS, Reason: policy.ReasonPinnedToWindows}
	omitted := "false"
	if !policy.ReasonWritten(derived) {
		omitted = "variables.inferred == " + quote(derived.Reason)
	}
	entry := entry(policy.Inject, policy.RuleWindowsOS, text("spec.os.name"), none, value("windows"), reason{escapedBefore("variables.inferred"), omitted})
	return part{records: fmt.Sprintf("(variables.inferred != '' ? [%s] : [])", entry), any: "variables.inferred != ''",
		ops: fmt.Sprintf(`(variables.inferred != '' ? [JSONPatch{op: "add", path: %s, value: {"name": "windows"}}] : [])`, quote(s.specPtr+"/os"))}
}

// containerLists are the lists of containers the strip table and the non-root rule visit, in the Go
// decision's order.
var containerLists = []string{"initContainers", "containers", "ephemeralContainers"}

// perContainer renders body once per list of containers, in the Go decision's order: body gets the
// CEL of the container's JSON pointer and record path, and yields a CEL list over the container c and
// its index i; each result is that list for every container of one list. The path reads the name
// escaped once per container (variables.names), not once per change.
func perContainer(s shape, body func(ptr string, path jsonText) string) []string {
	return perContainerOf(s, containerLists, body)
}

// perContainerOf is perContainer over some of the lists of containers.
func perContainerOf(s shape, lists []string, body func(ptr string, path jsonText) string) []string {
	var out []string
	for _, l := range lists {
		ptr := fmt.Sprintf("%s + '/%s/' + string(i)", quote(s.specPtr), l)
		path := concat(text("spec."+l+"["), escapedBefore(fmt.Sprintf("variables.names[%s][i]", quote(l))), text("]"))
		out = append(out, fmt.Sprintf("%s.?%s.orValue([]).transformList(i, c, %s).flatten()", optional(s.spec), l, body(ptr, path)))
	}
	return out
}

// containerNames is the names variable: per list of containers, each container's name escaped for the
// record.
func containerNames(s shape) string {
	var lists []string
	for _, l := range containerLists {
		lists = append(lists, fmt.Sprintf("%s: %s.?%s.orValue([]).map(c, %s)", quote(l), optional(s.spec), l, escaped("c.name")))
	}
	return "{" + strings.Join(lists, ",\n ") + "}"
}

// eachContainer renders a per-container part: body gets CEL expressions of the container (c), its JSON
// pointer and its record path, and returns the part for one container.
func eachContainer(s shape, body func(c, ptr string, path jsonText) part) part {
	return eachContainerOf(s, containerLists, body)
}

// eachContainerOf is eachContainer over some of the lists of containers.
func eachContainerOf(s shape, lists []string, body func(c, ptr string, path jsonText) part) part {
	records := perContainerOf(s, lists, func(ptr string, path jsonText) string { return body("c", ptr, path).records })
	ops := perContainerOf(s, lists, func(ptr string, path jsonText) string { return body("c", ptr, path).ops })
	return part{records: "(" + strings.Join(records, " + ") + ")", ops: "(" + strings.Join(ops, " + ") + ")",
		any: anyContainer(s, lists, func(c string) string { return body(c, "", text("")).any })}
}

// anyContainer is true when some container c of the lists has cond(c).
func anyContainer(s shape, lists []string, cond func(c string) string) string {
	var a []string
	for _, l := range lists {
		a = append(a, fmt.Sprintf("%s.?%s.orValue([]).exists(c, %s)", optional(s.spec), l, cond("c")))
	}
	return anyOf(a)
}

// strips is the strip table as a CEL list of groups, one per object it removes fields from (the pod's
// spec, its securityContext, each container's securityContext): a group is a list of maps of strings,
// one per field removed: its JSON pointer ("ptr"), the object's record path ("p") and its member of the
// record's group ("m", `"field":value`). One expression per row yields the patch and the record.
func strips(s shape) listVar {
	var spec, podSC, any []string
	var containerFields []policy.LinuxOnlyField
	for _, f := range policy.LinuxOnlyFields() {
		switch f.Scope {
		case policy.PodScope:
			spec = append(spec, stripOne(optional(s.spec), quote(s.specPtr), text("spec"), f))
			any = append(any, stripCond(optional(s.spec), f))
		case policy.PodSecurityContextScope:
			podSC = append(podSC, stripOne(optional(s.spec)+".?securityContext", quote(s.specPtr+"/securityContext"), text("spec.securityContext"), f))
			any = append(any, stripCond(optional(s.spec)+".?securityContext", f))
		case policy.ContainerSecurityContextScope:
			containerFields = append(containerFields, f)
		}
	}
	group := func(path jsonText, rows []string) string {
		return fmt.Sprintf(`[%s]`, strings.Join(rows, " + "))
	}
	out := []string{group(text("spec"), spec), group(text("spec.securityContext"), podSC)}
	out = append(out, perContainer(s, func(ptr string, path jsonText) string {
		var rows []string
		for _, f := range containerFields {
			rows = append(rows, stripOne("c.?securityContext", ptr+" + '/securityContext'", path, f))
		}
		return group(path, rows)
	})...)
	any = append(any, anyContainer(s, containerLists, func(c string) string {
		var rows []string
		for _, f := range containerFields {
			rows = append(rows, stripCond(c+".?securityContext", f))
		}
		return anyOf(rows)
	}))
	return listVar{name: "removals", list: strings.Join(out, " +\n"), any: anyOf(any)}
}

// stripGroupsExpr is the stripGroups variable: the groups of removals that remove anything, each with
// its object's path ("p") and its members joined ("v"), for the record.
const stripGroupsExpr = `variables.removals.filter(g, size(g) > 0).map(g, {"p": string(g[0].p), "v": g.map(r, string(r.m)).join(',')})`

// stripGroups is the strip table's part: per group, its record entry ["s", object, {members}], or -1
// for the members of the group before (policy.EncodeChanges writes the same), and the removals
// (variables.removals, which is removals.list).
func stripGroups(removals listVar) part {
	code, _ := json.Marshal(policy.ActionCode(policy.Strip))
	return part{
		records: fmt.Sprintf(`variables.stripGroups.transformList(i, g, %s + g.p + '",' + (i > 0 && variables.stripGroups[i - 1].v == g.v ? '-1' : '{' + g.v + '}') + ']')`, quote("["+string(code)+`,"`)),
		ops:     `variables.removals.map(g, g.map(r, JSONPatch{op: "remove", path: r.ptr})).flatten()`,
		any:     removals.any,
	}
}

// propagation lists the containers' mount propagation, to go too: Bidirectional is valid only for
// privileged containers, which the strip table just ended, and Windows has none of it.
func propagation(s shape) listVar {
	const cond = "m.?mountPropagation.hasValue()"
	list := strings.Join(perContainer(s, func(ptr string, path jsonText) string {
		entry := entry(policy.Rewrite, policy.RuleMountPropagation, concat(path, text(".volumeMounts["), escaped("m.mountPath"), text("].mountPropagation")),
			escaped("m.mountPropagation").str(), none, fixed(policy.RuleMountPropagation, policy.ReasonMountPropagation, nil))
		return fmt.Sprintf(`c.?volumeMounts.orValue([]).transformList(j, m, %s ? [{"ptr": %s + '/volumeMounts/' + string(j) + '/mountPropagation', "record": %s}] : []).flatten()`, cond, ptr, entry)
	}), " +\n")
	return listVar{name: "propagation", list: list, any: anyContainer(s, containerLists, func(c string) string {
		return fmt.Sprintf("%s.?volumeMounts.orValue([]).exists(m, %s)", c, cond)
	})}
}

// stopSignals lists the containers' stop signals Windows cannot send (policy.RuleStopSignal), to go.
func stopSignals(s shape) listVar {
	var windows []string
	for _, sig := range policy.WindowsStopSignals() {
		windows = append(windows, quote(string(sig)))
	}
	refused := func(c string) string {
		return fmt.Sprintf("%[1]s.?lifecycle.?stopSignal.hasValue() && !(%[1]s.lifecycle.stopSignal in [%[2]s])", c, strings.Join(windows, ", "))
	}
	list := strings.Join(perContainer(s, func(ptr string, path jsonText) string {
		entry := entry(policy.Rewrite, policy.RuleStopSignal, concat(path, text(".lifecycle.stopSignal")),
			escaped("c.lifecycle.stopSignal").str(), none, fixed(policy.RuleStopSignal, policy.ReasonStopSignal, nil))
		return fmt.Sprintf(`(%s ? [{"ptr": %s + '/lifecycle/stopSignal', "record": %s}] : [])`, refused("c"), ptr, entry)
	}), " +\n")
	return listVar{name: "stopSignals", list: list, any: anyContainer(s, containerLists, refused)}
}

// stripOne removes field f of the object at parent (an optional CEL expression) when the API server
// would reject it; parentPtr is a CEL string, parentPath the record's path of parent. Its member of the
// record's group is the field and its value, or null for a value CEL cannot render (lists and objects).
func stripOne(parent, parentPtr string, parentPath jsonText, f policy.LinuxOnlyField) string {
	value := parent + ".?" + f.Name
	cond := stripCond(parent, f)
	from := scalar(value+".value()", kindOf(scopeTypes[f.Scope], f.Name))
	if from.cel == "" {
		from = jsonValue{quote("null")}
	}
	field, _ := json.Marshal(f.Name)
	return fmt.Sprintf(`(%s ? [{"ptr": %s + '/%s', "p": %s, "m": %s + %s}] : [])`, cond, parentPtr, f.Name, parentPath.cel, quote(string(field)+":"), from.cel)
}

// stripCond is true when the API server would reject field f of the object at parent (an optional CEL
// expression) on a Windows pod.
func stripCond(parent string, f policy.LinuxOnlyField) string {
	value := parent + ".?" + f.Name
	switch f.RejectedIf {
	case policy.WhenTrue:
		return value + ".orValue(false) == true"
	case policy.WhenNonEmpty:
		return "size(" + value + ".orValue([])) > 0"
	}
	return value + ".hasValue()"
}

// nonRootIntent keeps a non-zero runAsUser's intent as windowsOptions.runAsUserName before the strip
// table removes runAsUser: at pod level when the pod names no Windows user, else per container without
// its own. HostProcess pods are left alone.
func nonRootIntent(s shape) []part {
	const reason = policy.ReasonNonRootIntent
	sc := optional(s.spec) + ".?securityContext"
	// An empty nonRootUserName turns the rule off.
	const applies = userSet + " && !variables.hostProcess"
	user := userCEL
	podUser := sc + ".?windowsOptions.?runAsUserName.hasValue()"
	to := userJSON()
	pod := change(fmt.Sprintf("%s && !%s && %s.?runAsUser.orValue(0) != 0", applies, podUser, sc),
		policy.Inject, policy.RuleNonRootIntent, text("spec.securityContext.windowsOptions.runAsUserName"), none, to, reason,
		fmt.Sprintf(`(%s.?windowsOptions.hasValue() ? [JSONPatch{op: "add", path: %s, value: %s}] : [JSONPatch{op: "add", path: %s, value: {"runAsUserName": %s}}])`,
			sc, quote(s.specPtr+"/securityContext/windowsOptions/runAsUserName"), user, quote(s.specPtr+"/securityContext/windowsOptions"), user))
	// A pod-level user, given or just set, covers every container without its own.
	podCovers := fmt.Sprintf("(%s || %s.?runAsUser.orValue(0) != 0)", podUser, sc)
	containers := eachContainer(s, func(c, ptr string, path jsonText) part {
		cond := fmt.Sprintf("%s && !%s && !%s.?securityContext.?windowsOptions.?runAsUserName.hasValue() && %s.?securityContext.?runAsUser.orValue(0) != 0",
			applies, podCovers, c, c)
		ops := fmt.Sprintf(`(%s.?securityContext.?windowsOptions.hasValue() ? [JSONPatch{op: "add", path: %s + '/securityContext/windowsOptions/runAsUserName', value: %s}] : [JSONPatch{op: "add", path: %s + '/securityContext/windowsOptions', value: {"runAsUserName": %s}}])`,
			c, ptr, user, ptr, user)
		return change(cond, policy.Inject, policy.RuleNonRootIntent, concat(path, text(".securityContext.windowsOptions.runAsUserName")), none, to, reason, ops)
	})
	return []part{pod, containers}
}

// osNodeSelector pins kubernetes.io/os=windows, replacing another value.
func osNodeSelector(s shape) part {
	ns := optional(s.spec) + ".?nodeSelector"
	key := quote(corev1.LabelOSStable)
	add := change(fmt.Sprintf("!%s[?%s].hasValue()", ns, key), policy.Inject, policy.RuleWindowsNodeSelector, text("spec.nodeSelector["+corev1.LabelOSStable+"]"), none, value("windows"),
		policy.ReasonPinned,
		fmt.Sprintf(`(%s.hasValue() ? [JSONPatch{op: "add", path: %s + jsonpatch.escapeKey(%s), value: "windows"}] : [JSONPatch{op: "add", path: %s, value: {%s: "windows"}}])`,
			ns, quote(s.specPtr+"/nodeSelector/"), key, quote(s.specPtr+"/nodeSelector"), key))
	replace := change(fmt.Sprintf("%s[?%s].orValue('windows') != 'windows'", ns, key), policy.Rewrite, policy.RuleWindowsNodeSelector, text("spec.nodeSelector["+corev1.LabelOSStable+"]"),
		escaped(fmt.Sprintf("%s[?%s].value()", ns, key)).str(), value("windows"), "conflicted with a Windows pod",
		fmt.Sprintf(`[JSONPatch{op: "replace", path: %s + jsonpatch.escapeKey(%s), value: "windows"}]`, quote(s.specPtr+"/nodeSelector/"), key))
	return join(add, replace)
}

// tolerates is true when a toleration the pod has tolerates taint w (a CEL map of the taints
// variable), read as corev1.Toleration's ToleratesTaint reads it: the effect empty or equal, the key
// empty or equal, Exists or an equal value.
func tolerates(s shape, w string) string {
	return fmt.Sprintf("%[1]s.?tolerations.orValue([]).exists(t, (t.?effect.orValue('') == '' || t.effect == %[2]s.effect) && (t.?key.orValue('') == '' || t.key == %[2]s.key) && (t.?operator.orValue('Equal') == 'Exists' || t.?value.orValue('') == %[2]s.value))",
		optional(s.spec), w)
}

// untoleratedTaints is true when some taint of the policy is not tolerated by the pod as it came.
func untoleratedTaints(s shape) string {
	return "variables.taints.exists(w, !" + tolerates(s, "w") + ")"
}

// tolerations appends, in the policy's order, a toleration of each taint the pod does not tolerate;
// the list exists by then (see the prelude in render). The record writes each toleration as the taint
// it tolerates ("key=value:effect", policy.RecordedTo), which is the taint's params entry as it is:
// keys, values and effects of a valid policy need no escaping. Its reason is the one the rules table
// derives from the toleration, so it is left out, as the webhook leaves it out.
func tolerations(s shape) part {
	untolerated := "variables.taints.filter(w, !" + tolerates(s, "w") + ")"
	record := entry(policy.Inject, policy.RuleWindowsTolerations, text("spec.tolerations"), none, jsonValue{`'"' + w.code + '"'`}, reason{omitted: "true"})
	return part{
		records: fmt.Sprintf("%s.map(w, %s)", untolerated, record),
		ops:     fmt.Sprintf(`%s.map(w, JSONPatch{op: "add", path: %s, value: {"key": string(w.key), "operator": "Equal", "value": string(w.value), "effect": string(w.effect)}})`, untolerated, quote(s.specPtr+"/tolerations/-")),
		any:     untoleratedTaints(s),
	}
}
