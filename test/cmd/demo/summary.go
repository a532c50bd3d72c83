package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// verbs are the actions in the order the summary lists them, with their past tense.
var verbs = []struct {
	action policy.Action
	verb   string
}{
	{policy.Strip, "stripped"},
	{policy.Rewrite, "rewrote"},
	{policy.Inject, "injected"},
	{policy.Warn, "warned"},
}

// Paths of per-container and per-volume changes: spec.containers[app].securityContext.runAsUser.
var (
	containerPath = regexp.MustCompile(`^(?:containers|initContainers|ephemeralContainers)\[([^\]]+)\]\.(.+)$`)
	volumePath    = regexp.MustCompile(`^volumes\[([^\]]+)\]\.(.+)$`)
	keyedPath     = regexp.MustCompile(`^(nodeSelector|metadata\.annotations)\[(.+)\]$`)
)

// group is the changes of one action under one prefix in one scope, e.g. the container fields under
// securityContext: "securityContext.{capabilities, privileged} (2 containers)".
type group struct {
	prefix string   // "securityContext", "nodeSelector", or "" for a whole field such as runtimeClassName
	fields []string // what follows the prefix, with a value where it says something
	kind   string   // "", "container" or "volume"
	owners []string // the containers or volumes
}

func (g *group) String() string {
	var s string
	switch {
	case g.prefix == "":
		s = strings.Join(g.fields, ", ")
	case g.prefix == "nodeSelector" || g.prefix == "metadata.annotations":
		s = strings.TrimPrefix(g.prefix, "metadata.") + " " + strings.Join(g.fields, ", ")
	case len(g.fields) == 1:
		s = g.prefix + "." + g.fields[0]
	default:
		s = g.prefix + ".{" + strings.Join(g.fields, ", ") + "}"
	}
	switch {
	case g.kind == "":
	case len(g.owners) == 1:
		s += " (" + g.kind + " " + g.owners[0] + ")"
	default:
		s += fmt.Sprintf(" (%d %ss)", len(g.owners), g.kind)
	}
	return s
}

// summarise renders a wincompat.io/changes list as one line per action, e.g.
//
//	stripped: securityContext.{runAsUser, fsGroup}; securityContext.capabilities (container app)
//	injected: nodeSelector kubernetes.io/os=windows; toleration os=windows:NoSchedule; runtimeClassName=windows-2022
func summarise(changes []policy.Change) []string {
	var out []string
	for _, v := range verbs {
		var groups []*group
		find := func(prefix, kind string) *group {
			for _, g := range groups {
				// Whole fields (runtimeClassName, a toleration) stand alone.
				if prefix != "" && g.prefix == prefix && g.kind == kind {
					return g
				}
			}
			g := &group{prefix: prefix, kind: kind}
			groups = append(groups, g)
			return g
		}
		for _, c := range changes {
			if c.Action != v.action {
				continue
			}
			path := strings.TrimPrefix(c.Path, "spec.")
			kind, owner := "", ""
			if m := containerPath.FindStringSubmatch(path); m != nil {
				kind, owner, path = "container", m[1], m[2]
			} else if m := volumePath.FindStringSubmatch(path); m != nil {
				kind, owner, path = "volume", m[1], m[2]
			}
			prefix, field := "", path
			if m := keyedPath.FindStringSubmatch(path); m != nil {
				prefix, field = m[1], m[2]
			} else if i := strings.IndexByte(path, '.'); i > 0 {
				prefix, field = path[:i], path[i+1:]
			}
			if t, ok := toleration(c); ok {
				field = t
			} else if a, ok := nodeAffinity(c); ok {
				prefix, field = "", a // stands alone, as a toleration does
			} else {
				field += value(c)
			}
			g := find(prefix, kind)
			if !contains(g.fields, field) {
				g.fields = append(g.fields, field)
			}
			if owner != "" && !contains(g.owners, owner) {
				g.owners = append(g.owners, owner)
			}
		}
		if len(groups) == 0 {
			continue
		}
		parts := make([]string, len(groups))
		for i, g := range groups {
			parts[i] = g.String()
		}
		out = append(out, v.verb+": "+strings.Join(parts, "; "))
	}
	return out
}

// value is what a change set a field to, where that is short: "=windows", " Memory→\"\"".
func value(c policy.Change) string {
	switch c.Action {
	case policy.Inject:
		if s, ok := scalar(c.To); ok {
			return "=" + s
		}
	case policy.Rewrite:
		from, okFrom := scalar(c.From)
		to, okTo := scalar(c.To)
		switch {
		case okFrom && okTo:
			return " " + from + "→" + to
		case okFrom && len(c.To) == 0:
			return " (was " + from + ")"
		}
	}
	return ""
}

// toleration renders an injected toleration as "toleration os=windows:NoSchedule".
func toleration(c policy.Change) (string, bool) {
	var t struct{ Key, Operator, Value, Effect string }
	if c.Path != "spec.tolerations" || json.Unmarshal(c.To, &t) != nil || t.Key == "" {
		return "", false
	}
	s := t.Key
	if t.Operator != "Exists" {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + t.Effect
	}
	return "toleration " + s, true
}

// nodeAffinity renders an injected required node affinity term, or an expression added to one of the
// pod's terms, as "node affinity node.kubernetes.io/windows-build In [10.0.17763, 10.0.26100]".
func nodeAffinity(c policy.Change) (string, bool) {
	const terms = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
	if c.Action != policy.Inject || !strings.HasPrefix(c.Path, terms) {
		return "", false
	}
	var term corev1.NodeSelectorTerm
	var req corev1.NodeSelectorRequirement
	var exprs []corev1.NodeSelectorRequirement
	switch {
	case json.Unmarshal(c.To, &term) == nil && len(term.MatchExpressions) > 0:
		exprs = term.MatchExpressions
	case json.Unmarshal(c.To, &req) == nil && req.Key != "":
		exprs = []corev1.NodeSelectorRequirement{req}
	default:
		return "", false
	}
	var parts []string
	for _, e := range exprs {
		parts = append(parts, fmt.Sprintf("%s %s [%s]", e.Key, e.Operator, strings.Join(e.Values, ", ")))
	}
	return "node affinity " + strings.Join(parts, ", "), true
}

// scalar renders a JSON string, number or boolean; "" renders as "".
func scalar(raw json.RawMessage) (string, bool) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		if v == "" {
			return `""`, true
		}
		return v, true
	case float64, bool:
		return string(raw), true
	}
	return "", false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
