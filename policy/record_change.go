package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Action says what wincompat did to one field. Annotations, admission warnings, audit annotations and
// metrics are all rendered from Change values, so a new kind of decision needs no new plumbing.
type Action string

const (
	// Strip removes a field the API server rejects on Windows pods.
	Strip Action = "strip"
	// Rewrite replaces a value that validation accepts but Windows does not honour.
	Rewrite Action = "rewrite"
	// Inject adds scheduling or identity information the pod lacks.
	Inject Action = "inject"
	// Warn records something wincompat deliberately left alone.
	Warn Action = "warn"
)

// Change is one decision. Path names containers, volumes and mounts by name rather than index
// (spec.containers[app].securityContext.runAsUser) so that it stays readable and stable when lists move.
type Change struct {
	Action Action          `json:"action"`
	Path   string          `json:"path"`
	From   json.RawMessage `json:"from,omitempty"`
	To     json.RawMessage `json:"to,omitempty"`
	Reason string          `json:"reason"`
	// Rule is the rule the change was made by. The record (record*.go) keeps its code, so a change read
	// back from one has it.
	Rule Rule `json:"-"`
	// split marks a strip-table change that starts a group of its own in the record although the strip
	// before it is of the same object: the first strip of a container named as the one before, which
	// the API server refuses later, but whose record the admission policies write a group per
	// container (record_codec.go). Not part of what a change is (equal and key leave it out).
	split bool
}

