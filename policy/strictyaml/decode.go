// Package strictyaml reads one YAML document into a Go struct by its json tags, strictly: unknown keys
// (with the nearest known one suggested), duplicate keys and values of the wrong shape are errors
// naming the line and the key's path, all of them in one refusal, and hostile input (huge mappings,
// aliases that multiply) costs bounded time. It is the policy file's reader, and its refusals say
// "policy" as they always did, but it imports nothing of the policy: its keys are the json tags of the
// types it is given.
//
// A file is read by yaml.v3, and not by sigs.k8s.io/yaml: that one reads YAML 1.1 (a taint value yes
// would become "true"), matches keys case-insensitively and stops at the first error, without a line.
// What yaml.v3 decides is kept: a scalar's text is its string value, booleans accept what yaml.v3
// accepts, null leaves the value as it is (so a null key keeps what the struct held) and a null list
// item is dropped, anchors and merge keys work.
package strictyaml

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wincompat/wincompat/policy/suggest"
	"github.com/wincompat/wincompat/policy/truncate"
)

// maxMappingKeys bounds the keys of one mapping in a policy file (the file itself has a few dozen). It
// is checked on the parsed nodes before any key is looked at. The schema's decoder finds duplicates with
// a set, but yaml.v3's own decoder compares every key of a mapping with every other and reports each
// duplicate pair (seconds and gigabytes for ten thousand keys), so no mapping past this bound may reach
// it.
const maxMappingKeys = 256

// maxDecodedNodes bounds the values one file decodes to, aliases expanded: a policy file within
// policy.MaxPolicyBytes holds fewer nodes than this, and a list of aliases to long lists would otherwise
// multiply.
const maxDecodedNodes = 1 << 18

// MaxProblems is how many problems a refusal names; the rest are counted. A refusal is read by a
// person, and a file of a thousand unknown keys would otherwise be answered with a megabyte.
const MaxProblems = 10

// Decode decodes one YAML document into v, a pointer to a struct, by the json tags of its type (KeysOf),
// over what v already holds. Unknown and duplicate keys and values of the wrong shape are errors naming
// the line and the path. Empty data leaves v as it is.
func Decode(data []byte, v any) error {
	// Parsing into nodes is linear and compares no keys; the bounds are checked on the nodes.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	if line, n := largestMapping(&root); n > maxMappingKeys {
		return fmt.Errorf("line %d: a mapping of %d keys; a policy's mappings have at most %d (known keys: %s)", line, n, maxMappingKeys, strings.Join(KeysOf(reflect.TypeOf(v).Elem()).Names, ", "))
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return errors.New("the policy file must hold exactly one YAML document")
	}
	var d fileDecoder
	d.decode(&root, reflect.ValueOf(v).Elem(), nil)
	return d.err()
}

// largestMapping returns the line and number of keys of the mapping with the most keys under n. Aliases
// are not followed: the decoder expands them under its own bound.
func largestMapping(n *yaml.Node) (line, keys int) {
	if n.Kind == yaml.MappingNode {
		line, keys = n.Line, len(n.Content)/2
	}
	for _, c := range n.Content {
		if l, k := largestMapping(c); k > keys {
			line, keys = l, k
		}
	}
	return line, keys
}

type fileDecoder struct {
	problems []string // the first MaxProblems
	more     int
	// unknownIn are the mappings where an unknown key was named, each once, in the file's order: the
	// refusal lists the keys known there, and only there.
	unknownIn []keyLevel
	nodes     int
	// expanding holds the anchored nodes whose aliases are being expanded.
	expanding map[*yaml.Node]bool
}

// keyLevel is a mapping of the file and its keys: the top level, a mapping such as memoryLimits, or the
// items of a list such as builds.
type keyLevel struct {
	where string // "" at the top level, else "in memoryLimits", "in each of builds"
	names []string
}

// full says whether the refusal has all the problems it will name: a further one is only counted.
func (d *fileDecoder) full() bool { return len(d.problems) == MaxProblems }

