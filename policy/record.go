package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// RecordVersion is the version of the change record this wincompat writes. Version 1 (wincompat before
// issue 29) is a JSON array of {"action","path","from","to","reason"} objects; version 2 is an object
// {"v":2,"c":[entry,...]} whose entries are arrays
//
//	[action, path, from, to, rule, reason]
//
// with trailing absent elements left out and null for an absent one before a present one. The rule is
// a code of the rules table, and a reason equal to the rule's fixed reason is left out: the prose is
// the table's, not the record's. A strip-table change leaves its rule out too (its path names the row).
// Both formats are JSON, so `kubectl get -o jsonpath` and jq read either; DecodeChanges reads both.
const RecordVersion = 2

// RecordPrefix opens every version 2 record; a version 1 record opens with '['. The admission policies
// tell the versions apart by it.
const RecordPrefix = `{"v":2,`

// noRule is the rule element of a change whose rule is unknown (read back from a version 1 record with
// a reason no rule has): "" rather than null, which would mean the strip-table row of its path.
const noRule = `""`

// stripFields are the strip table's rows, listed once.
var stripFields = LinuxOnlyFields()

// stripRuleOf is the strip-table row whose removal path is: "spec.<name>" or
// "spec.securityContext.<name>" for the pod's rows, a container list's "spec.<list>[" then
// "].securityContext.<name>" for the containers' rows; "" for any other path. It reads the path's ends
// only, which the row writes after the container's name, so a name holding brackets or dots (before
// validation a pod author's name can hold anything) cannot make it another row.
func stripRuleOf(path string) Rule {
	for _, f := range stripFields {
		switch f.Scope {
		case ContainerSecurityContextScope:
			if !strings.HasSuffix(path, "].securityContext."+f.Name) {
				continue
			}
			for _, list := range []string{"spec.containers[", "spec.initContainers[", "spec.ephemeralContainers["} {
				if strings.HasPrefix(path, list) && len(path) >= len(list)+len("].securityContext.")+len(f.Name) {
					return f.Rule()
				}
			}
		default:
			if path == f.Path() {
				return f.Rule()
			}
		}
	}
	return ""
}

