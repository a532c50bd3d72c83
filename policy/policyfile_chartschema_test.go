package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestChartSchemaDefaultBuild: the chart's schema of defaultBuild takes what Validate takes with the
// default catalog, and refuses what it refuses, for the names, numbers, cases and spaces a person writes.
func TestChartSchemaDefaultBuild(t *testing.T) {
	s := defaultBuildSchema(Default())
	alts := s["if"].(map[string]any)["anyOf"].([]any)
	enum := append(s["else"].(map[string]any)["enum"].([]any), alts[1].(map[string]any)["enum"].([]any)...)
	pattern := regexp.MustCompile(alts[0].(map[string]any)["pattern"].(string))
	schemaTakes := func(v any) bool {
		if slices.Contains(enum, v) {
			return true
		}
		str, ok := v.(string)
		return ok && pattern.MatchString(str)
	}
	loads := func(v any) bool {
		_, err := Load(fmt.Appendf(nil, "apiVersion: wincompat.io/v1alpha1\nkind: Policy\ndefaultBuild: %q\n", fmt.Sprint(v)))
		return err == nil
	}
	cases := []any{"", "ltsc2022", "LTSC2022", "Ltsc2019", " ltsc2025 ", "10.0.20348", "2019", "1809", 2022, 1809,
		"ltsc2021", "ltsc", "2021", 2021, "10.0.20349", "10.0.2034", "ltsc2022x", "xltsc2022", "10a0a20348", "ltsc2022|2019", "2022 2019"}
	var took int
	for _, v := range cases {
		got, want := schemaTakes(v), loads(v)
		if got != want {
			t.Errorf("defaultBuild %#v: the schema takes it: %v; Validate takes it: %v", v, got, want)
		}
		if got {
			took++
		}
	}
	if took < 5 || took == len(cases) {
		t.Errorf("%d of %d cases taken: the table tests one side only", took, len(cases))
	}
	if d := s["description"].(string); !strings.Contains(d, "ltsc2022") {
		t.Errorf("description %q does not name the catalog", d)
	}
}

// TestChartSchemaOpen: the chart's schema of the policy closes no object to its keys (the chart's
// templates name the closest key instead), and keeps the closed sets of values.
func TestChartSchemaOpen(t *testing.T) {
	var walk func(s map[string]any, path string)
	walk = func(s map[string]any, path string) {
		for _, key := range []string{"additionalProperties", "propertyNames"} {
			if _, ok := s[key]; ok {
				t.Errorf("%s: %s left in", path, key)
			}
		}
		if props, ok := s["properties"].(map[string]any); ok {
			for name, p := range props {
				walk(p.(map[string]any), path+"."+name)
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(items, path+"[*]")
		}
	}
	s := ChartSchema()
	walk(s, "policy")
	if _, ok := s["properties"].(map[string]any)["mode"].(map[string]any)["enum"]; !ok {
		t.Error("mode lost its closed set")
	}
}

// chartValueKeys is the chart's template of the keys it knows, which its values-check.yaml reads.
var chartValueKeys = filepath.Join("..", "deploy", "helm", "wincompat", "templates", "_valuekeys.tpl")

// TestChartValueKeys: the chart's _valuekeys.tpl names the keys of values.schema.json at every level
// the schema closes to its keys, the policy's as ChartSchema generates them. UPDATE_GOLDEN=1 rewrites it.
func TestChartValueKeys(t *testing.T) {
	data, err := os.ReadFile(chartValuesSchema)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	// The policy as generated now, so that one UPDATE_GOLDEN=1 run writes both files.
	generated, err := json.Marshal(ChartSchema())
	if err != nil {
		t.Fatal(err)
	}
	var policySchema map[string]any
	if err := json.Unmarshal(generated, &policySchema); err != nil {
		t.Fatal(err)
	}
	schema["definitions"].(map[string]any)["policy"] = policySchema
	tree := valueKeys(schema, schema)
	js, err := json.MarshalIndent(tree, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	want := `{{- /*
Generated from values.schema.json by UPDATE_GOLDEN=1 go test ./policy -run TestChartValueKeys: do not
edit. The keys the chart knows at each level, for values-check.yaml: an object names its keys, a list
[item] the keys of its items, null a value whose keys are not the chart's (Kubernetes shapes, global).
*/ -}}
{{- define "wincompat.valueKeys" -}}
` + string(js) + "\n{{- end -}}\n"
	got, _ := os.ReadFile(chartValueKeys)
	if string(got) == want {
		return
	}
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(chartValueKeys, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is stale; run UPDATE_GOLDEN=1 go test ./policy -run TestChartValueKeys and review the diff", chartValueKeys)
}

// valueKeys is the tree of known keys under schema s: a map of key to subtree where s has properties
// and allows no others, [subtree] for a list, nil where any key goes.
func valueKeys(root, s map[string]any) any {
	if ref, ok := s["$ref"].(string); ok {
		cur := root
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cur, _ = cur[part].(map[string]any)
		}
		s = cur
	}
	if props, ok := s["properties"].(map[string]any); ok {
		if _, open := s["additionalProperties"]; open {
			return nil
		}
		keys := map[string]any{}
		for name, p := range props {
			keys[name] = valueKeys(root, p.(map[string]any))
		}
		return keys
	}
	if items, ok := s["items"].(map[string]any); ok {
		if sub := valueKeys(root, items); sub != nil {
			return []any{sub}
		}
	}
	return nil
}
