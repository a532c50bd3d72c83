package policy

import (
	"bytes"
	"encoding/json"
	"errors"
)

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

// decodeEntryV2 expands one version 2 entry, an array of two to six JSON values. Version 2 was written
// from issue 29 until version 3 replaced it; pods and templates admitted then keep theirs.
func decodeEntryV2(elems [][]byte) (Change, error) {
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
