package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// recordKind is what a record read before this pass is, which says how new entries follow it.
type recordKind int

const (
	noRecord   recordKind = iota // none, or one that is replaced
	openRecord                   // a record ending in its entries: new ones are appended
)

// decodeRecord reads a record: what kind it is and every change it holds, oldest first.
func decodeRecord(s string) (recordKind, []Change, error) {
	b := []byte(s) // the changes' values are spans of it
	if !json.Valid(b) {
		return noRecord, nil, errors.New("annotation is not a change record: not JSON")
	}
	changes, err := decodeObject(b)
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
	// What the admission policies append to, told apart as they tell it (by its ends), the webhook
	// appends to; anything else they replace, and so does the webhook.
	if strings.HasPrefix(s, RecordPrefix) && strings.HasSuffix(s, "]}") && cLast {
		return openRecord, changes, nil
	}
	return noRecord, changes, nil
}

// decodeObject reads the changes of a record (valid JSON): an object of "v", RecordVersion, and "c",
// its entries, and nothing else.
func decodeObject(b []byte) ([]Change, error) {
	var version, entries, other []byte
	if !members(b, func(key, value []byte) {
		switch string(key) {
		case `"v"`:
			version = value
		case `"c"`:
			entries = value
		default:
			if other == nil {
				other = key
			}
		}
	}) {
		return nil, fmt.Errorf("annotation is not a change record of version %d: not an object", RecordVersion)
	}
	if string(version) != strconv.Itoa(RecordVersion) {
		return nil, fmt.Errorf("change record of version %.20q; this wincompat reads version %d", version, RecordVersion)
	}
	if other != nil {
		return nil, fmt.Errorf("change record: %.20s is not a member of a version %d record", other, RecordVersion)
	}
	var changes []Change
	var err error
	var spans [6][]byte
	var prev group // the entry before, when a group of strips
	if len(entries) > 0 && !elements(entries, func(e []byte) bool {
		elems, ok := entrySpans(e, &spans)
		if !ok {
			err = errEntry
		} else {
			changes, prev, err = decodeEntry(elems, changes, prev)
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
		return nil, err
	}
	return changes, nil
}

var errEntry = errors.New("not an array of action, path, from, to, rule and reason")

// entrySpans splits an entry, a JSON array of two to six values, into spans of it; false when it is
// not one. spans is the caller's, so that reading an entry allocates nothing.
func entrySpans(entry []byte, spans *[6][]byte) ([][]byte, bool) {
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
		return nil, false
	}
	return spans[:n], true
}

// group is a group of strips read back, for the entry after: the object's path and the changes.
type group struct {
	parent  string
	changes []Change
}

var errGroup = errors.New(`not a group of strips ["s", object, {field: value, ...} or -1]`)

// decodeEntry appends the changes of one entry (its elements) to changes; prev is the group the entry
// before was (nil when it was not one), and it returns this entry's.
func decodeEntry(elems [][]byte, changes []Change, prev group) ([]Change, group, error) {
	code, ok := entryString(elems[0])
	if !ok {
		return changes, group{}, errEntry
	}
	action := actionOf(code)
	if action == Strip && len(elems) == 3 && (bytes.HasPrefix(elems[2], []byte("{")) || string(elems[2]) == "-1") {
		return decodeGroup(elems, changes, prev)
	}
	var c Change
	c.Action = action
	home := string(elems[1]) == "null"
	if !home {
		if c.Path, ok = entryString(elems[1]); !ok {
			return changes, group{}, errEntry
		}
	}
	present := func(i int) bool { return i < len(elems) && string(elems[i]) != "null" }
	value := func(i int) json.RawMessage { return json.RawMessage(elems[i][:len(elems[i]):len(elems[i])]) }
	if present(2) {
		c.From = value(2)
	}
	var recorded json.RawMessage // "to" as written
	if present(3) {
		recorded = value(3)
		c.To = recorded
	}
	switch {
	case present(4):
		r, ok := entryString(elems[4])
		if !ok {
			return changes, group{}, errEntry
		}
		c.Rule = Rule(r)
	case home:
		return changes, group{}, errors.New("a path left out without its rule")
	case c.Action == Strip:
		c.Rule = stripRuleOf(c.Path)
	}
	var optOuts injectorSet
	if c.Rule == RuleInjectorOptOuts && bytes.HasPrefix(c.To, []byte("[")) {
		// The injectors' names: the table gives the keys and values set.
		if set, ok := optOutsNamed(c.To); ok {
			optOuts = set
			c.To = appendOptOuts(nil, set)
		}
	}
	if home {
		if c.Path = homePath(c.Rule, optOuts, recorded); c.Path == "" {
			return changes, group{}, errors.New("a path left out that its rule does not give")
		}
	}
	switch {
	case c.Rule == RuleWindowsTolerations && bytes.HasPrefix(c.To, []byte(`"`)):
		if c.To, ok = tolerationOfCode(c.To); !ok {
			return changes, group{}, errors.New("a toleration that is no taint")
		}
	case c.Rule == RuleBuild && bytes.HasPrefix(c.To, []byte("[")):
		if c.To, ok = buildsPin(c.Path, c.To); !ok {
			return changes, group{}, errors.New("builds pinned where no build pin goes")
		}
	}
	switch {
	case present(5) && bytes.HasPrefix(elems[5], []byte("[")):
		if c.Reason, ok = reasonOfArgs(c.Rule, elems[5]); !ok {
			return changes, group{}, errors.New("a reason its rule does not make from a list")
		}
	case present(5):
		if c.Reason, ok = entryString(elems[5]); !ok {
			return changes, group{}, errEntry
		}
	default:
		c.Reason = recordedReason(c, c.Rule, recorded)
	}
	return append(changes, c), group{}, nil
}

// decodeGroup appends the strips of a group ["s", object, {field: value, ...} or -1].
func decodeGroup(elems [][]byte, changes []Change, prev group) ([]Change, group, error) {
	parent, ok := entryString(elems[1])
	if !ok {
		return changes, group{}, errGroup
	}
	g := group{parent: parent}
	switch {
	case parent == "spec" || parent == "spec.securityContext":
	case isContainerPath(parent):
	default:
		return changes, group{}, errGroup
	}
	start := len(changes)
	// A group of the object of the group before starts apart from it: two containers of one name.
	split := len(prev.changes) > 0 && prev.parent == parent
	if string(elems[2]) == "-1" {
		if len(prev.changes) == 0 {
			return changes, group{}, errors.New("-1 after an entry that is no group of strips")
		}
		skip := len(prev.prefix())
		for _, p := range prev.changes {
			changes = append(changes, g.strip(p.Path[skip:], p.From))
		}
	} else {
		var err error
		members(elems[2], func(key, value []byte) {
			field, ok := entryString(key)
			if !ok || err != nil {
				err = errGroup
				return
			}
			var from json.RawMessage
			if string(value) != "null" {
				from = value[:len(value):len(value)]
			}
			changes = append(changes, g.strip(field, from))
		})
		if err != nil || len(changes) == start {
			return changes[:start], group{}, errGroup
		}
	}
	changes[start].split = split
	g.changes = changes[start:len(changes):len(changes)]
	return changes, g, nil
}

// strip is the change of the group's object that removed field, from its value.
func (g group) strip(field string, from json.RawMessage) Change {
	var path string
	if isContainerPath(g.parent) {
		path = g.parent + inContainerSecurityContext + field
	} else {
		path = g.parent + "." + field
	}
	return Change{Action: Strip, Path: path, From: from, Reason: ReasonLinuxOnly, Rule: stripRuleOf(path)}
}

// prefix is what the paths of the group's strips start with: the object's path and the dot, or the
// container's and ".securityContext.".
func (g group) prefix() string {
	if isContainerPath(g.parent) {
		return g.parent + inContainerSecurityContext
	}
	return g.parent + "."
}

// isContainerPath: path is a container's, a container list's "spec.<list>[NAME]".
func isContainerPath(path string) bool {
	for _, l := range containerLists {
		if strings.HasPrefix(path, l) && strings.HasSuffix(path, "]") {
			return true
		}
	}
	return false
}
