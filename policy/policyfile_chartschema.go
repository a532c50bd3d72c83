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
	builds := props["builds"].(map[string]any)
	builds["minItems"] = 1
	build := builds["items"].(map[string]any)["properties"].(map[string]any)
	build["build"] = map[string]any{"type": "string", "pattern": buildNumber.String()}
	build["runtimeClassName"] = scalarSchema(`^(`+dnsSubdomain+`)?$`, 253, true)
	taint := props["windowsNodeTaints"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)
	taint["key"] = scalarSchema(`^(`+dnsSubdomain+`/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`, 253+1+63, true)
	taint["value"] = scalarSchema(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`, 63, true)
	props["nonRootUserName"] = describe("nonRootUserName", userNameSchema())
	memory := props["memoryLimits"].(map[string]any)["properties"].(map[string]any)
	memory["default"] = memoryLimitSchema(memory["default"].(map[string]any)["description"])
	s["allOf"] = []any{
		// The catalog the default build must be in is the chart's own only when the values set none;
		// with builds set, the chart's templates check it against them.
		map[string]any{
			"if":   map[string]any{"required": []any{"builds"}},
			"else": map[string]any{"properties": map[string]any{"defaultBuild": defaultBuildSchema(Default())}},
		},
		// userForRunAsNonRoot names nonRootUserName, whose default is a user.
		map[string]any{
			"if": map[string]any{"required": []any{"userForRunAsNonRoot"}, "properties": map[string]any{"userForRunAsNonRoot": map[string]any{"const": true}}},
			"then": map[string]any{"properties": map[string]any{"nonRootUserName": refusing(map[string]any{"const": ""},
				"a user: userForRunAsNonRoot names nonRootUserName; set nonRootUserName (ContainerUser) or turn userForRunAsNonRoot off")}},
		},
	}
	return s
}

// dnsSubdomain is validation.IsDNS1123Subdomain's pattern, without its bound of 253 characters.
const dnsSubdomain = `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`

// scalarSchema is a key that a file reads as text from any scalar: a string matching pattern, at most
// maxLength long, or a number or boolean, whose text matches it when numbers say so.
func scalarSchema(pattern string, maxLength int, numbers bool) map[string]any {
	alts := []any{
		map[string]any{"type": "string", "pattern": pattern, "maxLength": maxLength},
		map[string]any{"type": "boolean"},
	}
	if numbers {
		alts = append(alts, map[string]any{"type": "number", "minimum": 0})
	}
	return map[string]any{"anyOf": alts}
}

// refusing is a schema that refuses what matches bad with message, as the error's only words: "value
// must be '<message>'". A pattern's own error would show the pattern.
func refusing(bad map[string]any, message string) map[string]any {
	return map[string]any{"if": bad, "then": map[string]any{"const": message}}
}

// userNameSchema is what Validate takes as nonRootUserName: "" (no user), or a Windows user name
// (validUserName) that is not an administrator account (adminUser).
func userNameSchema() map[string]any {
	const forbidden = `"/\\:;|=,+*?<>@\[\]\x00-\x1f\x7f-\x9f`
	valid := `^([^\\\x00-\x1f\x7f-\x9f]*\\)?[^` + forbidden + `]{1,104}$`
	var admins []string
	for _, a := range adminUserNames {
		admins = append(admins, caseless(a.name))
	}
	return map[string]any{
		"type": []any{"string", "number", "boolean"},
		"allOf": []any{
			refusing(map[string]any{"type": "string", "minLength": 1, "not": map[string]any{"pattern": valid}},
				`not a Windows user name: use USER or DOMAIN\USER, USER at most 104 characters and none of "/\:;|=,+*?<>@[]`),
			refusing(map[string]any{"type": "string", "pattern": `^([^\\]*\\)?[. ]*$`, "minLength": 1},
				"not a Windows user name: use a user name of more than dots and spaces"),
			refusing(map[string]any{"type": "string", "pattern": `^([^\\]*\\)?(` + strings.Join(admins, "|") + `)$`},
				"not an administrator account: every rule that sets this user does so to keep a pod from running as one; use ContainerUser or another non-admin user"),
		},
	}
}

// memoryLimitSchema is what Validate takes as memoryLimits.default: "" (none) or a quantity of more
// than zero (a fraction of a byte is left to Validate).
func memoryLimitSchema(description any) map[string]any {
	const quantity = `^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][-+]?[0-9]+)?$`
	const zero = `^\+?(0+(\.0*)?|\.0+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][-+]?[0-9]+)?$`
	return map[string]any{
		"description":      description,
		"type":             []any{"string", "number"},
		"exclusiveMinimum": 0,
		"allOf": []any{
			refusing(map[string]any{"type": "string", "minLength": 1, "not": map[string]any{"pattern": quantity}}, "a quantity of bytes such as 512Mi or 2Gi"),
			refusing(map[string]any{"type": "string", "pattern": zero}, "a memory limit of more than zero, such as 512Mi"),
		},
	}
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
