package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

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

// stripRow is what stripRuleOf compares of a strip-table row, worked out once: it runs for every strip
// entry written or read.
type stripRow struct {
	rule Rule
	// path is the whole path of a pod row; name the field of a containers' row ("" for a pod row).
	path, name string
}

var stripRows = func() []stripRow {
	var rows []stripRow
	for _, f := range LinuxOnlyFields() {
		if f.Scope == ContainerSecurityContextScope {
			rows = append(rows, stripRow{rule: f.Rule(), name: f.Name})
		} else {
			rows = append(rows, stripRow{rule: f.Rule(), path: f.Path()})
		}
	}
	return rows
}()

// containerLists are the container lists' path prefixes, as a strip of a container's field starts.
var containerLists = [...]string{"spec.containers[", "spec.initContainers[", "spec.ephemeralContainers["}

// stripRuleOf is the strip-table row whose removal path is: "spec.<name>" or
// "spec.securityContext.<name>" for the pod's rows, a container list's "spec.<list>[" then
// "].securityContext.<name>" for the containers' rows; "" for any other path. It reads the path's ends
// only, which the row writes around the container's name, so a name holding brackets or dots (before
// validation a pod author's name can hold anything) cannot make it another row.
func stripRuleOf(path string) Rule {
	const mid = "].securityContext."
	list := ""
	for _, l := range containerLists {
		if strings.HasPrefix(path, l) {
			list = l
			break
		}
	}
	for _, r := range stripRows {
		switch {
		case r.name == "":
			if path == r.path {
				return r.rule
			}
		case list != "" && strings.HasSuffix(path, r.name) && len(path) >= len(list)+len(mid)+len(r.name) &&
			strings.HasSuffix(path[:len(path)-len(r.name)], mid):
			return r.rule
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
		if !strings.HasPrefix(c.Reason, windowsTaintReasonPrefix) && c.Reason != "" { // cannot be it: no need to read the value
			return ""
		}
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
		// Brackets, quotes, commas and nulls take up to 20 bytes. Most reasons and opt-outs' keys are left
		// out; one that is written, or a string that needs escaping, grows the buffer once more.
		size += 20 + len(c.Action) + len(c.Path) + len(c.From) + len(c.Rule)
		if c.Rule != RuleInjectorOptOuts {
			size += len(c.To)
		}
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
	hasRule := RuleWritten(c.Action, r) || stripRuleOf(c.Path) != r
	var hasReason bool
	var optOuts injectorSet // the injectors named instead of To
	if r == RuleInjectorOptOuts {
		set, ok := optOutsSet(c.To)
		if ok {
			optOuts = set
		}
		hasReason = !ok || !optOutReasonIs(c.Reason, set)
	} else if r == RuleWindowsTolerations {
		hasReason = !tolerationReasonIs(c.Reason, c.To)
	} else {
		hasReason = r == "" || c.Reason != derivedReason(c, r)
	}
	to := c.To
	if optOuts != 0 {
		to = json.RawMessage("[]") // a placeholder: the names are written below
	}
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
	writeJSONString(b, string(c.Action))
	b.WriteByte(',')
	writeJSONString(b, c.Path)
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
			b.WriteString(",\"\"")
		default:
			b.WriteByte(',')
			writeJSONString(b, string(r)) // a code read back from a record is its author's
		}
	}
	if n == 4 {
		b.WriteByte(',')
		writeJSONString(b, c.Reason)
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
	b := []byte(s) // the changes' values are spans of it
	if !json.Valid(b) {
		return "", nil, nil, errors.New("annotation is not a change record: not JSON")
	}
	var version, v1raw, entries []byte
	if !members(b, func(key, value []byte) {
		switch string(key) {
		case `"v"`:
			version = value
		case `"v1"`:
			v1raw = value
		case `"c"`:
			entries = value
		}
	}) {
		return "", nil, nil, errors.New("annotation is not a change record: not an object")
	}
	if string(version) != "2" {
		return "", nil, nil, fmt.Errorf("change record of version %.20q; this wincompat reads versions 1 and %d", version, RecordVersion)
	}
	if len(v1raw) > 0 {
		if err := json.Unmarshal(v1raw, &old); err != nil {
			return "", nil, nil, fmt.Errorf("change record: v1 is not a JSON array of changes: %w", err)
		}
		v1 = string(v1raw)
	}
	if len(entries) > 0 && !elements(entries, func(e []byte) bool {
		var c Change
		if c, err = decodeEntry(e); err != nil {
			err = fmt.Errorf("change record: entry %d: %w", len(changes), err)
			return false
		}
		changes = append(changes, c)
		return true
	}) {
		if err == nil {
			err = errors.New("change record: c is not a list of entries")
		}
		return "", nil, nil, err
	}
	return v1, old, changes, nil
}

var errEntry = errors.New("not an array of action, path, from, to, rule and reason")

// decodeEntry expands one version 2 entry, an array of two to six JSON values.
func decodeEntry(entry []byte) (Change, error) {
	var spans [6][]byte
	n := 0
	if !elements(entry, func(e []byte) bool {
		if n == len(spans) {
			n++
			return false
		}
		spans[n] = e
		n++
		return true
	}) || n < 2 || n > len(spans) {
		return Change{}, errEntry
	}
	elems := spans[:n]
	var c Change
	action, ok1 := entryString(elems[0])
	path, ok2 := entryString(elems[1])
	if !ok1 || !ok2 {
		return Change{}, errEntry
	}
	c.Action, c.Path = Action(action), path
	present := func(i int) bool { return i < len(elems) && string(elems[i]) != "null" }
	value := func(i int) json.RawMessage { return json.RawMessage(elems[i][:len(elems[i]):len(elems[i])]) }
	if present(2) {
		c.From = value(2)
	}
	if present(3) {
		c.To = value(3)
	}
	if present(4) {
		r, ok := entryString(elems[4])
		if !ok {
			return Change{}, errEntry
		}
		c.Rule = Rule(r)
	} else if c.Action == Strip {
		c.Rule = stripRuleOf(c.Path)
	}
	if c.Rule == RuleInjectorOptOuts && bytes.HasPrefix(c.To, []byte("[")) {
		// The injectors' names: the table gives the keys and values set.
		if set, ok := optOutsNamed(c.To); ok {
			c.To = appendOptOuts(nil, set)
		}
	}
	if present(5) {
		reason, ok := entryString(elems[5])
		if !ok {
			return Change{}, errEntry
		}
		c.Reason = reason
	} else {
		c.Reason = derivedReason(c, c.Rule)
	}
	return c, nil
}

// entryString reads a JSON string; one without escapes, as most paths and every code and action are,
// without encoding/json. Actions and rule codes of the tables come back as the tables' own strings.
func entryString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && bytes.IndexByte(inner, '"') < 0 && utf8.Valid(inner) {
		if known, ok := knownStrings[string(inner)]; ok { // no allocation: a map index by a converted []byte
			return known, true
		}
		return string(inner), true
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// knownStrings are the actions and rule codes, so that reading them allocates nothing.
var knownStrings = func() map[string]string {
	m := map[string]string{}
	for _, a := range []Action{Strip, Rewrite, Inject, Warn} {
		m[string(a)] = string(a)
	}
	for _, r := range rulesTable {
		m[string(r.rule)] = string(r.rule)
	}
	return m
}()

// writeNames writes the names of the injectors of set, in the table's order, as a JSON list: the table's
// names need no escaping.
func writeNames(b *strings.Builder, set injectorSet) {
	b.WriteByte('[')
	sep := ""
	for i, in := range linuxOnlyInjectors {
		if set&(1<<i) != 0 {
			b.WriteString(sep + `"` + in.Name + `"`)
			sep = ","
		}
	}
	b.WriteByte(']')
}

// tolerationReasonIs says whether reason is what derivedReason gives for the toleration to, without
// reading it: the reason names the taint (windowsTaintReason, corev1.Taint's ToString), and to must be
// the toleration of that taint as jsonValue writes it. It allocates nothing: it runs for every record
// written. A taint whose parts would need escaping is not recognised, and its reason is written.
func tolerationReasonIs(reason string, to json.RawMessage) bool {
	rest, ok := strings.CutPrefix(reason, windowsTaintReasonPrefix)
	if !ok {
		return false
	}
	kv, effect, _ := strings.Cut(rest, ":")
	key, value, _ := strings.Cut(kv, "=")
	b, ok := cutPrefix(to, `{"key":"`)
	for _, part := range []struct{ before, s string }{{"", key}, {`","operator":"Equal`, ""}, {`","value":"`, value}, {`","effect":"`, effect}} {
		if !ok || part.before != `","operator":"Equal` && part.s == "" { // omitempty
			continue
		}
		if b, ok = cutPrefix(b, part.before); ok && plainJSON(part.s) {
			b, ok = cutPrefix(b, part.s)
		} else {
			ok = false
		}
	}
	return ok && key != "" && string(b) == `"}`
}

// plainJSON says whether s is written in JSON as it is.
func plainJSON(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
