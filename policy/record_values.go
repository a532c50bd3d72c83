package policy

// The values an entry writes by what the tables make them from, and reads back.

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// reasonArgs is a reason of rule r written as what its words are made from, a JSON list: build's
// warning that no ready node runs the builds chosen, as the builds. false for every other reason,
// which is written as it is.
func reasonArgs(r Rule, reason string) (json.RawMessage, bool) {
	if r != RuleBuild {
		return nil, false
	}
	rest, ok := strings.CutPrefix(reason, noBuildNodeBefore)
	list, ok2 := strings.CutSuffix(rest, noBuildNodeAfter)
	if !ok || !ok2 || list == "" {
		return nil, false
	}
	args := jsonValue(strings.Split(list, noBuildNodeSep))
	if back, ok := reasonOfArgs(r, args); !ok || back != reason {
		return nil, false
	}
	return args, true
}

// reasonOfArgs is the reason of rule r that reasonArgs wrote as args.
func reasonOfArgs(r Rule, args json.RawMessage) (string, bool) {
	var builds []string
	if r != RuleBuild || json.Unmarshal(args, &builds) != nil || len(builds) == 0 {
		return "", false
	}
	return noBuildNodeReason(builds), true
}

// RecordedTo is what the entry of a change of rule r at path writes for its "to" (to as it
// is, or what the tables make it from); the injector-opt-outs' names are written apart (writeNames).
// The admission policies write their constants' by it.
func RecordedTo(r Rule, path string, to json.RawMessage) json.RawMessage {
	return recordedTo(r, path, to)
}

func recordedTo(r Rule, path string, to json.RawMessage) json.RawMessage {
	switch r {
	case RuleWindowsTolerations:
		if code, ok := tolerationCode(to); ok {
			return code
		}
	case RuleBuild:
		if builds, ok := buildsOf(path, to); ok {
			return builds
		}
	}
	return to
}

// tolerationCode is the toleration to, as windowsNodeTaints makes it from a taint, written as the
// taint: "key=value:effect". false when to is not exactly the toleration that reads back from it: it
// reads to's own bytes in the one form jsonValue writes, with strings that need no escaping, and it runs
// for every record written, so it allocates only the code.
func tolerationCode(to json.RawMessage) (json.RawMessage, bool) {
	rest, ok := cutPrefix(to, `{"key":"`)
	if !ok {
		return nil, false
	}
	var key, value, effect []byte
	key, rest, ok = cutPlainString(rest)
	if !ok {
		return nil, false
	}
	if rest, ok = cutPrefix(rest, `,"operator":"Equal"`); !ok {
		return nil, false
	}
	if r, ok := cutPrefix(rest, `,"value":"`); ok {
		if value, rest, ok = cutPlainString(r); !ok {
			return nil, false
		}
	}
	if r, ok := cutPrefix(rest, `,"effect":"`); ok {
		if effect, rest, ok = cutPlainString(r); !ok {
			return nil, false
		}
	}
	if string(rest) != "}" || bytes.ContainsAny(key, "=:") || bytes.IndexByte(value, ':') >= 0 || bytes.IndexByte(effect, ':') >= 0 {
		return nil, false
	}
	code := make([]byte, 0, len(key)+len(value)+len(effect)+4)
	code = append(append(append(code, '"'), key...), '=')
	code = append(append(append(code, value...), ':'), effect...)
	return append(code, '"'), true
}

// cutPlainString cuts a JSON string's text, up to its closing quote, off b, when it needs no escaping
// (plainJSON): what jsonValue writes as it is.
func cutPlainString(b []byte) (s, rest []byte, ok bool) {
	for i, c := range b {
		if c == '"' {
			return b[:i], b[i+1:], true
		}
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '<' || c == '>' || c == '&' {
			return nil, b, false
		}
	}
	return nil, b, false
}

