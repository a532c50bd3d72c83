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

// RecordVersion is the version of the change record this wincompat writes (policy/README.md, "The
// change record"). Version 1 (wincompat before issue 29) is a JSON array of
// {"action","path","from","to","reason"} objects; version 2 an object {"v":2,"c":[entry,...]} whose
// entries are arrays [action, path, from, to, rule, reason], the reason left out where the rules table
// gives it back. Version 3 (record_v3.go) keeps that entry and writes less of it: one-letter actions, a
// path left out where the rule names it, the strips of one securityContext as one entry, and values
// the tables give back written by what they are made from. All three are JSON, so `kubectl get -o
// jsonpath` and jq read them; DecodeChanges reads all three, as pods and templates keep the record they
// were admitted with.
const RecordVersion = 3

// RecordPrefix opens every version 3 record; a version 2 record opens with RecordPrefixV2, a version 1
// record with '['. The admission policies tell the versions apart by it.
const RecordPrefix = `{"v":3,`

// RecordPrefixV2 opens a version 2 record, which a version 3 record keeps as it was (its "v2").
const RecordPrefixV2 = `{"v":2,`

// noRule is the rule element of a change whose rule is unknown (read back from a version 1 record with
// a reason no rule has): "" rather than null, which would mean the strip-table row of its path.
const noRule = `""`

// stripRow is what stripRowOf compares of a strip-table row, worked out once: it runs for every strip
// entry written or read.
type stripRow struct {
	rule Rule
	// name is the row's field; path the whole path of a pod row ("" for a containers' row).
	path, name string
}

var stripRows = func() []stripRow {
	var rows []stripRow
	for _, f := range LinuxOnlyFields() {
		if f.Level == ContainerSecurityContextLevel {
			rows = append(rows, stripRow{rule: f.Rule(), name: f.Name})
		} else {
			rows = append(rows, stripRow{rule: f.Rule(), path: f.Path(), name: f.Name})
		}
	}
	return rows
}()

// containerLists are the container lists' path prefixes, as a strip of a container's field starts.
var containerLists = [...]string{"spec.containers[", "spec.initContainers[", "spec.ephemeralContainers["}

// inContainerSecurityContext is what a containers' row writes between the container and its field.
const inContainerSecurityContext = ".securityContext."

// stripRuleOf is the rule of the strip-table row whose removal path is (stripRowOf); "" for none.
func stripRuleOf(path string) Rule {
	if row, _, ok := stripRowOf(path); ok {
		return row.rule
	}
	return ""
}

