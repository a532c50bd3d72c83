package admissionpolicy

import (
	"fmt"
	"strings"

	"github.com/wincompat/wincompat/policy"
)

// The Linux-only injectors' opt-outs as CEL (policy/strip_injectors.go: Injectors,
// optOutOfInjectors), from the same table.

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
