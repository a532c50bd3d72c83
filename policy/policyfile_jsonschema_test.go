package policy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/wincompat/wincompat/policy/strictyaml"
)

// chartValuesSchema is the Helm chart's values schema, whose definitions.policy JSONSchema generates.
var chartValuesSchema = filepath.Join("..", "deploy", "helm", "wincompat", "values.schema.json")

// schemaDefinitions is how values.schema.json ends: its last key holds the generated schema, so that
// the rest of the file is written by hand and only this part is rewritten.
const schemaDefinitions = "\n  \"definitions\": {\n    \"policy\": "

// renderSchemaDefinitions is the end of values.schema.json for the generated policy schema.
func renderSchemaDefinitions(t *testing.T) string {
	t.Helper()
	js, err := json.MarshalIndent(ChartSchema(), "    ", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return schemaDefinitions + string(js) + "\n  }\n}\n"
}

// TestChartValuesSchema: the chart's schema of the policy value is what ChartSchema generates, and the
// chart's policy value refers to it. UPDATE_GOLDEN=1 rewrites it.
func TestChartValuesSchema(t *testing.T) {
	data, err := os.ReadFile(chartValuesSchema)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(data, []byte(schemaDefinitions))
	if at < 0 {
		t.Fatalf("%s does not end with definitions.policy (%q)", chartValuesSchema, schemaDefinitions)
	}
	want := renderSchemaDefinitions(t)
	if got := string(data[at:]); got != want {
		if os.Getenv("UPDATE_GOLDEN") == "1" {
			data = append(data[:at:at], want...)
			if err := os.WriteFile(chartValuesSchema, data, 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			t.Errorf("%s: definitions.policy is stale; run UPDATE_GOLDEN=1 go test ./policy -run TestChartValuesSchema and review the diff", chartValuesSchema)
		}
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("%s: %v", chartValuesSchema, err)
	}
	if ref := strings.Join(strings.Fields(string(schema.Properties["policy"])), ""); ref != `{"$ref":"#/definitions/policy"}` {
		t.Errorf("properties.policy is %s, want a $ref to #/definitions/policy", ref)
	}
}

// TestSchemaEnumsMatchValidate: a key whose value the schema takes from a closed set takes exactly the
// values Validate allows; and a key Validate refuses an ordinary word for is such a key, unless it is
// checked otherwise (listed below, free in the schema). So a closed set added to Validate without
// schemaEnums fails here, as does an enum that Validate no longer keeps.
func TestSchemaEnumsMatchValidate(t *testing.T) {
	// Refused for "nosuchvalue", yet not closed sets: the schema leaves them to Validate.
	checkedOtherwise := map[string]string{
		"defaultBuild":         "a name of a build in the catalog, which the policy itself sets",
		"memoryLimits.default": "a quantity",
		"builds[*].build":      "a build number",
	}
	var def map[string]any
	if err := yaml.Unmarshal(Default().YAML(), &def); err != nil {
		t.Fatal(err)
	}
	loads := func(path string, v any) bool {
		doc := deepCopyYAML(def)
		setAt(t, doc, path, v)
		data, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Load(data)
		return err == nil
	}
	leaves := stringLeaves(JSONSchema(), "")
	if len(leaves) < 15 { // 19 today: a walk that stops early would test nothing
		t.Fatalf("only %d string keys found in the schema: %q", len(leaves), leaves)
	}
	for _, path := range leaves {
		enum, closed := schemaEnums[path]
		if !closed {
			if !loads(path, "nosuchvalue") && checkedOtherwise[path] == "" {
				t.Errorf("%s: Validate refuses nosuchvalue, but the schema takes any string: add its values to schemaEnums", path)
			}
			continue
		}
		for _, v := range enum {
			if !loads(path, v) {
				t.Errorf("%s: the schema allows %q, Validate refuses it", path, v)
			}
		}
		if loads(path, "nosuchvalue") {
			t.Errorf("%s: Validate allows nosuchvalue, the schema does not", path)
		}
	}
	for path := range schemaEnums {
		if !slices.Contains(leaves, path) {
			t.Errorf("schemaEnums names %s, which is no key of a policy", path)
		}
	}
}

// stringLeaves lists the paths of the string keys in schema s ([*] for list items).
func stringLeaves(s map[string]any, path string) []string {
	if _, ok := s["enum"]; ok {
		return []string{path}
	}
	switch {
	case hasType(s, "object"):
		var out []string
		for name, p := range s["properties"].(map[string]any) {
			at := name
			if path != "" {
				at = path + "." + name
			}
			out = append(out, stringLeaves(p.(map[string]any), at)...)
		}
		slices.Sort(out)
		return out
	case hasType(s, "array"):
		return stringLeaves(s["items"].(map[string]any), path+"[*]")
	case hasType(s, "string"):
		return []string{path}
	}
	return nil
}

// hasType says whether schema s allows JSON values of type typ.
func hasType(s map[string]any, typ string) bool {
	if types, ok := s["type"].([]any); ok {
		return slices.Contains(types, any(typ))
	}
	return s["type"] == typ
}

// setAt sets the value at path in a decoded policy file; [*] is the list's first item.
func setAt(t *testing.T, doc map[string]any, path string, v any) {
	t.Helper()
	var cur any = doc
	parts := strings.Split(path, ".")
	for i, part := range parts {
		name, list := strings.CutSuffix(part, "[*]")
		m := cur.(map[string]any)
		last := i == len(parts)-1
		switch {
		case list && last:
			m[name] = []any{v}
		case list:
			items, _ := m[name].([]any)
			if len(items) == 0 && sampleItems[name] != nil {
				items = []any{deepCopyYAML(sampleItems[name])}
				m[name] = items
			}
			if len(items) == 0 {
				t.Fatalf("%s: the default policy has no item to set (add one to sampleItems)", path)
			}
			cur = items[0]
		case last:
			m[name] = v
		default:
			cur = m[name]
		}
	}
}

// sampleItems are valid items of the lists the default policy leaves empty, so that the keys of their
// items can be set one at a time.
var sampleItems = map[string]map[string]any{
	"registryMirrors": {"registry": "mcr.microsoft.com", "mirrors": []any{map[string]any{"host": "mirror.example"}}},
}

func deepCopyYAML(v map[string]any) map[string]any {
	var out map[string]any
	data, _ := yaml.Marshal(v)
	_ = yaml.Unmarshal(data, &out)
	return out
}

// The schema's keys are the decoder's keys at every level.
func TestJSONSchemaKeys(t *testing.T) {
	var walk func(s map[string]any, typ reflect.Type, path string)
	walk = func(s map[string]any, typ reflect.Type, path string) {
		switch typ.Kind() {
		case reflect.Struct:
			keys := strictyaml.KeysOf(typ)
			props := s["properties"].(map[string]any)
			var names []string
			for name := range props {
				names = append(names, name)
			}
			want := slices.Clone(keys.Names)
			slices.Sort(want)
			slices.Sort(names)
			if !slices.Equal(names, want) {
				t.Errorf("%s: schema keys %q, decoder keys %q", path, names, want)
			}
			if s["additionalProperties"] != false {
				t.Errorf("%s: other keys allowed", path)
			}
			if got := s["propertyNames"].(map[string]any)["enum"]; !reflect.DeepEqual(got, stringsToAny(keys.Names)) {
				t.Errorf("%s: propertyNames %v, want %q", path, got, keys.Names)
			}
			for _, name := range keys.Names {
				key, _ := keys.Lookup(name)
				walk(props[name].(map[string]any), key.Type, path+"."+name)
			}
		case reflect.Slice:
			if !hasType(s, "array") {
				t.Errorf("%s: type %v, want array", path, s["type"])
				return
			}
			walk(s["items"].(map[string]any), typ.Elem(), path+"[*]")
		}
	}
	walk(JSONSchema(), reflect.TypeFor[Policy](), "policy")
	// Every key of default.yaml that has a comment passes it on.
	props := JSONSchema()["properties"].(map[string]any)
	for _, name := range []string{"mode", "imagesWithoutWindows", "injectorOptOuts"} {
		if d, _ := props[name].(map[string]any)["description"].(string); d == "" || strings.Contains(d, "#") {
			t.Errorf("%s: description %q", name, d)
		}
	}
}
