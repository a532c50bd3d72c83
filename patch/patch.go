// Package patch turns a before and an after JSON document into an RFC 6902 JSON patch.
//
// Callers diff two documents marshalled by the same Go types and apply the result to the raw document
// they received; fields unknown to those types are then never mentioned by the patch and survive.
package patch

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mattbaird/jsonpatch"
)

// Operation is one RFC 6902 operation.
type Operation struct {
	Op    string
	Path  string
	Value any
}

// MarshalJSON writes "value" for every operation except remove, including a null value.
func (o Operation) MarshalJSON() ([]byte, error) { return json.Marshal(o.wire()) }

// wire is the operation as encoding/json should write it.
func (o Operation) wire() any {
	if o.Op == "remove" {
		return struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path}
	}
	return struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}{o.Op, o.Path, o.Value}
}

// Patch is a list of operations in application order.
type Patch []Operation

// MarshalJSON encodes the whole patch in one pass rather than one buffer per operation.
// It writes what encoding/json writes for the operations' wire form, through one Encoder, so that no
// operation is boxed and no intermediate buffer is built per value.
func (p Patch) MarshalJSON() ([]byte, error) {
	if p == nil {
		return []byte("null"), nil
	}
	// Sized once: the record annotation alone is a string of about a kilobyte.
	size := 2
	for i := range p {
		size += 32 + len(p[i].Path)
		if s, ok := p[i].Value.(string); ok {
			size += len(s) + len(s)/8 // room for some escaping
		} else {
			size += 64
		}
	}
	var buf bytes.Buffer
	buf.Grow(size)
	enc := json.NewEncoder(&buf)
	encode := func(v any) error {
		if err := enc.Encode(v); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // Encode ends each value with a newline
		return nil
	}
	str := func(s string) error {
		if plainJSONString(s) {
			buf.WriteByte('"')
			buf.WriteString(s)
			buf.WriteByte('"')
			return nil
		}
		return encode(s)
	}
	buf.WriteByte('[')
	for i := range p {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"op":`)
		if err := str(p[i].Op); err != nil {
			return nil, err
		}
		buf.WriteString(`,"path":`)
		if err := str(p[i].Path); err != nil {
			return nil, err
		}
		if p[i].Op != "remove" {
			buf.WriteString(`,"value":`)
			var err error
			if v, ok := p[i].Value.(string); ok {
				err = str(v)
			} else {
				err = encode(p[i].Value)
			}
			if err != nil {
				return nil, err
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// plainJSONString reports whether encoding/json writes s as itself between quotes: printable ASCII
// without a quote, a backslash, or the characters it escapes for HTML (<, >, &). Most paths and values
// of a patch are, and need no encoder. policy's record writer asks the same (plainJSON in
// policy/record.go); the two packages share no code, so a change to one is a change to both.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// Diff returns the operations that turn before into after, sorted by path so that the same change
// always gives the same bytes. Operations that add or remove whole array elements keep the order the
// diff produced them in, because their indices depend on it.
func Diff(before, after []byte) (Patch, error) {
	ops, keys, err := libraryDiff(before, after)
	if err != nil {
		return nil, err
	}
	sorted := make(Patch, len(ops))
	for i, j := range sortedOrder(keys) {
		sorted[i] = ops[j]
	}
	return sorted, nil
}

// libraryDiff is the one call into the diff library: its operations, with their values taken from
// after, and the key each one sorts under.
func libraryDiff(before, after []byte) (Patch, [][]string, error) {
	ops, err := jsonpatch.CreatePatch(before, after)
	if err != nil {
		return nil, nil, fmt.Errorf("diff: %w", err)
	}
	out, err := fromLibrary(ops, after)
	if err != nil {
		return nil, nil, err
	}
	keys, err := sortKeys(out, before)
	if err != nil {
		return nil, nil, err
	}
	return out, keys, nil
}

// fromLibrary converts the library's operations. Their values are taken verbatim from after rather
// than from the library, which decodes numbers into float64 and would round integers beyond 2^53.
func fromLibrary(ops []jsonpatch.JsonPatchOperation, after []byte) (Patch, error) {
	doc := newRawDoc(after)
	out := make(Patch, len(ops))
	for i, op := range ops {
		out[i] = Operation{Op: op.Operation, Path: op.Path}
		if op.Operation == "remove" {
			continue
		}
		raw, found, err := doc.at(SplitPointer(op.Path))
		if err != nil || !found {
			return nil, fmt.Errorf("diff: %s %s: the value is not in the new document (%v)", op.Operation, op.Path, err)
		}
		out[i].Value = raw
	}
	return out, nil
}

// sortKeys gives each operation the path it sorts under. The library only emits index-shifting
// operations (add or remove of an element) as one group per array whose length changed, in an order that
// must be kept: the group sorts under its array's path, stably. All other operations touch disjoint
// paths, sort under their own, and may go in any order.
func sortKeys(ops Patch, before []byte) ([][]string, error) {
	doc := newRawDoc(before)
	keys := make([][]string, len(ops))
	for i, op := range ops {
		segs := SplitPointer(op.Path)
		if (op.Op == "add" || op.Op == "remove") && len(segs) > 0 && isIndex(segs[len(segs)-1]) {
			parent, found, err := doc.at(segs[:len(segs)-1])
			if err != nil {
				return nil, fmt.Errorf("diff: %w", err)
			}
			if found && firstByte(parent) == '[' {
				segs = segs[:len(segs)-1]
			}
		}
		keys[i] = segs
	}
	return keys, nil
}

// sortedOrder is the stable order of the keys.
func sortedOrder(keys [][]string) []int {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return compareSegments(keys[a], keys[b]) })
	return idx
}

// compareSegments orders pointers segment by segment, numbers numerically (containers/2 before /10).
func compareSegments(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] == b[i] {
			continue
		}
		na, okA := index(a[i])
		nb, okB := index(b[i])
		if okA && okB {
			return cmp.Compare(na, nb)
		}
		return strings.Compare(a[i], b[i])
	}
	return cmp.Compare(len(a), len(b))
}

func isIndex(s string) bool {
	_, ok := index(s)
	return ok
}

// index parses an array index segment: digits only, as RFC 6901 writes them. It does not allocate on
// failure, unlike strconv, and most segments are names.
func index(s string) (int, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	n := 0
	for i := range len(s) {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

var pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")

// splitPointer splits an RFC 6901 pointer into unescaped segments.
func SplitPointer(p string) []string {
	if p == "" {
		return nil
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		if strings.IndexByte(s, '~') >= 0 {
			segs[i] = pointerUnescaper.Replace(s)
		}
	}
	return segs
}

// Rebase makes a patch computed between two typed renderings apply to the raw target document. Typed
// rendering writes empty parents the raw document may not have (a pod template's metadata, say), and
// RFC 6902 cannot add under a missing parent, so such an add becomes an add of the first missing
// ancestor holding just the new value. Adds under the same missing ancestor are merged into one.
func Rebase(p Patch, target []byte) (Patch, error) { return rebase(p, target, nil, nil) }

// rebase is Rebase with, when given, each operation's path already split, and checks[i]: how many
// leading segments of operation i's path may be absent from target; the rest are known to be there,
// and looking them up would cost decoding them.
func rebase(p Patch, target []byte, paths [][]string, checks []int) (Patch, error) {
	doc := newRawDoc(target)
	out := make(Patch, 0, len(p))
	created := map[string]map[string]any{} // missing ancestor pointer -> the object added there
	for i, op := range p {
		if op.Op != "add" {
			out = append(out, op)
			continue
		}
		var segs []string
		if paths != nil {
			segs = paths[i]
		} else {
			segs = SplitPointer(op.Path)
		}
		if len(segs) < 2 {
			out = append(out, op)
			continue
		}
		parent := segs[:len(segs)-1]
		if checks != nil {
			parent = parent[:min(checks[i], len(parent))]
		}
		missing, err := doc.firstMissing(parent)
		if err != nil {
			return nil, fmt.Errorf("rebase: %w", err)
		}
		if missing < 0 {
			out = append(out, op)
			continue
		}
		anchor := joinPointer(segs[:missing+1])
		root, seen := created[anchor]
		if !seen {
			root = map[string]any{}
			created[anchor] = root
			out = append(out, Operation{Op: "add", Path: anchor, Value: root})
		}
		node := root
		for _, s := range segs[missing+1 : len(segs)-1] {
			child, ok := node[s].(map[string]any)
			if !ok {
				child = map[string]any{}
				node[s] = child
			}
			node = child
		}
		node[segs[len(segs)-1]] = op.Value
	}
	return out, nil
}

// rawDoc walks a JSON document one level at a time, decoding only the members on the paths asked
// about: checking a few parents costs a fraction of decoding the whole document.
type rawDoc struct {
	root    json.RawMessage
	objects map[string]map[string]json.RawMessage // pointer of an object -> its members
	arrays  map[string][]json.RawMessage          // pointer of an array -> its elements
}

func newRawDoc(doc []byte) *rawDoc {
	return &rawDoc{root: doc, objects: map[string]map[string]json.RawMessage{}, arrays: map[string][]json.RawMessage{}}
}

// step returns the member or element s of the value cur at pointer prefix.
func (d *rawDoc) step(prefix string, cur json.RawMessage, s string) (json.RawMessage, bool, error) {
	switch firstByte(cur) {
	case '{':
		members, err := decodeOnce(d.objects, prefix, cur)
		child, found := members[s]
		return child, found, err
	case '[':
		elems, err := decodeOnce(d.arrays, prefix, cur)
		n, convErr := strconv.Atoi(s)
		if err != nil || convErr != nil || n < 0 || n >= len(elems) {
			return nil, false, err
		}
		return elems[n], true, nil
	default:
		return nil, false, nil
	}
}

// decodeOnce decodes raw into cache[key] the first time that key is asked for.
func decodeOnce[T any](cache map[string]T, key string, raw json.RawMessage) (T, error) {
	v, ok := cache[key]
	if !ok {
		if err := json.Unmarshal(raw, &v); err != nil {
			return v, err
		}
		cache[key] = v
	}
	return v, nil
}

// at returns the value at segs.
func (d *rawDoc) at(segs []string) (json.RawMessage, bool, error) {
	cur, prefix := d.root, ""
	for _, s := range segs {
		next, found, err := d.step(prefix, cur, s)
		if err != nil || !found {
			return nil, false, err
		}
		cur, prefix = next, prefix+"/"+pointerEscaper.Replace(s)
	}
	return cur, true, nil
}

// firstMissing returns the index of the first segment of segs absent (or null) in the document, or -1.
// Only object members can be missing: the diff never adds under an array element that does not exist.
func (d *rawDoc) firstMissing(segs []string) (int, error) {
	cur, prefix := d.root, ""
	for i, s := range segs {
		isObject := firstByte(cur) == '{'
		next, found, err := d.step(prefix, cur, s)
		if err != nil {
			return 0, err
		}
		if !found || string(bytes.TrimSpace(next)) == "null" {
			if isObject {
				return i, nil
			}
			return -1, nil
		}
		cur, prefix = next, prefix+"/"+pointerEscaper.Replace(s)
	}
	return -1, nil
}

// firstByte is the first non-space byte of a JSON value (0 for none).
func firstByte(v json.RawMessage) byte {
	for _, c := range v {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// joinPointer writes segs as an RFC 6901 pointer in one allocation: a diff writes one per operation.
// Each segment is read once to size the pointer and once to write it; most need no escaping.
func joinPointer(segs []string) string {
	size, escapes := 0, false
	for _, s := range segs {
		size += 1 + len(s)
		for i := range len(s) {
			if s[i] == '~' || s[i] == '/' {
				size++
				escapes = true
			}
		}
	}
	var b strings.Builder // its String shares the buffer
	b.Grow(size)
	for _, s := range segs {
		b.WriteByte('/')
		if !escapes {
			b.WriteString(s)
			continue
		}
		for i := range len(s) {
			switch s[i] {
			case '~':
				b.WriteString("~0")
			case '/':
				b.WriteString("~1")
			default:
				b.WriteByte(s[i])
			}
		}
	}
	return b.String()
}
