package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/wincompat/wincompat/policy"
)

// The change record is JSON built by CEL string concatenation: CEL in the API server has no JSON
// encoder. Every string in it comes from one of two places, and each has one way in:
//
//   - the generator's own constants (reasons, fixed paths, injector names): encoded here by
//     encoding/json and written into the CEL as literals (text, value); the policy's values come from
//     the params, the user name escaped like the object's strings and the taints as they are (a valid
//     policy's taints need no escaping);
//   - the object under admission (container, volume and annotation names, annotation values, mount
//     paths, node selector values, the strings the strip table removes): escaped by CEL at admission
//     time (escaped).
//
// Mutating admission runs before validation, so the second kind can hold anything a pod author sends,
// and some of it (annotations and fields that are removed here) is never validated at all. The types
// below keep the two kinds apart: entry takes only jsonText and jsonValue, which only these functions
// make, so no raw CEL string reaches the record.

// jsonText is a CEL expression of type string whose value is already escaped for the inside of a JSON
// string, exactly as encoding/json escapes it. A struct, so that not even an untyped constant converts
// to one: only the functions here make them.
type jsonText struct {
	cel string
	// lit is the constant's own text, for a constant (text): what the record may leave out.
	lit string
}

// jsonValue is a CEL expression of type string whose value is the text of one JSON value; the zero
// value is none.
type jsonValue struct{ cel string }

// none is no value: the entry has no "from", or no "to".
var none jsonValue

// text is the constant s, escaped now.
func text(s string) jsonText {
	b, _ := json.Marshal(s) // a string always marshals
	return jsonText{cel: quote(string(b[1 : len(b)-1])), lit: s}
}

// escaped is the CEL string expression expr, escaped at admission time. The regular expression first
// asks whether there is anything to escape: about 0.9 per byte against the chain's 7.8, so a string
// with nothing to escape (every real name, path and profile) stays far within the API server's limits
// however long, and the chain's price falls only on strings that need it.
func escaped(expr string) jsonText {
	e := "(" + expr + ")"
	return jsonText{cel: "(" + e + ".matches(" + quote(needsEscape) + ") ? " + e + escapeChain + " : " + e + ")"}
}

// escapedBefore is a CEL expression whose value some earlier expression made with escaped or text: a
// variable holding it, or a join of such texts with a separator that needs no escaping.
func escapedBefore(expr string) jsonText { return jsonText{cel: expr} }

// concat joins escaped texts: the concatenation of escaped strings is the escaped concatenation.
func concat(parts ...jsonText) jsonText {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = p.cel
	}
	return jsonText{cel: strings.Join(s, " + ")}
}

// String is the CEL, for rendering it into larger expressions.
func (t jsonText) String() string { return t.cel }

// str is t as a JSON string value.
func (t jsonText) str() jsonValue { return jsonValue{`'"' + ` + t.cel + ` + '"'`} }

// value is the constant v as JSON, encoded now as the webhook encodes it (policy.Change's From and To).
// The generator's constants are strings, booleans and tolerations, which always marshal.
func value(v any) jsonValue {
	b, _ := json.Marshal(v)
	return jsonValue{quote(string(b))}
}

// scalar renders a field's value, the CEL expression expr of Go kind kind, as JSON for the record's
// "from": numbers and booleans as they are, strings escaped; "" for lists and objects, which CEL cannot
// render as JSON (the record then has no "from" for them).
func scalar(expr string, kind reflect.Kind) jsonValue {
	switch kind {
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Bool:
		return jsonValue{"string(" + expr + ")"}
	case reflect.String:
		return escaped(expr).str()
	default:
		return none
	}
}

// recordExpr is the record written: the webhook's record (policy.EncodeChanges), the new entries after
// any recorded before. Anything else on the object (a record of another version, or one edited by hand)
// is replaced, as the webhook replaces a record it cannot read.
var recordExpr = fmt.Sprintf(`variables.recorded.startsWith(%[1]s) && variables.recorded.endsWith(']}') ?
  variables.recorded.substring(0, size(variables.recorded) - 2) + (variables.recorded.endsWith('[]}') ? '' : ',') + variables.records.join(',') + ']}' :
  %[2]s + variables.records.join(',') + ']}'`, quote(policy.RecordPrefix), quote(policy.RecordPrefix+`"c":[`))

// reason is a record entry's reason: its text, and whether it is left out because the rules table
// derives it (policy.ReasonWritten), a CEL bool: "true", "false" or a condition at admission time.
type reason struct {
	text    jsonText
	omitted string
}

// fixed is the constant reason of a change of rule r whose "to" is the constant to (nil for none), left
// out as the webhook leaves it out.
func fixed(r policy.Rule, why string, to any) reason {
	c := policy.Change{Rule: r, Reason: why}
	if to != nil {
		c.To, _ = json.Marshal(to)
	}
	return reason{text(why), fmt.Sprint(!policy.ReasonWritten(c))}
}