func (d *fileDecoder) fail(line int, format string, args ...any) {
	if d.full() {
		d.more++
		return
	}
	d.problems = append(d.problems, ClipProblem(fmt.Sprintf("line %d: ", line)+fmt.Sprintf(format, args...)))
}

// maxProblemBytes bounds one problem of a refusal: it quotes keys and values the file chose.
const maxProblemBytes = 512

// ClipProblem bounds one problem a refusal names to maxProblemBytes.
func ClipProblem(s string) string {
	if len(s) <= maxProblemBytes {
		return s
	}
	return truncate.AtRune(s, maxProblemBytes) + "..."
}

func (d *fileDecoder) err() error {
	if len(d.problems) == 0 {
		return nil
	}
	msg := strings.Join(d.problems, "; ")
	if d.more > 0 {
		msg += fmt.Sprintf("; and %d more", d.more)
	}
	if len(d.unknownIn) > 0 {
		msg += knownKeys(d.unknownIn)
	}
	return errors.New(msg)
}

// unknownKey refuses key, unknown in a mapping at path whose keys are names, suggesting the nearest.
func (d *fileDecoder) unknownKey(k *yaml.Node, path *field.Path, names []string) {
	if d.full() {
		d.more++ // counted, neither compared with the known keys nor listed
		return
	}
	at := path.Child(k.Value)
	if near, ok := suggest.Closest(k.Value, names); ok {
		d.fail(k.Line, "unknown key %q (did you mean %q?)", at.String(), near)
	} else {
		d.fail(k.Line, "unknown key %q", at.String())
	}
	where := ""
	if path != nil {
		where = "in " + path.String()
		if item, ok := strings.CutSuffix(path.String(), "]"); ok {
			// Every item of a list has the same keys: said once for the list.
			where = "in each of " + item[:strings.LastIndex(item, "[")]
		}
	}
	if !slices.ContainsFunc(d.unknownIn, func(l keyLevel) bool { return l.where == where }) {
		d.unknownIn = append(d.unknownIn, keyLevel{where: where, names: names})
	}
}

// exhausted counts one more decoded node and says whether the bound is passed (saying so once).
func (d *fileDecoder) exhausted(n *yaml.Node) bool {
	d.nodes++
	if d.nodes == maxDecodedNodes+1 {
		d.fail(n.Line, "the policy's aliases expand to more than %d values", maxDecodedNodes)
	}
	return d.nodes > maxDecodedNodes
}

// resolve follows an alias to the node it names, to look at it.
func resolve(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

// expand calls into with the node n names, unless that node is being expanded already: an anchor that
// contains an alias of itself (&a [*a]) would never end.
func (d *fileDecoder) expand(n *yaml.Node, into func(*yaml.Node)) {
	if n.Kind != yaml.AliasNode || n.Alias == nil {
		into(n)
		return
	}
	if d.expanding[n.Alias] {
		d.fail(n.Line, "anchor %q contains an alias of itself", n.Value)
		return
	}
	if d.expanding == nil {
		d.expanding = map[*yaml.Node]bool{}
	}
	d.expanding[n.Alias] = true
	into(n.Alias)
	delete(d.expanding, n.Alias)
}

const (
	yamlNullTag   = "!!null"
	yamlMergeTag  = "!!merge"
	yamlBinaryTag = "!!binary"
)

func isYAMLNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == yamlNullTag }

// decode sets v from n; path is where n is in the file (nil at the top).
func (d *fileDecoder) decode(n *yaml.Node, v reflect.Value, path *field.Path) {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		d.expand(n, func(n *yaml.Node) { d.decode(n, v, path) })
		return
	}
	if d.exhausted(n) || isYAMLNull(n) {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.wrongShape(n, v.Type(), path)
			return
		}
		d.mapping(n, v, path, nil)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.wrongShape(n, v.Type(), path)
			return
		}
		items := reflect.MakeSlice(v.Type(), 0, len(n.Content))
		for i, c := range n.Content {
			if isYAMLNull(resolve(c)) {
				continue
			}
			item := reflect.New(v.Type().Elem()).Elem()
			d.decode(c, item, path.Index(i))
			items = reflect.Append(items, item)
		}
		v.Set(items)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.wrongShape(n, v.Type(), path)
			return
		}
		s := n.Value
		if n.ShortTag() == yamlBinaryTag && n.Decode(&s) != nil {
			d.wrongShape(n, v.Type(), path)
			return
		}
		v.SetString(s)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
			d.wrongShape(n, v.Type(), path)
			return
		}
		v.SetBool(b)
	}
}