// stripRowOf is the strip-table row whose removal path is, and the path of the object the row removes
// the field from: "spec.<name>" (parent "spec") or "spec.securityContext.<name>" for the pod's rows, a
// container list's "spec.<list>[" then "].securityContext.<name>" for the containers' rows (parent the
// container, "spec.<list>[NAME]"). It reads the path's ends only, which the row writes around the
// container's name, so a name holding brackets or dots (before validation a pod author's name can hold
// anything) cannot make it another row.
func stripRowOf(path string) (row stripRow, parent string, ok bool) {
	list := ""
	for _, l := range containerLists {
		if strings.HasPrefix(path, l) {
			list = l
			break
		}
	}
	for _, r := range stripRows {
		switch {
		case r.path != "":
			if path == r.path {
				return r, path[:len(path)-len(r.name)-1], true
			}
		case list != "" && strings.HasSuffix(path, r.name) && len(path) > len(list)+len(inContainerSecurityContext)+len(r.name) &&
			strings.HasSuffix(path[:len(path)-len(r.name)], "]"+inContainerSecurityContext):
			return r, path[:len(path)-len(r.name)-len(inContainerSecurityContext)], true
		}
	}
	return stripRow{}, "", false
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

// RuleWritten says whether a change of action whose rule is r writes the code in a version 2 or 3
// record: a strip-table rule does not, its path names the row. The admission policies shape their
// entries by it.
func RuleWritten(action Action, r Rule) bool {
	return !(action == Strip && strings.HasPrefix(string(r), "strip:"))
}

// ReasonWritten says whether change c (its Rule set) writes its reason: not when the rules table
// derives it. The admission policies shape their entries by it.
func ReasonWritten(c Change) bool {
	r := RuleOf(c)
	return r == "" || c.Reason != derivedReason(c, r)
}

// DecodeChanges parses a changes annotation written by any wincompat version: a version 1 list, or a
// version 2 or 3 record, whose entries are expanded with the rules table (each change has its Rule and
// its reason's prose). Records of every version stay readable: objects keep the one they were admitted
// with.
func DecodeChanges(s string) ([]Change, error) {
	_, changes, err := decodeRecord(s)
	return changes, err
}

// recordKind is what a record read before this pass is, which says how new entries follow it.
type recordKind int

const (
	noRecord   recordKind = iota // none, or one that is replaced
	v1Record                     // a version 1 list: kept as "v1"
	v2Record                     // a version 2 record: kept as "v2"
	openRecord                   // a version 3 record ending in its entries: new ones are appended
)

// decodeRecord reads a record of any version: what kind it is and every change it holds, oldest first.
func decodeRecord(s string) (recordKind, []Change, error) {
	if !strings.HasPrefix(s, "{") {
		var old []Change
		if err := json.Unmarshal([]byte(s), &old); err != nil {
			return noRecord, nil, fmt.Errorf("annotation is not a JSON array of changes: %w", err)
		}
		if s == "[]" || !strings.HasSuffix(s, "]") { // the admission policies keep only a list, and not an empty one
			return noRecord, old, nil
		}
		return v1Record, old, nil
	}
	b := []byte(s) // the changes' values are spans of it
	if !json.Valid(b) {
		return noRecord, nil, errors.New("annotation is not a change record: not JSON")
	}
	changes, version, err := decodeObject(b, nil, 0)
	if err != nil {
		return noRecord, nil, err
	}
	// New entries go at the end of the record, which must be the end of its "c".
	var entries []byte
	members(b, func(key, value []byte) {
		if string(key) == `"c"` {
			entries = value
		}
	})
	cLast := len(entries) > 0 && cap(b)-cap(entries)+len(entries) == len(b)-1
	// What the admission policies keep, told apart as they tell it (by its ends), the webhook keeps.
	switch {
	case version == 2 && strings.HasPrefix(s, RecordPrefixV2) && strings.HasSuffix(s, "}"):
		return v2Record, changes, nil
	case version == 3 && strings.HasPrefix(s, RecordPrefix) && strings.HasSuffix(s, "]}") && cLast:
		return openRecord, changes, nil
	}
	return noRecord, changes, nil
}

// decodeObject appends the changes of a version 2 or 3 record (valid JSON) to changes, in order: a
// version 1 list it kept ("v1"), a version 2 record it kept ("v2", version 3 only), its entries ("c").
// depth is 1 inside a version 3 record's "v2".
func decodeObject(b []byte, changes []Change, depth int) ([]Change, int, error) {
	var version, v1raw, v2raw, entries []byte
	if !members(b, func(key, value []byte) {
		switch string(key) {
		case `"v"`:
			version = value
		case `"v1"`:
			v1raw = value
		case `"v2"`:
			v2raw = value
		case `"c"`:
			entries = value
		}
	}) {
		return nil, 0, errors.New("annotation is not a change record: not an object")
	}
	v := 0
	switch string(version) {
	case "2":
		v = 2
	case "3":
		v = 3
	}
	if v == 0 || v == 3 && depth > 0 || v == 2 && len(v2raw) > 0 {
		return nil, 0, fmt.Errorf("change record of version %.20q; this wincompat reads versions 1 to %d", version, RecordVersion)
	}
	if len(v1raw) > 0 {
		var old []Change
		if err := json.Unmarshal(v1raw, &old); err != nil {
			return nil, 0, fmt.Errorf("change record: v1 is not a JSON array of changes: %w", err)
		}
		changes = append(changes, old...)
	}
	if len(v2raw) > 0 {
		var err error
		if changes, _, err = decodeObject(v2raw, changes, depth+1); err != nil {
			return nil, 0, fmt.Errorf("change record: v2: %w", err)
		}
	}
	var err error
	var spans [6][]byte
	var prev group // the entry before, when a group of strips
	if len(entries) > 0 && !elements(entries, func(e []byte) bool {
		elems, ok := entrySpans(e, &spans)
		if !ok {
			err = errEntry
		} else if v == 2 {
			var c Change
			if c, err = decodeEntryV2(elems); err == nil {
				changes = append(changes, c)
			}
		} else {
			changes, prev, err = decodeEntryV3(elems, changes, prev)
		}
		if err != nil {
			err = fmt.Errorf("change record: entry %d: %w", len(changes), err)
			return false
		}
		return true
	}) {
		if err == nil {
			err = errors.New("change record: c is not a list of entries")
		}
		return nil, 0, err
	}
	return changes, v, nil
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

// knownStrings are the actions, rule codes and strip-table fields, so that reading them allocates
// nothing.
var knownStrings = func() map[string]string {
	m := map[string]string{}
	for _, a := range []Action{Strip, Rewrite, Inject, Warn} {
		m[string(a)] = string(a)
	}
	for _, r := range rulesTable {
		m[string(r.rule)] = string(r.rule)
	}
	// The fields of a group of strips (record_v3.go), and the objects of the pod they are removed from.
	for _, r := range stripRows {
		m[r.name] = r.name
	}
	m["spec"], m["spec.securityContext"] = "spec", "spec.securityContext"
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

// plainJSON says whether s is written in JSON as it is. patch's MarshalJSON asks the same
// (plainJSONString in patch/patch.go); the two packages share no code, so a change to one is a change to
// both.
func plainJSON(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
