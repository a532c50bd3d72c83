package admissionpolicy

import (
	"fmt"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// The pods policies' changes matchCondition, with which the API server skips a patch that would be
// empty. It has no Go twin: it decides nothing, it only spares the API server the work (podChanges).

// podChanges is the pods policies' last matchCondition: false exactly when the patch would be empty,
// which is when there is no record to write (recordsAny, the parts' conditions, with no entry built)
// and the pod has the marker of this version and the OS label (osLabel), and the scheduling gate and its
// label where it is to wait behind the gate (gatePending). The API server
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
	return fmt.Sprintf("!(%s) || %s.?annotations[?%s].orValue('') != %s || %s.?labels[?%s].orValue('') != %s ||\n%s ||\n%s ||\n%s",
		trigger(s, defaultWindows), optional(s.meta), quote(policy.AnnotationAdmissionPolicy), param(paramVersion),
		optional(s.meta), quote(policy.LabelOS), quote(string(corev1.Windows)),
		tooLarge(s), gatePending(s), inlineVariables(recordsAny, vars))
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
