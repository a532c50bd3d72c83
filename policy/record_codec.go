package policy

import (
	"bytes"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A record is {"v":3,"c":[entry,...]}. An entry is one change,
//
//	[action, path, from, to, rule, reason]
//
// with trailing absent elements left out and null for an absent one before a present one, and:
//
//   - the action is a letter: s(trip), r(ewrite), i(nject), w(arn);
//   - the path is null when it is its rule's home (recordHomes; for injector-opt-outs, the metadata
//     form the injectors named use);
//   - the rule is null, or left out, for a strip-table row: the path names the row;
//   - the reason is left out when the rules table gives it back;
//   - "to" is written by what the tables make it from: the injectors' names for injector-opt-outs, the
//     taint "key=value:effect" for windows-tolerations, the builds for build's node affinity;
//   - the strips of one object by the strip table (the pod's spec, its securityContext, a container's
//     securityContext) are one entry, ["s", object, {field: from, ...}] with null for a value not
//     written, or ["s", object, -1] when they are the entry before's fields and values.
//
// Every element left out is one the tables give back exactly; the encoder checks that before it leaves
// one out, and writes it otherwise. The admission policies write the same bytes for the same changes
// (policy/admissionpolicy), which is why each rule here is one CEL can follow without looking back
// further than one entry.

// recordHomes are the paths the rules' changes have nearly always; an entry with a null path has its
// rule's. Part of the format: an entry may be added, never changed.
var recordHomes = map[Rule]string{
	RuleWindowsOS:           "spec.os.name",
	RuleNonRootIntent:       "spec.securityContext.windowsOptions.runAsUserName",
	RuleRestrictedNonRoot:   "spec.securityContext.runAsNonRoot",
	RuleRestrictedUser:      "spec.securityContext.windowsOptions.runAsUserName",
	RuleRunAsNonRootUser:    "spec.securityContext.windowsOptions.runAsUserName",
	RuleDNSPolicy:           "spec.dnsPolicy",
	RuleHostNetwork:         "spec.hostNetwork",
	RuleWindowsTolerations:  "spec.tolerations",
	RuleWindowsNodeSelector: "spec.nodeSelector[" + corev1.LabelOSStable + "]",
	RuleArch:                "spec.nodeSelector[" + corev1.LabelArchStable + "]",
	RuleRuntimeClass:        "spec.runtimeClassName",
	RuleBuildGate:           gatePath,
}

// buildPinPath is where build pins the pod with a nodeSelector and warns about the build chosen.
const buildPinPath = "spec.nodeSelector[" + corev1.LabelWindowsBuild + "]"

const affinityTermsPath = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"

// optOutPaths are where injector-opt-outs writes annotations' and labels' opt-outs.
const (
	optOutLabels      = "metadata.labels"
	optOutAnnotations = "metadata.annotations"
)

// PathOmitted says whether the entry of a change of rule r leaves path out. For
// injector-opt-outs it is so when every injector named uses that form, which the admission policies,
// writing one entry per form, always have.
func PathOmitted(r Rule, path string) bool {
	if r == RuleInjectorOptOuts {
		return path == optOutLabels || path == optOutAnnotations
	}
	return path != "" && homePath(r, 0, nil) == path
}

// homePath is the path an entry of rule r leaves out; set the injectors named, for
// injector-opt-outs; to the "to" it writes, for build (its pin in the node affinity writes the builds
// as a list, its nodeSelector pin and its warnings are at the nodeSelector). "" for none.
func homePath(r Rule, set injectorSet, to json.RawMessage) string {
	switch r {
	case RuleBuild:
		if bytes.HasPrefix(to, []byte("[")) {
			return affinityTermsPath
		}
		return buildPinPath
	case RuleInjectorOptOuts:
	default:
		return recordHomes[r]
	}
	form := ""
	for i, in := range linuxOnlyInjectors {
		if set&(1<<i) == 0 {
			continue
		}
		f := optOutAnnotations
		if in.Label {
			f = optOutLabels
		}
		if form != "" && form != f {
			return ""
		}
		form = f
	}
	return form
}

// ActionCode is the letter an entry writes for action a; the admission policies write theirs
// by it.
func ActionCode(a Action) string { return actionCode(a) }

// actionCode is the letter the record writes for an action; an action of no wincompat (read from a
// record its author wrote) is written as it is, after "=" when it could be read as a letter or so.
func actionCode(a Action) string {
	switch a {
	case Strip:
		return "s"
	case Rewrite:
		return "r"
	case Inject:
		return "i"
	case Warn:
		return "w"
	}
	if len(a) == 1 || strings.HasPrefix(string(a), "=") {
		return "=" + string(a)
	}
	return string(a)
}

func actionOf(code string) Action {
	switch code {
	case "s":
		return Strip
	case "r":
		return Rewrite
	case "i":
		return Inject
	case "w":
		return Warn
	}
	return Action(strings.TrimPrefix(code, "="))
}

// EncodeChanges renders changes as a record.
func EncodeChanges(changes []Change) string { return appendRecord("", noRecord, changes) }

// appendRecord writes changes after the record prior of kind (decodeRecord): after its entries for an
// openRecord, on their own for noRecord (prior, if any, is replaced). The admission policies write the
// same (policy/admissionpolicy, recordExpr).
func appendRecord(prior string, kind recordKind, changes []Change) string {
	size := len(RecordPrefix) + 12
	if kind == openRecord {
		size += len(prior)
	}
	for _, c := range changes {
		// Brackets, quotes, commas and nulls take up to 20 bytes; a strip takes far less. Most reasons and
		// opt-outs' keys are left out; one that is written, or a string that needs escaping, grows the
		// buffer once more.
		size += 20 + len(c.Path) + len(c.From) + len(c.Rule)
		if c.Rule != RuleInjectorOptOuts {
			size += len(c.To)
		}
	}
	var b strings.Builder // its String shares the buffer: the record is not copied
	b.Grow(size)
	if kind == openRecord {
		b.WriteString(prior[:len(prior)-2])
		if !strings.HasSuffix(prior, "[]}") {
			b.WriteByte(',')
		}
	} else {
		b.WriteString(RecordPrefix + `"c":[`)
	}
	writeEntries(&b, changes)
	b.WriteString("]}")
	return b.String()
}

// stripMember is c as a member of a group of strips: the object it was removed from and its field; ok
// is false for a change written as an entry of its own (not a strip-table row's, or with another
// reason, or with a value the group cannot hold).
func stripMember(c Change) (parent, field string, ok bool) {
	if c.Action != Strip || len(c.To) > 0 || string(c.From) == "null" || c.Reason != ReasonLinuxOnly {
		return "", "", false
	}
	row, parent, ok := stripRowOf(c.Path)
	if !ok || RuleOf(c) != row.rule {
		return "", "", false
	}
	return parent, row.name, true
}

// writeEntries writes changes as entries, comma-separated: consecutive strips of one object
// as one group (a change marked split starts another: two containers of one name, which the admission
// policies write apart), a group with the fields and values of the entry before as -1.
func writeEntries(b *strings.Builder, changes []Change) {
	prev := []Change(nil) // the entry before, when a group
	for i := 0; i < len(changes); {
		if i > 0 {
			b.WriteByte(',')
		}
		parent, _, ok := stripMember(changes[i])
		if !ok {
			writeEntry(b, changes[i])
			prev = nil
			i++
			continue
		}
		j := i + 1
		for j < len(changes) && !changes[j].split {
			if p, _, ok := stripMember(changes[j]); !ok || p != parent {
				break
			}
			j++
		}
		b.WriteString(`["s",`)
		writeJSONString(b, parent)
		b.WriteByte(',')
		if sameMembers(prev, changes[i:j]) {
			b.WriteString("-1")
		} else {
			b.WriteByte('{')
			for k, c := range changes[i:j] {
				if k > 0 {
					b.WriteByte(',')
				}
				_, field, _ := stripMember(c)
				b.WriteString(`"` + field + `":`) // the table's field names need no escaping
				if len(c.From) == 0 {
					b.WriteString("null")
				} else {
					b.Write(c.From)
				}
			}
			b.WriteByte('}')
		}
		b.WriteByte(']')
		prev = changes[i:j]
		i = j
	}
}

// sameMembers says whether two groups of strips write the same fields and values.
func sameMembers(a, b []Change) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		_, fa, _ := stripMember(a[i])
		_, fb, _ := stripMember(b[i])
		if fa != fb || string(a[i].From) != string(b[i].From) {
			return false
		}
	}
	return true
}