// Field is Path with every bracketed name replaced by "*": a bounded key for metrics and summaries.
// nodeSelector keys are kept: wincompat only ever sets the OS, arch and build labels, and which one
// changed is the point.
func (c Change) Field() string {
	var b strings.Builder
	depth, keep := 0, false
	for i, r := range c.Path {
		switch {
		case r == '[' && depth == 0:
			keep = strings.HasSuffix(c.Path[:i], "nodeSelector")
			b.WriteByte('[')
			if !keep {
				b.WriteByte('*')
			}
			depth++
		case r == '[':
			depth++
		case r == ']' && depth > 0:
			depth--
			if depth == 0 {
				b.WriteByte(']')
			}
		case depth == 0 || keep && depth == 1:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// OtherField is MetricField's answer for a path wincompat does not produce.
const OtherField = "other"

// MetricField is Field when it is one of the fields the change's rule produces (the rules table lists
// them), and OtherField otherwise: the names inside a path are the pod author's, and one holding "]"
// would carry text of theirs out of the brackets and into a metric label, one new series per pod.
func (c Change) MetricField() string {
	if r, ok := rulesByCode[RuleOf(c)]; ok {
		if f := c.Field(); slices.Contains(r.fields, f) {
			return f
		}
	}
	return OtherField
}

// equal ignores Rule, which a recorded change does not carry: a change found again is the one recorded.
func (c Change) equal(o Change) bool {
	return c.Action == o.Action && c.Path == o.Path && c.Reason == o.Reason &&
		string(c.From) == string(o.From) && string(c.To) == string(o.To)
}

// jsonValue renders v for Change.From/To. Values come from typed API fields, which always marshal.
func jsonValue(v any) json.RawMessage {
	// The numbers and booleans most strip-table rows remove, written without encoding/json's reflection.
	switch x := v.(type) {
	case *int64:
		if x != nil {
			return strconv.AppendInt(make([]byte, 0, 20), *x, 10)
		}
	case *bool:
		if x != nil {
			return strconv.AppendBool(nil, *x)
		}
	case int64:
		return strconv.AppendInt(make([]byte, 0, 20), x, 10)
	case bool:
		return strconv.AppendBool(nil, x)
	case string:
		if plainJSON(x) {
			return append(append(append(make([]byte, 0, len(x)+2), '"'), x...), '"')
		}
	case map[string]string:
		// The injector opt-outs: keys in order, as encoding/json writes a map.
		if b, ok := plainStringMap(x); ok && x != nil {
			return b
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(fmt.Sprintf("%q", fmt.Sprint(v)))
	}
	return b
}

// plainStringMap renders m as encoding/json does when no key or value needs escaping; false otherwise.
func plainStringMap(m map[string]string) (json.RawMessage, bool) {
	var keys [8]string // opt-outs set a handful of keys
	sorted := keys[:0]
	size := 2
	for k, v := range m {
		if !plainJSON(k) || !plainJSON(v) {
			return nil, false
		}
		sorted = append(sorted, k)
		size += len(k) + len(v) + 6
	}
	slices.Sort(sorted)
	b := append(make([]byte, 0, size), '{')
	for i, k := range sorted {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(append(append(b, '"'), k...), `":"`...), m[k]...), '"')
	}
	return append(b, '}'), true
}

// writeJSONString writes s quoted as encoding/json quotes it; strings that need escaping are rare and
// left to the library.
func writeJSONString(b *strings.Builder, s string) {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			b.Write(q)
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

// mergeChanges appends to recorded the changes it does not already hold, so that reinvocation never
// grows the list with repeats. It reports whether anything was added. Past a few dozen changes it
// remembers what it holds in a map: a pod of thousands of containers, or a recorded list its author
// wrote, must cost time linear in its size.
func mergeChanges(recorded, found []Change) ([]Change, bool) {
	if len(recorded) == 0 && noRepeats(found) { // an object's first record: found as it is, not copied
		return found, len(found) > 0
	}
	added := false
	recorded = slices.Grow(recorded, len(found))
	var held map[changeKey]bool
	if len(recorded)+len(found) > manyChanges {
		held = make(map[changeKey]bool, len(recorded)+len(found))
		for _, r := range recorded {
			held[r.key()] = true
		}
	}
next:
	for _, c := range found {
		if held != nil {
			k := c.key()
			if held[k] {
				continue
			}
			held[k] = true
		} else {
			for _, r := range recorded {
				if r.equal(c) {
					continue next
				}
			}
		}
		recorded = append(recorded, c)
		added = true
	}
	return recorded, added
}

// noRepeats says whether no change of changes equals another, with a map past manyChanges.
func noRepeats(changes []Change) bool {
	if len(changes) > manyChanges {
		seen := make(map[changeKey]bool, len(changes))
		for _, c := range changes {
			k := c.key()
			if seen[k] {
				return false
			}
			seen[k] = true
		}
		return true
	}
	for i, c := range changes {
		for _, o := range changes[:i] {
			if o.equal(c) {
				return false
			}
		}
	}
	return true
}

// manyChanges is where searching a list stops being cheaper than a map.
const manyChanges = 32

// changeKey is a Change as a map key: equal keys, equal changes (Rule left out, as equal leaves it).
type changeKey struct{ action, path, from, to, reason string }

func (c Change) key() changeKey {
	return changeKey{string(c.Action), c.Path, string(c.From), string(c.To), c.Reason}
}

// Warnings renders one short admission warning per class of change (action and field, ignoring which
// container), e.g. "wincompat: removed securityContext.runAsUser from 2 containers (not supported on
// Windows)". What needs action comes first, marked (Message.Admission), then what wincompat did as
// intended, each in first-seen order.
func Warnings(changes []Change) []string { return AdmissionWarnings(Messages(changes)) }

// WouldWarnings are Warnings for warn mode, where nothing was changed: "wincompat (warn mode) would
// have removed securityContext.runAsUser from 2 containers (not supported on Windows)".
func WouldWarnings(changes []Change) []string { return AdmissionWarnings(WouldMessages(changes)) }

func messages(changes []Change, would bool) []Message {
	// reason tells warnings apart: each says something of its own (which image, which build, which
	// taint); the same rule on several containers gives the same reason and one warning.
	type groupKey struct {
		action        Action
		field, reason string
	}
	type group struct {
		groupKey
		first int // the change that opened it, in changes
		// severity is the group's: a warning when any change of it is one.
		severity Severity
		// owners holds the second and later owners; most groups have one.
		owner  string
		owners []string
	}
	type ownerKey struct {
		group int
		owner string
	}
	// A list searched in order: a pod's changes fall in a handful of groups, and a warning is rendered
	// on every review. Past a few dozen changes, maps find the group and the owners already counted,
	// so that a pod of thousands of containers costs time linear in its size.
	groups := make([]group, 0, len(changes))
	var index map[groupKey]int
	var owned map[ownerKey]bool
	if len(changes) > manyChanges {
		index, owned = map[groupKey]int{}, map[ownerKey]bool{}
	}
	for n, c := range changes {
		owner, field := splitOwner(c.Path)
		k := groupKey{c.Action, field, c.Reason}
		var i int
		found := false
		if index != nil {
			i, found = index[k]
		} else {
			i = slices.IndexFunc(groups, func(g group) bool { return g.groupKey == k })
			found = i >= 0
		}
		if !found {
			if index != nil {
				index[k] = len(groups)
			}
			groups = append(groups, group{groupKey: k, first: n, owner: owner, severity: c.Severity()})
			continue
		}
		if groups[i].severity == SeverityInfo {
			groups[i].severity = c.Severity()
		}
		switch {
		case groups[i].owner == owner:
		case owned != nil:
			if o := (ownerKey{i, owner}); !owned[o] {
				owned[o] = true
				groups[i].owners = append(groups[i].owners, owner)
			}
		case !slices.Contains(groups[i].owners, owner):
			groups[i].owners = append(groups[i].owners, owner)
		}
	}
	out := make([]Message, len(groups))
	for i, g := range groups {
		out[i] = Message{g.severity, describe(g.action, g.field, changes[g.first], ownersPhrase(g.owner, g.owners), would)}
	}
	return ByAttention(out)
}

// splitOwner separates "spec.containers[app].securityContext.runAsUser" into the owner
// ("spec.containers[app]") and the field relative to it ("securityContext.runAsUser"). Paths outside
// containers have the pod as owner.
func splitOwner(path string) (owner, field string) {
	for _, list := range []string{"spec.containers[", "spec.initContainers[", "spec.ephemeralContainers["} {
		if strings.HasPrefix(path, list) {
			end := strings.Index(path, "].")
			if end < 0 {
				return path, path
			}
			return path[:end+1], path[end+2:]
		}
	}
	return "pod", path
}

func ownersPhrase(first string, more []string) string {
	if first == "pod" || slices.Contains(more, "pod") {
		return "the pod"
	}
	if len(more) == 0 {
		return strings.TrimPrefix(first, "spec.")
	}
	return strconv.Itoa(1+len(more)) + " containers"
}

// describe renders one warning, in one allocation; would puts it in warn mode's conditional.
func describe(action Action, field string, c Change, owners string, would bool) string {
	did := "wincompat: "
	if would {
		did = "wincompat (warn mode) would have "
	}
	switch action {
	case Strip:
		return did + "removed " + field + " from " + owners + " (" + c.Reason + ")"
	case Rewrite:
		if len(c.To) == 0 {
			return did + "removed " + field + " from " + owners + " (" + c.Reason + ")"
		}
		return did + "changed " + field + " in " + owners + " to " + string(c.To) + " (" + c.Reason + ")"
	case Inject:
		return did + "set " + field + " on " + owners + " (" + c.Reason + ")"
	default: // a warning either way
		if would {
			return "wincompat (warn mode): " + field + " in " + owners + ": " + c.Reason
		}
		return "wincompat: " + field + " in " + owners + ": " + c.Reason
	}
}

// sortedKeys returns the keys of m in order, so that decisions over maps are deterministic.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
