package policy

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// ChartSchema is the schema of the Helm chart's policy value, as values.schema.json holds it under
// definitions.policy: JSONSchema, with the checks of Validate that a JSON Schema can say about one
// value, and without the closing of objects to their keys.
//
// Keys are left open because Helm checks values.schema.json before it renders, and its message about an
// unknown key cannot be changed: it lists every allowed key and suggests none. The chart's
// templates/values-check.yaml refuses unknown keys instead, naming the closest known one.
func ChartSchema() map[string]any {
	s := JSONSchema()
	openKeys(s)
	props := s["properties"].(map[string]any)
	describe := func(key string, schema map[string]any) map[string]any {
		if d, ok := props[key].(map[string]any)["description"]; ok {
			schema["description"] = d
		}
		return schema
	}
	props["runtimeClassHandler"] = describe("runtimeClassHandler", dnsLabelSchema())
	for _, key := range []string{"excludedNamespaces", "linuxByDefaultExcludedNamespaces"} {
		props[key] = describe(key, map[string]any{"type": "array", "items": dnsLabelSchema()})
	}
	build := props["builds"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)
	build["build"] = map[string]any{"type": "string", "pattern": buildNumber.String()}
	// The catalog the default build must be in is the chart's own only when the values set none; with
	// builds set, the chart's templates check it against them.
	s["if"] = map[string]any{"required": []any{"builds"}}
	s["else"] = map[string]any{"properties": map[string]any{"defaultBuild": defaultBuildSchema(Default())}}
	return s
}

// openKeys removes what closes the objects of schema s to their keys, at every level.
func openKeys(s map[string]any) {
	delete(s, "additionalProperties")
	delete(s, "propertyNames")
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			openKeys(p.(map[string]any))
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		openKeys(items)
	}
}

// dnsLabelSchema is a key Validate holds to be a DNS label (validation.IsDNS1123Label), written as any
// scalar: a file reads 2022 or true as its text, which is a label; a negative or fractional number is
// not.
func dnsLabelSchema() map[string]any {
	return map[string]any{
		"anyOf": []any{
			map[string]any{"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
			map[string]any{"type": "integer", "minimum": 0},
			map[string]any{"type": "boolean"},
		},
	}
}

// defaultBuildSchema is what lookupBuild finds in p's catalog, or "" (no default): a build number or a
// name, case aside and with spaces around; a name of digits only also as a number, which a file reads
// as its text.
func defaultBuildSchema(p *Policy) map[string]any {
	names := []any{""}
	var alts []string
	var numbers []any
	for _, b := range p.Builds {
		for _, n := range append([]string{b.Number}, b.Names...) {
			names = append(names, n)
			alts = append(alts, caseless(n))
			if i, err := strconv.Atoi(n); err == nil && strconv.Itoa(i) == n && !slices.Contains(numbers, any(i)) {
				numbers = append(numbers, i)
			}
		}
	}
	// \s is what a JSON Schema pattern can say of strings.TrimSpace's white space: ASCII only.
	pattern := `^\s*(` + strings.Join(alts, "|") + `)?\s*$`
	return map[string]any{
		"description": "A build number or a name of a build in the catalog (" + p.buildNames() + "), or \"\" for none.",
		// What matches any spelling is taken; anything else fails on the names alone, so that the
		// error lists them rather than the pattern. The numbers apart: a validator may hold "2019" and
		// 2019 to be the same item of one enum.
		"if": map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "pattern": pattern},
			map[string]any{"type": "integer", "enum": numbers},
		}},
		"else": map[string]any{"enum": names},
	}
}

// caseless is a regular expression that matches s in any case, written without flags, which not every
// JSON Schema validator reads.
func caseless(s string) string {
	var b strings.Builder
	for _, r := range s {
		lower, upper := unicode.ToLower(r), unicode.ToUpper(r)
		if lower == upper {
			b.WriteString(regexp.QuoteMeta(string(r)))
			continue
		}
		b.WriteString("[" + string(upper) + string(lower) + "]")
	}
	return b.String()
}
