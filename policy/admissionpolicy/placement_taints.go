package admissionpolicy

import (
	"fmt"

	"github.com/wincompat/wincompat/policy"
)

// The tolerations of the policy's Windows node taints as CEL (policy/placement_taints.go:
// tolerateWindowsTaints). The taints found on nodes stay with the webhook.

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
