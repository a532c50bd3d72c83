package admissionpolicy

import (
	"fmt"
	"strings"
)

// The walkers over a pod spec's lists of containers, in the Go decision's order (policy/strip.go:
// forEachContainer): the per-container parts of the generators are rendered through them.

// containerLists are the lists of containers the strip table and the non-root rule visit, in the Go
// decision's order.
var containerLists = []string{"initContainers", "containers", "ephemeralContainers"}

// perContainer renders body once per list of containers, in the Go decision's order: body gets the
// CEL of the container's JSON pointer and record path, and yields a CEL list over the container c and
// its index i; each result is that list for every container of one list. The path reads the name
// escaped once per container (variables.names), not once per change.
func perContainer(s shape, body func(ptr string, path jsonText) string) []string {
	return perContainerOf(s, containerLists, body)
}

// perContainerOf is perContainer over some of the lists of containers.
func perContainerOf(s shape, lists []string, body func(ptr string, path jsonText) string) []string {
	var out []string
	for _, l := range lists {
		ptr := fmt.Sprintf("%s + '/%s/' + string(i)", quote(s.specPtr), l)
		path := concat(text("spec."+l+"["), escapedBefore(fmt.Sprintf("variables.names[%s][i]", quote(l))), text("]"))
		out = append(out, fmt.Sprintf("%s.?%s.orValue([]).transformList(i, c, %s).flatten()", optional(s.spec), l, body(ptr, path)))
	}
	return out
}

// containerNames is the names variable: per list of containers, each container's name escaped for the
// record.
func containerNames(s shape) string {
	var lists []string
	for _, l := range containerLists {
		lists = append(lists, fmt.Sprintf("%s: %s.?%s.orValue([]).map(c, %s)", quote(l), optional(s.spec), l, escaped("c.name")))
	}
	return "{" + strings.Join(lists, ",\n ") + "}"
}

// eachContainer renders a per-container part: body gets CEL expressions of the container (c), its JSON
// pointer and its record path, and returns the part for one container.
func eachContainer(s shape, body func(c, ptr string, path jsonText) part) part {
	return eachContainerOf(s, containerLists, body)
}

// eachContainerOf is eachContainer over some of the lists of containers.
func eachContainerOf(s shape, lists []string, body func(c, ptr string, path jsonText) part) part {
	records := perContainerOf(s, lists, func(ptr string, path jsonText) string { return body("c", ptr, path).records })
	ops := perContainerOf(s, lists, func(ptr string, path jsonText) string { return body("c", ptr, path).ops })
	return part{records: "(" + strings.Join(records, " + ") + ")", ops: "(" + strings.Join(ops, " + ") + ")",
		any: anyContainer(s, lists, func(c string) string { return body(c, "", text("")).any })}
}

// anyContainer is true when some container c of the lists has cond(c).
func anyContainer(s shape, lists []string, cond func(c string) string) string {
	var a []string
	for _, l := range lists {
		a = append(a, fmt.Sprintf("%s.?%s.orValue([]).exists(c, %s)", optional(s.spec), l, cond("c")))
	}
	return anyOf(a)
}

// startedLists are the containers the narrowing rewrites visit, in the Go decision's order: ephemeral
// containers join a running pod, cannot set resources and take the pod's user.
var startedLists = []string{"initContainers", "containers"}

// eachStarted is eachContainer over startedLists.
func eachStarted(s shape, body func(c, ptr string, path jsonText) part) part {
	return eachContainerOf(s, startedLists, body)
}
