package manifest

import (
	"encoding/json"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// JSONObjects returns the objects of a stream Process wrote, as JSON, in order; empty and comment-only
// documents are no objects.
func JSONObjects(source string, stream []byte) ([]json.RawMessage, error) {
	var objs []json.RawMessage
	for i, c := range splitDocuments(stream) {
		var node yaml.Node
		if err := yaml.Unmarshal(c.body, &node); err != nil {
			return nil, fmt.Errorf("%s#%d: %s", source, i+1, oneLine(err))
		}
		if node.Kind == 0 || (len(node.Content) == 1 && node.Content[0].Tag == "!!null") {
			continue
		}
		raw, err := sigsyaml.YAMLToJSON(c.body)
		if err != nil {
			return nil, fmt.Errorf("%s#%d: %s", source, i+1, oneLine(err))
		}
		objs = append(objs, raw)
	}
	return objs, nil
}

// list is a v1 List as kubectl prints one, fields in its order.
type list struct {
	Kind       string            `json:"kind"`
	APIVersion string            `json:"apiVersion"`
	Metadata   struct{}          `json:"metadata"`
	Items      []json.RawMessage `json:"items"`
}

// WriteJSON prints objects as kubectl apply -o json does (and kubectl get -o json for several): one
// object alone, any other number as a v1 List of them, indented by four spaces. Either way the output is
// one JSON document, for kubectl apply -f - and jq.
func WriteJSON(w io.Writer, objs []json.RawMessage) error {
	var v any = list{Kind: "List", APIVersion: "v1", Items: objs}
	if len(objs) == 1 {
		v = objs[0]
	}
	if objs == nil {
		v = list{Kind: "List", APIVersion: "v1", Items: []json.RawMessage{}}
	}
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