// tolerationOfCode reads a toleration written as its taint back. The record of every Windows pod has
// one, read on each later review, so a code that needs no escaping is read without encoding/json.
func tolerationOfCode(code json.RawMessage) (json.RawMessage, bool) {
	if inner, rest, ok := cutPlainString(code[min(1, len(code)):]); ok && len(rest) == 0 && code[0] == '"' {
		kv, effect, ok := bytes.Cut(inner, []byte(":"))
		for ok && bytes.IndexByte(effect, ':') >= 0 { // the effect follows the last colon
			var more []byte
			more, effect, _ = bytes.Cut(effect, []byte(":"))
			kv = inner[:len(kv)+1+len(more)]
		}
		key, value, ok2 := bytes.Cut(kv, []byte("="))
		if !ok || !ok2 {
			return nil, false
		}
		if len(key) == 0 {
			return jsonValue(corev1.Toleration{Operator: corev1.TolerationOpEqual, Value: string(value), Effect: corev1.TaintEffect(effect)}), true
		}
		out := make([]byte, 0, len(code)+56)
		out = append(append(append(out, `{"key":"`...), key...), `","operator":"Equal"`...)
		if len(value) > 0 {
			out = append(append(append(out, `,"value":"`...), value...), '"')
		}
		if len(effect) > 0 {
			out = append(append(append(out, `,"effect":"`...), effect...), '"')
		}
		return append(out, '}'), true
	}
	var s string
	if json.Unmarshal(code, &s) != nil {
		return nil, false
	}
	kv, effect, ok := cutLast(s, ":")
	key, value, ok2 := strings.Cut(kv, "=")
	if !ok || !ok2 {
		return nil, false
	}
	return jsonValue(corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: corev1.TaintEffect(effect)}), true
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// buildsOf is to, build's pin in the required node affinity (a term of its own, or an expression added
// to a term of the pod's), written as the builds it requires: the span of to that lists them. false when
// to is not exactly what reads back from them (buildsPin): it reads to's own bytes in the one form
// jsonValue writes, with builds that need no escaping, so it allocates nothing.
func buildsOf(path string, to json.RawMessage) (json.RawMessage, bool) {
	before, after := buildTermBefore, "}]}"
	if path != affinityTermsPath {
		if !isTermExpressions(path) {
			return nil, false
		}
		before, after = buildRequirementBefore, "}"
	}
	rest, ok := cutPrefix(to, before)
	if !ok || !bytes.HasSuffix(rest, []byte(after)) {
		return nil, false
	}
	list := rest[: len(rest)-len(after) : len(rest)-len(after)]
	if !plainStringList(list) {
		return nil, false
	}
	return json.RawMessage(list), true
}

// buildRequirementBefore and buildTermBefore are what jsonValue writes before the builds of build's
// requirement and of its term (TestRecordGroups reads them back through buildsPin).
const (
	buildRequirementBefore = `{"key":"` + corev1.LabelWindowsBuild + `","operator":"In","values":`
	buildTermBefore        = `{"matchExpressions":[` + buildRequirementBefore
)

// plainStringList: list is a JSON list of one or more strings that need no escaping, with no spaces.
func plainStringList(list []byte) bool {
	rest, ok := cutPrefix(list, `["`)
	for ok {
		if _, rest, ok = cutPlainString(rest); !ok {
			return false
		}
		if string(rest) == "]" {
			return true
		}
		rest, ok = cutPrefix(rest, `,"`)
	}
	return false
}

// buildsReasonIs says whether reason is buildsReason of the builds list (plainStringList), without
// building it.
func buildsReasonIs(reason string, list []byte) bool {
	rest, ok := strings.CutPrefix(reason, buildsReasonPrefix)
	sep := ""
	for ok && len(list) > 1 {
		var build []byte
		list, _ = cutPrefix(list[1:], `"`) // past '[' or ','
		build, list, _ = cutPlainString(list)
		if rest, ok = strings.CutPrefix(rest, sep); ok && len(rest) >= len(build) && rest[:len(build)] == string(build) {
			rest = rest[len(build):]
		} else {
			ok = false
		}
		sep = ", "
	}
	return ok && rest == ""
}

// buildsPin is the pin of the builds listed at path: the term at the affinity's terms, the expression
// at a term's matchExpressions. A list that needs no escaping is written around as it is.
func buildsPin(path string, builds json.RawMessage) (json.RawMessage, bool) {
	before, after := buildTermBefore, "}]}"
	switch {
	case path == affinityTermsPath:
	case isTermExpressions(path):
		before, after = buildRequirementBefore, "}"
	default:
		return nil, false
	}
	if plainStringList(builds) {
		return append(append(append(make([]byte, 0, len(before)+len(builds)+len(after)), before...), builds...), after...), true
	}
	var values []string
	if json.Unmarshal(builds, &values) != nil || len(values) == 0 {
		return nil, false
	}
	req := corev1.NodeSelectorRequirement{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: values}
	if path == affinityTermsPath {
		return jsonValue(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}}), true
	}
	return jsonValue(req), true
}

// isTermExpressions: path is the matchExpressions of one term of the required node affinity.
func isTermExpressions(path string) bool {
	rest, ok := strings.CutPrefix(path, affinityTermsPath+"[")
	if !ok {
		return false
	}
	i, ok := strings.CutSuffix(rest, "].matchExpressions")
	_, err := strconv.Atoi(i)
	return ok && err == nil
}

// recordedReason is derivedReason, and for build's pin in the node affinity written as its builds
// (recorded, what the entry writes for to), the reason that names them.
func recordedReason(c Change, r Rule, recorded json.RawMessage) string {
	if r != RuleBuild || !bytes.HasPrefix(recorded, []byte("[")) {
		return derivedReason(c, r)
	}
	if plainStringList(recorded) {
		var b strings.Builder
		b.Grow(len(buildsReasonPrefix) + len(recorded))
		b.WriteString(buildsReasonPrefix)
		rest := recorded[1:]
		for sep := ""; len(rest) > 1; sep = ", " {
			var build []byte
			rest, _ = cutPrefix(rest, `"`)
			build, rest, _ = cutPlainString(rest)
			b.WriteString(sep)
			b.Write(build)
			rest = rest[1:] // past ',' or ']'
		}
		return b.String()
	}
	var builds []string
	if json.Unmarshal(recorded, &builds) == nil {
		return buildsReason(builds)
	}
	return derivedReason(c, r)
}
