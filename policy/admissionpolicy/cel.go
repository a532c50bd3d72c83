package admissionpolicy

import "strings"

// The CEL text the generators share: literals, optional paths, disjunctions and JSON pointer escapes.

// optional turns a path such as object.spec.template.spec into its optional form
// object.?spec.?template.?spec, which is absent rather than an error when a member is missing.
func optional(path string) string {
	parts := strings.Split(path, ".")
	return parts[0] + ".?" + strings.Join(parts[1:], ".?")
}

// celList renders strings as a CEL list literal.
func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// quote renders s as a CEL string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// anyOf is the CEL disjunction of the bools in a.
func anyOf(a []string) string {
	if len(a) == 0 {
		return "false"
	}
	return "(" + strings.Join(a, " || ") + ")"
}

// pointerEscaped is the CEL of a key escaped for a JSON pointer (RFC 6901): jsonpatch.escapeKey exists
// only in the mutation's own expression, not in variables.
func pointerEscaped(key string) string {
	return key + `.replace('~', '~0').replace('/', '~1')`
}
