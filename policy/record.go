package policy

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// RecordVersion is the version of the change record (policy/README.md, "The change record"): an
// object {"v":3,"c":[entry,...]} whose entries are arrays [action, path, from, to, rule, reason], written
// short (record_codec.go): one-letter actions, a path left out where the rule names it, the strips of one
// securityContext as one entry, and values the tables give back written by what they are made from. It
// is JSON, so `kubectl get -o jsonpath` and jq read it. No other version was ever released: a record of
// another version is not one this wincompat reads (DecodeChanges fails, and a new record replaces it).
const RecordVersion = 3

// RecordPrefix opens every record. The admission policies tell a record they can append to by it.
const RecordPrefix = `{"v":3,`

// noRule is the rule element of a change whose rule is unknown (read back from a record whose author
// wrote a rule no table has): "" rather than null, which would mean the strip-table row of its path.
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

// RuleWritten says whether a change of action whose rule is r writes the code in the record: a
// strip-table rule does not, its path names the row. The admission policies shape their entries by it.
func RuleWritten(action Action, r Rule) bool {
	return !(action == Strip && strings.HasPrefix(string(r), "strip:"))
}

// ReasonWritten says whether change c (its Rule set) writes its reason: not when the rules table
// derives it. The admission policies shape their entries by it.
func ReasonWritten(c Change) bool {
	r := RuleOf(c)
	return r == "" || c.Reason != derivedReason(c, r)
}

// DecodeChanges parses a changes annotation: its entries expanded with the rules table (each change
// has its Rule and its reason's prose). A value that is no record of RecordVersion is an error.
func DecodeChanges(s string) ([]Change, error) {
	_, changes, err := decodeRecord(s)
	return changes, err
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
	// The fields of a group of strips (record_codec.go), and the objects of the pod they are removed from.
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