// entry is the CEL of one change's record entry, in the webhook's format (policy.EncodeChanges):
// [action, path, from, to, rule, reason], trailing absent elements left out and null for an absent
// one before a present one; the action a letter, a constant path its rule names (policy.PathOmitted)
// null, a strip-table rule's code left out (its path names the row), and so is a reason the rules
// table derives. It is the only place the record's entries are written but the strip table's groups
// (stripGroups).
func entry(action policy.Action, rule policy.Rule, path jsonText, from, to jsonValue, why reason) string {
	a, _ := json.Marshal(policy.ActionCode(action))
	out := quote(`[`+string(a)+`,"`) + " + " + path.cel + " + '\"'"
	if path.lit != "" && policy.RuleWritten(action, rule) && policy.PathOmitted(rule, path.lit) {
		out = quote(`[` + string(a) + `,null`)
	}
	var r jsonValue
	if policy.RuleWritten(action, rule) {
		r = value(string(rule))
	}
	// Each element written, with null for one absent before the last present one.
	elems := []jsonValue{from, to, r}
	n := len(elems)
	if why.omitted != "true" {
		elems = append(elems, why.text.str())
		n = len(elems)
	} else {
		for n > 0 && elems[n-1].cel == "" {
			n--
		}
	}
	for i, e := range elems[:n] {
		if e.cel == "" {
			e = jsonValue{quote("null")}
		}
		if i == len(elems)-1 && why.omitted != "true" && why.omitted != "false" {
			out += fmt.Sprintf(" + (%s ? '' : ',' + %s)", why.omitted, e.cel)
			continue
		}
		out += " + ',' + " + e.cel
	}
	return out + " + ']'"
}

// jsonEscapes are the characters encoding/json escapes in a string and what it writes for each: the
// control characters U+0000–U+001F, '"', '\\', '<', '>', '&' (its HTML-safe default, which
// policy.EncodeChanges keeps) and U+2028, U+2029. Read from encoding/json itself, so that both engines
// write the same bytes for the same value. The backslash comes first: the others add backslashes.
var jsonEscapes = func() [][2]string {
	out := [][2]string{{`\`, `\\`}}
	for _, r := range append(runeRange(0, 0x7f), '\u2028', '\u2029') {
		if r == '\\' {
			continue
		}
		b, _ := json.Marshal(string(r))
		if inner := string(b[1 : len(b)-1]); inner != string(r) {
			out = append(out, [2]string{string(r), inner})
		}
	}
	return out
}()

func runeRange(from, to rune) []rune {
	var out []rune
	for r := from; r <= to; r++ {
		out = append(out, r)
	}
	return out
}

// escapeChain is the CEL that escapes a string for JSON: one replace per entry of jsonEscapes. Each
// replace costs the API server 0.2 per byte of the string (k8s.io/apiserver/pkg/cel/library/cost.go),
// so about 8 per byte in all; only values of the object pass through it, once each (container names
// once per container, in variables.names), and only those needsEscape matches.
var escapeChain = func() string {
	var b strings.Builder
	for _, e := range jsonEscapes {
		fmt.Fprintf(&b, ".replace(%s, %s)", celChar(e[0]), quote(e[1]))
	}
	return b.String()
}()

// needsEscape matches a string holding any character of jsonEscapes (RE2, as CEL's matches reads it),
// written with ranges: the API server prices a regular expression by its length.
var needsEscape = func() string {
	var runes []rune
	for _, e := range jsonEscapes {
		runes = append(runes, []rune(e[0])[0])
	}
	slices.Sort(runes)
	lit := func(r rune) string {
		switch {
		case r < 0x20 || r > 0x7e:
			return fmt.Sprintf(`\x{%x}`, r)
		case strings.ContainsRune(`\]^-[`, r):
			return `\` + string(r)
		}
		return string(r)
	}
	var b strings.Builder
	b.WriteString("[")
	for i := 0; i < len(runes); {
		j := i
		for j+1 < len(runes) && runes[j+1] == runes[j]+1 {
			j++
		}
		b.WriteString(lit(runes[i]))
		if j > i {
			b.WriteString("-" + lit(runes[j]))
		}
		i = j + 1
	}
	return b.String() + "]"
}()

// celChar is a one-character CEL string literal, control and separator characters written as \u
// escapes so that the generated CEL stays printable.
func celChar(s string) string {
	if r := []rune(s)[0]; r < 0x20 || r == '\u2028' || r == '\u2029' {
		return fmt.Sprintf(`'\u%04x'`, r)
	}
	return quote(s)
}
