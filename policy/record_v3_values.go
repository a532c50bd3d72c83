package policy

// The values a version 3 entry writes by what the tables make them from, and reads back.

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

// RecordedTo is what a version 3 entry of a change of rule r at path writes for its "to" (to as it
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
// taint: "key=value:effect". false when to is not exactly the toleration that reads back from it.
func tolerationCode(to json.RawMessage) (json.RawMessage, bool) {
	if !bytes.HasPrefix(to, []byte(`{"key":`)) {
		return nil, false
	}
	var t corev1.Toleration
	if json.Unmarshal(to, &t) != nil || strings.ContainsAny(t.Key, "=:") || strings.Contains(t.Value, ":") || strings.Contains(string(t.Effect), ":") {
		return nil, false
	}
	code := jsonValue(t.Key + "=" + t.Value + ":" + string(t.Effect))
	if back, ok := tolerationOfCode(code); !ok || !bytes.Equal(back, to) {
		return nil, false
	}
	return code, true
}

// tolerationOfCode reads a toleration written as its taint back.
func tolerationOfCode(code json.RawMessage) (json.RawMessage, bool) {
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
// to a term of the pod's), written as the builds it requires. false when to is not exactly what reads
// back from them.
func buildsOf(path string, to json.RawMessage) (json.RawMessage, bool) {
	if !strings.HasPrefix(path, affinityTermsPath) || !bytes.HasPrefix(to, []byte(`{"`)) {
		return nil, false
	}
	var req corev1.NodeSelectorRequirement
	if path == affinityTermsPath {
		var term corev1.NodeSelectorTerm
		if json.Unmarshal(to, &term) != nil || len(term.MatchExpressions) != 1 {
			return nil, false
		}
		req = term.MatchExpressions[0]
	} else if json.Unmarshal(to, &req) != nil {
		return nil, false
	}
	if len(req.Values) == 0 {
		return nil, false
	}
	builds := jsonValue(req.Values)
	if back, ok := buildsPin(path, builds); !ok || !bytes.Equal(back, to) {
		return nil, false
	}
	return builds, true
}

// buildsPin is the pin of the builds listed at path: the term at the affinity's terms, the expression
// at a term's matchExpressions.
func buildsPin(path string, builds json.RawMessage) (json.RawMessage, bool) {
	var values []string
	if json.Unmarshal(builds, &values) != nil || len(values) == 0 {
		return nil, false
	}
	req := corev1.NodeSelectorRequirement{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: values}
	switch {
	case path == affinityTermsPath:
		return jsonValue(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}}), true
	case isTermExpressions(path):
		return jsonValue(req), true
	}
	return nil, false
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

// derivedReasonV3 is derivedReason, and for build's pin in the node affinity written as its builds
// (recorded, what the entry writes for to), the reason that names them.
func derivedReasonV3(c Change, r Rule, recorded json.RawMessage) string {
	if r == RuleBuild && bytes.HasPrefix(recorded, []byte("[")) {
		var builds []string
		if json.Unmarshal(recorded, &builds) == nil {
			return buildsReason(builds)
		}
	}
	return derivedReason(c, r)
}