// writeEntry writes one change as [action, path, from, to, rule, reason], trailing absent ones left out.
// A rule left out (null) reads back as the strip-table row of the path; a path left out as the rule's
// home; a reason left out as the one the tables give.
func writeEntry(b *strings.Builder, c Change) {
	r := RuleOf(c)
	hasRule := RuleWritten(c.Action, r) || stripRuleOf(c.Path) != r
	var optOuts injectorSet // the injectors named instead of To
	if r == RuleInjectorOptOuts {
		if set, ok := optOutsSet(c.To); ok {
			optOuts = set
		}
	}
	to := recordedTo(r, c.Path, c.To)
	var hasReason bool
	switch {
	case r == RuleInjectorOptOuts:
		hasReason = optOuts == 0 || !optOutReasonIs(c.Reason, optOuts)
	case r == RuleWindowsTolerations:
		hasReason = !tolerationReasonIs(c.Reason, c.To)
	case r == RuleBuild && bytes.HasPrefix(to, []byte("[")):
		hasReason = !buildsReasonIs(c.Reason, to)
	default:
		hasReason = r == "" || c.Reason != derivedReason(c, r)
	}
	if optOuts != 0 {
		to = json.RawMessage("[]") // a placeholder: the names are written below
	}
	home := homePath(r, optOuts, to)
	omitPath := hasRule && home != "" && c.Path == home
	n := 0 // the elements after the path written: from, to, rule, reason
	switch {
	case hasReason:
		n = 4
	case hasRule:
		n = 3
	case len(to) > 0:
		n = 2
	case len(c.From) > 0:
		n = 1
	}
	b.WriteByte('[')
	writeJSONString(b, actionCode(c.Action))
	b.WriteByte(',')
	if omitPath {
		b.WriteString("null")
	} else {
		writeJSONString(b, c.Path)
	}
	// From and To are valid JSON: rendered by jsonValue, or read back from a record.
	for i, v := range [2]json.RawMessage{c.From, to} {
		if i >= n {
			break
		}
		b.WriteByte(',')
		switch {
		case i == 1 && optOuts != 0:
			writeNames(b, optOuts)
		case len(v) == 0:
			b.WriteString("null")
		default:
			b.Write(v)
		}
	}
	if n >= 3 {
		switch {
		case !hasRule:
			b.WriteString(",null")
		case r == "":
			b.WriteString("," + noRule)
		default:
			b.WriteByte(',')
			writeJSONString(b, string(r)) // a code read back from a record is its author's
		}
	}
	if n == 4 {
		b.WriteByte(',')
		if args, ok := reasonArgs(r, c.Reason); ok {
			b.Write(args)
		} else {
			writeJSONString(b, c.Reason)
		}
	}
	b.WriteByte(']')
}
