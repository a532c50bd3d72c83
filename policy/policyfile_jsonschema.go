package policy

import (
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/wincompat/wincompat/policy/strictyaml"
)

// The Helm chart's values.schema.json holds, under definitions.policy, the JSON Schema of its policy
// value, which is a policy file without apiVersion and kind. JSONSchema generates it from what reads a
// policy file (ChartSchema adds what Validate checks of single values), so that the chart refuses at
// `helm install` what Load would refuse later, and never refuses what Load accepts: UPDATE_GOLDEN=1 go
// test ./policy -run TestChartValuesSchema writes it.

// schemaEnums are the keys whose values Validate allows from a closed set, by their path in a policy
// file ([*] for every item of a list). TestSchemaEnumsMatchValidate holds them against Validate.
var schemaEnums = map[string][]string{
	"mode":                        {ModeEnforce, ModeWarn},
	"arch":                        {"", "amd64", "arm64"},
	"runtimeClassesFor":           {RuntimeClassesForCatalog, RuntimeClassesForPresent},
	"windowsCompatibility":        {CompatibilityCompatible, CompatibilityExact},
	"imagesWithoutWindows":        {ImagesWithoutWindowsWarn, ImagesWithoutWindowsDeny},
	"windowsNodeTaints[*].effect": validEffects,
	"injectorOptOuts[*]":          injectorNames(),
	"registryMirrors[*].mirrors[*].capabilities[*]": {CapabilityPull, CapabilityResolve},
}

func injectorNames() []string {
	names := make([]string, 0, len(linuxOnlyInjectors))
	for _, in := range linuxOnlyInjectors {
		names = append(names, in.Name)
	}
	return names
}

// JSONSchema is the JSON Schema (draft 7) of a policy's keys: the keys of Policy as a file names them,
// no others; a string key takes any scalar, since a file's scalar is read as its text (2019 is the name
// "2019"), unless Validate allows a closed set. A null, which a file reads as "keep the default", is
// refused: leaving the key out says that, and an error then names the values instead of null among
// them. Each key is described by its comment in default.yaml.
func JSONSchema() map[string]any {
	var doc yaml.Node
	_ = yaml.Unmarshal(DefaultPolicyYAML, &doc) // compiled in; Default() fails loudly if it does not parse
	var top *yaml.Node
	if len(doc.Content) == 1 {
		top = doc.Content[0]
	}
	s := schemaOf(reflect.TypeFor[Policy](), "", top)
	s["title"] = "wincompat Policy (`wincompat policy` prints every key and its default)"
	return s
}

// schemaOf is the schema of a value of type t at path, described from node, the default's value there
// (nil where the default has none).
func schemaOf(t reflect.Type, path string, node *yaml.Node) map[string]any {
	if values, ok := schemaEnums[path]; ok {
		enum := make([]any, len(values))
		for i, v := range values {
			enum[i] = v
		}
		return map[string]any{"enum": enum}
	}
	switch t.Kind() {
	case reflect.Struct:
		keys := strictyaml.KeysOf(t)
		props := map[string]any{}
		for _, name := range keys.Names {
			at := name
			if path != "" {
				at = path + "." + name
			}
			keyNode, valueNode := mappingEntry(node, name)
			key, _ := keys.Lookup(name)
			p := schemaOf(key.Type, at, valueNode)
			if d := commentText(keyNode); d != "" {
				p["description"] = d
			}
			props[name] = p
		}
		return map[string]any{
			"type":                 "object",
			"properties":           props,
			"additionalProperties": false,
			// additionalProperties names the unknown key; this names the known ones.
			"propertyNames": map[string]any{"enum": stringsToAny(keys.Names)},
		}
	case reflect.Slice:
		var first *yaml.Node
		if node != nil && node.Kind == yaml.SequenceNode && len(node.Content) > 0 {
			first = node.Content[0]
		}
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), path+"[*]", first)}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	}
	return map[string]any{"type": []any{"string", "number", "boolean"}}
}

// mappingEntry returns the key and value nodes of name in the mapping n (nil, nil without one).
func mappingEntry(n *yaml.Node, name string) (key, value *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// commentText is a key's head comment as one line of prose.
func commentText(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	var words []string
	for _, line := range strings.Split(n.HeadComment, "\n") {
		words = append(words, strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "#"))...)
	}
	return strings.Join(words, " ")
}

func stringsToAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
