package strictyaml

import (
	"reflect"

	"go.yaml.in/yaml/v3"
)

// Node renders v, a struct, as YAML nodes by the keys Decode reads (KeysOf): every key, an empty list
// as [] (so that it reads back as empty and not as "left out").
func Node(v any) *yaml.Node { return encodeNode(reflect.ValueOf(v)) }

func encodeNode(v reflect.Value) *yaml.Node {
	switch v.Kind() {
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := KeysOf(v.Type())
		for _, name := range keys.Names {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, encodeNode(v.FieldByIndex(keys.byName[name].index)))
		}
		return n
	case reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			n.Content = append(n.Content, encodeNode(v.Index(i)))
		}
		return n
	}
	var n yaml.Node
	_ = n.Encode(v.Interface()) // a string or a bool: yaml.v3 chooses the quoting that reads back the same
	return &n
}
