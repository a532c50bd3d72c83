// Package yamlpatch applies an RFC 6902 patch to a YAML node tree, so that a manifest keeps its comments,
// key order and style everywhere the patch does not touch.
package yamlpatch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/wincompat/wincompat/patch"
)

// Apply applies p to the YAML document root (a mapping node) in place. It supports the operations
// patch.Diff emits (add, remove, replace) and refuses paths through anchors and aliases, where an edit
// would silently change every other reference too.
func Apply(root *yaml.Node, p patch.Patch) error {
	for _, op := range p {
		if err := apply(root, op); err != nil {
			return fmt.Errorf("%s %s: %w", op.Op, op.Path, err)
		}
	}
	return nil
}

func apply(root *yaml.Node, op patch.Operation) error {
	if op.Op != "add" && op.Op != "remove" && op.Op != "replace" {
		return fmt.Errorf("operation %q is not supported", op.Op)
	}
	segs := patch.SplitPointer(op.Path)
	if len(segs) == 0 {
		return fmt.Errorf("patching the whole document is not supported")
	}
	parent, err := walk(root, segs[:len(segs)-1])
	if err != nil {
		return err
	}
	last := segs[len(segs)-1]
	var value *yaml.Node
	if op.Op != "remove" {
		if value, err = valueNode(op.Value); err != nil {
			return fmt.Errorf("encoding value: %w", err)
		}
	}
	switch parent.Kind {
	case yaml.MappingNode:
		i := keyIndex(parent, last)
		switch {
		case op.Op == "add" && i < 0:
			key := &yaml.Node{}
			_ = key.Encode(last) // a string always encodes
			parent.Content = append(parent.Content, key, value)
		case i < 0:
			return fmt.Errorf("no member %q", last)
		case op.Op == "remove":
			parent.Content = append(parent.Content[:i], parent.Content[i+2:]...)
		default: // add on an existing member replaces it, as RFC 6902 says
			keepComments(parent.Content[i+1], value)
			parent.Content[i+1] = value
		}
	case yaml.SequenceNode:
		n := len(parent.Content)
		if op.Op == "add" && last == "-" {
			parent.Content = append(parent.Content, value)
			return nil
		}
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i > n || (i == n && op.Op != "add") {
			return fmt.Errorf("index %q out of range 0..%d", last, n)
		}
		switch op.Op {
		case "add":
			parent.Content = append(parent.Content[:i], append([]*yaml.Node{value}, parent.Content[i:]...)...)
		case "remove":
			parent.Content = append(parent.Content[:i], parent.Content[i+1:]...)
		default:
			parent.Content[i] = value
		}
	default:
		return fmt.Errorf("parent is not a mapping or a sequence")
	}
	return nil
}

func walk(node *yaml.Node, segs []string) (*yaml.Node, error) {
	for depth, s := range segs {
		if node.Kind == yaml.AliasNode || node.Anchor != "" {
			return nil, fmt.Errorf("path goes through a YAML anchor or alias at %q", strings.Join(segs[:depth], "/"))
		}
		switch node.Kind {
		case yaml.MappingNode:
			i := keyIndex(node, s)
			if i < 0 {
				return nil, fmt.Errorf("no member %q", s)
			}
			node = node.Content[i+1]
		case yaml.SequenceNode:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(node.Content) {
				return nil, fmt.Errorf("index %q out of range", s)
			}
			node = node.Content[i]
		default:
			return nil, fmt.Errorf("%q is not a mapping or a sequence", s)
		}
	}
	if node.Kind == yaml.AliasNode || node.Anchor != "" {
		return nil, fmt.Errorf("path ends in a YAML anchor or alias")
	}
	return node, nil
}

// valueNode renders an operation's value through its JSON encoding, the one the patch means: typed values
// then keep their JSON names and field order. JSON is YAML, so the encoding parses as a node tree; its
// flow style and quotes are dropped so the value reads like the block YAML around it.
func valueNode(v any) (*yaml.Node, error) {
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(enc, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("value %s is not one YAML node", enc)
	}
	plainStyle(doc.Content[0])
	return doc.Content[0], nil
}

// plainStyle resets the presentation style of a tree; the encoder quotes strings that need it.
func plainStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plainStyle(c)
	}
}

// keyIndex returns the index in Content of the key node named key, or -1.
func keyIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// keepComments moves the comments of a replaced value onto its replacement.
func keepComments(old, repl *yaml.Node) {
	repl.HeadComment, repl.LineComment, repl.FootComment = old.HeadComment, old.LineComment, old.FootComment
}