// derivedReason is the reason a change of rule r records when its reason is left out: what the rules
// table says of the rule, or for the rules whose reason names what they set, the reason rendered from
// it. "" when the table gives none. A reason is left out only when this gives it back exactly, so a
// reworded reason or an unusual value is never lost, only written.
func derivedReason(c Change, r Rule) string {
	switch r {
	case RuleInjectorOptOuts:
		return injectorOptOutReasonOf(c.To)
	case RuleWindowsTolerations:
		var t corev1.Toleration
		if json.Unmarshal(c.To, &t) != nil {
			return ""
		}
		return windowsTaintReason(corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	if row, ok := rulesByCode[r]; ok && len(row.reasons) > 0 {
		return row.reasons[0]
	}
	return ""
}

// RuleWritten says whether a change of action whose rule is r writes the code in a version 2 record:
// a strip-table rule does not, its path names the row. The admission policies shape their entries by it.
func RuleWritten(action Action, r Rule) bool {
	return !(action == Strip && strings.HasPrefix(string(r), "strip:"))
}

// ReasonWritten says whether change c (its Rule set) writes its reason: not when the rules table
// derives it. The admission policies shape their entries by it.
func ReasonWritten(c Change) bool {
	r := RuleOf(c)
	return r == "" || c.Reason != derivedReason(c, r)
}

// EncodeChanges renders changes as a version 2 record.
func EncodeChanges(changes []Change) string { return encodeRecord("", changes) }

// encodeRecord renders a version 2 record; v1, when not "", is a version 1 list kept as it was (the
// record of an object an earlier wincompat changed), written before the new entries.
func encodeRecord(v1 string, changes []Change) string {
	size := len(RecordPrefix) + len(v1) + 12
	for _, c := range changes {
		// Brackets, quotes, commas and nulls take 20 bytes; a string that needs escaping grows it once more.
		size += 24 + len(c.Action) + len(c.Path) + len(c.From) + len(c.To) + len(c.Rule) + len(c.Reason)
	}
	var b strings.Builder // its String shares the buffer: the record is not copied
	b.Grow(size)
	b.WriteString(RecordPrefix)
	if v1 != "" {
		b.WriteString(`"v1":`)
		b.WriteString(v1)
		b.WriteByte(',')
	}
	b.WriteString(`"c":[`)
	for i, c := range changes {
		if i > 0 {
			b.WriteByte(',')
		}
		writeEntry(&b, c)
	}
	b.WriteString("]}")
	return b.String()
}

// writeEntry writes one change as [action, path, from, to, rule, reason], trailing absent ones left out.
// A rule left out (null) reads back as the strip-table row of the path; a reason left out as the rule's.
func writeEntry(b *strings.Builder, c Change) {
	r := RuleOf(c)
	var rule, reason string
	if RuleWritten(c.Action, r) || stripRuleOf(c.Path) != r {
		rule = noRule
		if r != "" {
			var q strings.Builder // a code read back from a record is its author's
			writeJSONString(&q, string(r))
			rule = q.String()
		}
	}
	if r == "" || c.Reason != derivedReason(c, r) {
		var q strings.Builder
		writeJSONString(&q, c.Reason)
		reason = q.String()
	}
	// From and To are valid JSON: rendered by jsonValue, or read back from a record.
	elems := [4]string{string(c.From), string(c.To), rule, reason}
	if r == RuleInjectorOptOuts {
		// The names of the injectors, from which the table gives the keys and values set.
		if names, ok := injectorsSet(c.To); ok {
			elems[1] = string(jsonValue(names))
		}
	}
	n := len(elems)
	for n > 0 && elems[n-1] == "" {
		n--
	}
	b.WriteByte('[')
	writeJSONString(b, string(c.Action))
	b.WriteByte(',')
	writeJSONString(b, c.Path)
	for _, e := range elems[:n] {
		b.WriteByte(',')
		if e == "" {
			e = "null"
		}
		b.WriteString(e)
	}
	b.WriteByte(']')
}

// DecodeChanges parses a changes annotation written by any wincompat version: a version 1 list or a
// version 2 record, whose entries are expanded with the rules table (each change has its Rule and its
// reason's prose).
func DecodeChanges(s string) ([]Change, error) {
	_, old, changes, err := decodeRecord(s)
	if len(old) > 0 {
		changes = append(old, changes...)
	}
	return changes, err
}

// decodeRecord splits a record into its version 1 list (raw, as written, and decoded) and its version
// 2 entries.
func decodeRecord(s string) (v1 string, old, changes []Change, err error) {
	if !strings.HasPrefix(s, "{") {
		if err := json.Unmarshal([]byte(s), &old); err != nil {
			return "", nil, nil, fmt.Errorf("annotation is not a JSON array of changes: %w", err)
		}
		return s, old, nil, nil
	}
	var rec struct {
		V  int               `json:"v"`
		V1 json.RawMessage   `json:"v1"`
		C  []json.RawMessage `json:"c"`
	}
	if err := json.Unmarshal([]byte(s), &rec); err != nil {
		return "", nil, nil, fmt.Errorf("annotation is not a change record: %w", err)
	}
	if rec.V != RecordVersion {
		return "", nil, nil, fmt.Errorf("change record of version %d; this wincompat reads versions 1 and %d", rec.V, RecordVersion)
	}
	if len(rec.V1) > 0 {
		if err := json.Unmarshal(rec.V1, &old); err != nil {
			return "", nil, nil, fmt.Errorf("change record: v1 is not a JSON array of changes: %w", err)
		}
		v1 = string(rec.V1)
	}
	changes = make([]Change, 0, len(rec.C))
	for i, e := range rec.C {
		c, err := decodeEntry(e)
		if err != nil {
			return "", nil, nil, fmt.Errorf("change record: entry %d: %w", i, err)
		}
		changes = append(changes, c)
	}
	return v1, old, changes, nil
}

var errEntry = errors.New("not an array of action, path, from, to, rule and reason")

// decodeEntry expands one version 2 entry.
func decodeEntry(raw json.RawMessage) (Change, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil || len(elems) < 2 || len(elems) > 6 {
		return Change{}, errEntry
	}
	var c Change
	var action string
	if json.Unmarshal(elems[0], &action) != nil || json.Unmarshal(elems[1], &c.Path) != nil {
		return Change{}, errEntry
	}
	c.Action = Action(action)
	present := func(i int) bool { return i < len(elems) && !bytes.Equal(elems[i], []byte("null")) }
	if present(2) {
		c.From = elems[2]
	}
	if present(3) {
		c.To = elems[3]
	}
	if present(4) {
		var r string
		if json.Unmarshal(elems[4], &r) != nil {
			return Change{}, errEntry
		}
		c.Rule = Rule(r)
	} else if c.Action == Strip {
		c.Rule = stripRuleOf(c.Path)
	}
	if c.Rule == RuleInjectorOptOuts && bytes.HasPrefix(c.To, []byte("[")) {
		var names []string
		if json.Unmarshal(c.To, &names) == nil {
			if to, ok := injectorOptOutsOf(names); ok {
				c.To = to
			}
		}
	}
	if present(5) {
		if json.Unmarshal(elems[5], &c.Reason) != nil {
			return Change{}, errEntry
		}
	} else {
		c.Reason = derivedReason(c, c.Rule)
	}
	return c, nil
}