// mapping sets v's fields from n's keys. taken holds the keys already set when n is merged (<<) into a
// mapping that named them itself: those win, as in yaml.v3.
func (d *fileDecoder) mapping(n *yaml.Node, v reflect.Value, path *field.Path, taken map[string]bool) {
	keys := KeysOf(v.Type())
	first := map[string]int{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, value := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == yamlMergeTag {
			merges = append(merges, value)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k.Line, "%s: a key must be a string, got %s", pathOrTopLevel(path), describeNode(k))
			continue
		}
		at := path.Child(k.Value)
		if line, dup := first[k.Value]; dup {
			d.fail(k.Line, "duplicate key %q (first at line %d)", at.String(), line)
			continue
		}
		first[k.Value] = k.Line
		f, known := keys.byName[k.Value]
		if !known {
			d.unknownKey(k, path, keys.Names)
			continue
		}
		if taken[k.Value] {
			continue
		}
		if taken != nil {
			taken[k.Value] = true
		}
		d.decode(value, v.FieldByIndex(f.index), at)
	}
	if len(merges) == 0 {
		return
	}
	if taken == nil {
		taken = map[string]bool{}
		for name := range first {
			taken[name] = true
		}
	}
	merge := func(s *yaml.Node) {
		if s.Kind != yaml.MappingNode {
			d.fail(s.Line, "%s: a merge (<<) takes a mapping or a list of mappings, got %s", pathOrTopLevel(path), describeNode(s))
			return
		}
		d.mapping(s, v, path, taken)
	}
	for _, m := range merges {
		if m := resolve(m); m.Kind == yaml.SequenceNode {
			for _, s := range m.Content {
				d.expand(s, merge)
			}
			continue
		}
		d.expand(m, merge)
	}
}

func (d *fileDecoder) wrongShape(n *yaml.Node, t reflect.Type, path *field.Path) {
	if path == nil {
		d.fail(n.Line, "got %s, want a mapping of a policy's keys", describeNode(n))
		return
	}
	d.fail(n.Line, "%s: got %s, want %s", path, describeNode(n), wantedShape(t))
}

func pathOrTopLevel(path *field.Path) string {
	if path == nil {
		return "the top level"
	}
	return path.String()
}

// describe says what a node is in the file's words: a list, a mapping, or a scalar with its YAML tag.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return fmt.Sprintf("%s %q", strings.TrimPrefix(n.ShortTag(), "!!"), n.Value)
}

// wanted says in the file's words what a value of type t is.
func wantedShape(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		if e := t.Elem(); e.Kind() == reflect.Struct {
			return fmt.Sprintf("a list of %ss, each with %s", typeNoun(e), wordList(KeysOf(e).Names))
		}
		return "a list of " + strings.TrimPrefix(wantedShape(t.Elem()), "a ") + "s"
	case reflect.Struct:
		return fmt.Sprintf("a %s with %s", typeNoun(t), wordList(KeysOf(t).Names))
	}
	return t.Kind().String()
}

func typeNoun(t reflect.Type) string { return strings.ToLower(t.Name()) }

func wordList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// knownKeys lists the keys a policy file may use where it named unknown ones, top level first.
func knownKeys(levels []keyLevel) string {
	slices.SortStableFunc(levels, func(a, b keyLevel) int {
		return cmp.Compare(min(len(a.where), 1), min(len(b.where), 1))
	})
	var parts []string
	for _, l := range levels {
		if l.where == "" {
			parts = append(parts, strings.Join(l.names, ", "))
			continue
		}
		parts = append(parts, l.where+": "+strings.Join(l.names, ", "))
	}
	if levels[0].where != "" {
		return " (known keys " + strings.Join(parts, "; ") + ")"
	}
	return " (known keys: " + strings.Join(parts, "; ") + ")"
}
