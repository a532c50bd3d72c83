package patch

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Objects returns the patch that turns raw into the JSON rendering of after, where before is raw decoded
// into the same Go type as after and left untouched since.
//
// It gives the same operations as Diff on the two renderings followed by Rebase onto raw, without
// rendering or re-decoding whole documents: it walks the two typed values, descends only where they
// differ and through members that exist on both sides, and hands the library just the fields that
// changed. A pod whose policy touched a few fields costs a few small diffs instead of two full renderings
// and two full decodes.
func Objects(before, after any, raw []byte) (Patch, error) {
	b, a := reflect.ValueOf(before), reflect.ValueOf(after)
	if b.Type() != a.Type() || b.Kind() != reflect.Pointer || b.IsNil() || a.IsNil() {
		return nil, fmt.Errorf("diff: want two non-nil pointers of one type, got %T and %T", before, after)
	}
	fields, ok := fieldsOf(b.Type().Elem())
	if !ok {
		return diffRenderings(before, after, raw)
	}
	const room = 32 // a chart pod's rewrite is about 30 operations
	w := &walker{ops: make(Patch, 0, room), paths: make([][]string, 0, room), keys: make([][]string, 0, room), check: make([]int, 0, room)}
	// One array holds the path being walked, grown in place as the walk descends: a child's path is
	// segs with one more segment, written over the previous sibling's. Whatever keeps a path (an
	// operation) copies it first.
	if err := w.object(fields, b.Elem(), a.Elem(), make([]string, 0, 16), 0); err != nil {
		return nil, err
	}
	return w.finish(raw)
}

// diffRenderings is the slow path for a type the walk cannot see into: diff the two whole renderings.
func diffRenderings(before, after any, raw []byte) (Patch, error) {
	b, err := json.Marshal(before)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	a, err := json.Marshal(after)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	p, err := Diff(b, a)
	if err != nil {
		return nil, err
	}
	return Rebase(p, raw)
}

// walker collects operations with the sort key and the raw-document check each one needs.
type walker struct {
	ops   Patch
	paths [][]string // each operation's path, split
	keys  [][]string
	check []int // leading path segments whose presence in raw is not implied by the typed value
}

// object compares two structs of one type at segs (borrowed: see Objects). uncertain is how many leading segments of segs may
// be absent from the raw document. Decoding only fills what raw has, so a non-nil pointer, an element of
// a slice or a struct with anything set was in raw, and so were its ancestors; only a struct member left
// zero may be rendered by the type without being in raw.
func (w *walker) object(fields []field, b, a reflect.Value, segs []string, uncertain int) error {
	var held [4]field // most objects that differ differ in a member or two: no allocation for them
	leaves := held[:0]
	for _, f := range fields {
		bf, af := b.FieldByIndex(f.index), a.FieldByIndex(f.index)
		if f.descend == descendSlice && bf.Len() == af.Len() && bf.IsNil() == af.IsNil() {
			// Elements are compared one by one below; comparing the whole slice first would walk the
			// equal part of the first changed element twice.
			if err := w.elements(f, bf, af, append(segs, f.name)); err != nil {
				return err
			}
			continue
		}
		// Comparing a whole member first is cheaper than walking it: most members are equal, and a
		// comparison stops at the first difference.
		if equal(bf, af) {
			continue
		}
		child := append(segs, f.name)
		var err error
		switch {
		case f.descend == descendStruct:
			childUncertain := 0
			if bf.IsZero() {
				childUncertain = max(uncertain, len(child))
			}
			err = w.object(f.fields, bf, af, child, childUncertain)
		case f.descend == descendPointer && !bf.IsNil() && !af.IsNil():
			err = w.object(f.fields, bf.Elem(), af.Elem(), child, 0)
		default:
			leaves = append(leaves, f)
		}
		if err != nil {
			return err
		}
	}
	if len(leaves) == 0 {
		return nil
	}
	return w.leaves(segs, uncertain, leaves, b, a)
}

// elements compares two slices of structs of one length element by element.
func (w *walker) elements(f field, b, a reflect.Value, segs []string) error {
	for i := range b.Len() {
		be, ae := b.Index(i), a.Index(i)
		if f.elemPointer {
			if be.IsNil() || ae.IsNil() {
				if !be.IsNil() || !ae.IsNil() {
					if err := w.leaves(segs, 0, []field{{name: strconv.Itoa(i), whole: true}}, be, ae); err != nil {
						return err
					}
				}
				continue
			}
			be, ae = be.Elem(), ae.Elem()
		}
		if err := w.object(f.fields, be, ae, append(segs, strconv.Itoa(i)), 0); err != nil {
			return err
		}
	}
	return nil
}

// leaves diffs the given members of b and a and places the operations under segs. A member added or
// removed whole, a changed scalar and a changed string map are written directly, the common cases; the
// rest (arrays that changed length, custom encodings) are rendered as two small objects holding only those
// members and left to the library. A field marked whole stands for the value itself under its name.
func (w *walker) leaves(segs []string, uncertain int, fields []field, b, a reflect.Value) error {
	var rest []field
	for _, f := range fields {
		bf, af := b, a
		if !f.whole {
			bf, af = b.FieldByIndex(f.index), a.FieldByIndex(f.index)
		}
		bGone, aGone := f.omitted(bf), f.omitted(af)
		path := append(segs, f.name) // borrowed, as segs is: an operation keeps a copy
		switch {
		case bGone && aGone:
		case bGone:
			path = slices.Clone(path)
			w.add(Operation{Op: "add", Path: joinPointer(path), Value: valueOf(af)}, path, uncertain)
		case aGone:
			path = slices.Clone(path)
			w.add(Operation{Op: "remove", Path: joinPointer(path)}, path, 0)
		case isScalar(bf.Type()):
			if !equal(bf, af) {
				w.set(slices.Clone(path), bf, af, uncertain)
			}
		case isStringMap(bf.Type()) && !bf.IsNil() && !af.IsNil():
			w.stringMap(path, bf, af)
		case bf.Kind() == reflect.Map && (bf.IsNil() || af.IsNil()), bf.Kind() == reflect.Slice && (bf.IsNil() || af.IsNil()):
			// Without omitempty a nil map or slice is written as null: between null and a value the
			// change is the whole value.
			w.set(slices.Clone(path), bf, af, uncertain)
		default:
			rest = append(rest, f)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	return w.library(segs, uncertain, rest, b, a)
}

// set writes the member at path, rendered by both types, to its value in a. A member whose value in b is
// not the zero value was decoded from raw, so raw has it and a replace applies; a zero value may be the
// type's rendering of a member raw lacks, where only an add applies (an add replaces a member that
// exists).
func (w *walker) set(path []string, b, a reflect.Value, uncertain int) {
	if b.IsZero() {
		w.add(Operation{Op: "add", Path: joinPointer(path), Value: valueOf(a)}, path, uncertain)
		return
	}
	w.add(Operation{Op: "replace", Path: joinPointer(path), Value: valueOf(a)}, path, 0)
}

// equal is reflect.DeepEqual of two members of one type, written out for the kinds API types are made
// of. reflect.DeepEqual is general: it boxes each operand, tracks visited pointers in a map to survive
// cycles (API types have none: a recursive type is never walked) and reads each map entry into a new
// allocation, work a pod's diff would repeat on every member it compares. Anything unusual
// (interfaces, structs with unexported fields such as resource.Quantity, floats) is still left to
// reflect.DeepEqual, so the answer is always DeepEqual's.
func equal(b, a reflect.Value) bool {
	switch b.Kind() {
	case reflect.String:
		return b.String() == a.String()
	case reflect.Bool:
		return b.Bool() == a.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return b.Int() == a.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return b.Uint() == a.Uint()
	case reflect.Pointer:
		if b.IsNil() || a.IsNil() {
			return b.IsNil() == a.IsNil()
		}
		return b.Pointer() == a.Pointer() || equal(b.Elem(), a.Elem())
	case reflect.Slice:
		if b.IsNil() != a.IsNil() || b.Len() != a.Len() {
			return false
		}
		if b.Pointer() == a.Pointer() {
			return true
		}
		for i := range b.Len() {
			if !equal(b.Index(i), a.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if b.Type() == stringMapType {
			bm, am := b.Interface().(map[string]string), a.Interface().(map[string]string)
			return (bm == nil) == (am == nil) && maps.Equal(bm, am)
		}
	case reflect.Struct:
		n := b.NumField()
		for i := range n {
			if !b.Field(i).CanInterface() {
				return deepEqual(b, a)
			}
		}
		for i := range n {
			if !equal(b.Field(i), a.Field(i)) {
				return false
			}
		}
		return true
	}
	return deepEqual(b, a)
}

// deepEqual is reflect.DeepEqual of two values reached through exported members.
func deepEqual(b, a reflect.Value) bool {
	if b.CanAddr() && a.CanAddr() {
		// A pointer to a named type costs no copy of the value and no lookup of its pointer type.
		return reflect.DeepEqual(b.Addr().Interface(), a.Addr().Interface())
	}
	return reflect.DeepEqual(b.Interface(), a.Interface())
}

var stringMapType = reflect.TypeFor[map[string]string]()

// stringMap diffs two present maps of strings key by key.
func (w *walker) stringMap(path []string, b, a reflect.Value) {
	if b.Type() == stringMapType {
		w.plainStringMap(path, b.Interface().(map[string]string), a.Interface().(map[string]string))
		return
	}
	for _, k := range sortedMapKeys(b) {
		member := append(path[:len(path):len(path)], k.String())
		switch av := a.MapIndex(k); {
		case !av.IsValid():
			w.add(Operation{Op: "remove", Path: joinPointer(member)}, member, 0)
		case av.String() != b.MapIndex(k).String():
			w.add(Operation{Op: "replace", Path: joinPointer(member), Value: av.String()}, member, 0)
		}
	}
	for _, k := range sortedMapKeys(a) {
		if !b.MapIndex(k).IsValid() {
			member := append(path[:len(path):len(path)], k.String())
			w.add(Operation{Op: "add", Path: joinPointer(member), Value: a.MapIndex(k).String()}, member, 0)
		}
	}
}

// plainStringMap is stringMap for map[string]string itself, read without reflection. Keys are visited
// in map order: finish sorts the operations by path.
func (w *walker) plainStringMap(path []string, b, a map[string]string) {
	member := func(k string) []string { return append(path[:len(path):len(path)], k) }
	for k, bv := range b {
		switch av, ok := a[k]; {
		case !ok:
			m := member(k)
			w.add(Operation{Op: "remove", Path: joinPointer(m)}, m, 0)
		case av != bv:
			m := member(k)
			w.add(Operation{Op: "replace", Path: joinPointer(m), Value: av}, m, 0)
		}
	}
	for k, av := range a {
		if _, ok := b[k]; !ok {
			m := member(k)
			w.add(Operation{Op: "add", Path: joinPointer(m), Value: av}, m, 0)
		}
	}
}

func sortedMapKeys(m reflect.Value) []reflect.Value {
	keys := m.MapKeys()
	slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
	return keys
}

// add records one operation. Its sort key is its path: direct operations never add or remove array
// elements, the only ones that sort under their parent.
func (w *walker) add(op Operation, path []string, check int) {
	w.ops = append(w.ops, op)
	w.paths = append(w.paths, path)
	w.keys = append(w.keys, path)
	w.check = append(w.check, check)
}

// library renders the given members of b and a as two small objects and diffs them with the library.
func (w *walker) library(segs []string, uncertain int, fields []field, b, a reflect.Value) error {
	before, err := renderMembers(fields, b)
	if err != nil {
		return err
	}
	after, err := renderMembers(fields, a)
	if err != nil {
		return err
	}
	out, keys, err := libraryDiff(before, after)
	if err != nil {
		return err
	}
	prefix := joinPointer(segs)
	for i, op := range out {
		rel := SplitPointer(op.Path)
		op.Path = prefix + op.Path
		abs := append(segs[:len(segs):len(segs)], rel...)
		// The parent of every operation is a member value the library saw on both sides. A map or a slice
		// came from raw; anything else (a custom encoding, say) is checked all the way.
		check := len(abs) - 1
		f := memberNamed(fields, rel[0])
		switch {
		case len(rel) == 2 && f != nil && f.container:
			check = 0
		case len(rel) == 1 && op.Op == "replace" && f != nil && !f.whole && b.FieldByIndex(f.index).IsZero():
			// As in set: a zero value may be the type's rendering of a member raw lacks.
			op.Op, check = "add", uncertain
		}
		w.ops = append(w.ops, op)
		w.paths = append(w.paths, abs)
		w.keys = append(w.keys, append(segs[:len(segs):len(segs)], keys[i]...))
		w.check = append(w.check, check)
	}
	return nil
}

// valueOf is what an operation carries for a typed value: the value itself, so it is encoded once, with
// the patch, and in the order of its type's fields.
func valueOf(v reflect.Value) any {
	if v.CanAddr() {
		return v.Addr().Interface() // pointer-receiver MarshalJSON applies, as it does inside the parent
	}
	return v.Interface()
}

// isScalar reports whether values of t encode as one JSON scalar (or null), so a change is a replace.
func isScalar(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if customEncoding(t) {
		return false
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

func isStringMap(t reflect.Type) bool {
	return t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String &&
		!customEncoding(t) && !customEncoding(t.Key()) && !customEncoding(t.Elem())
}

func memberNamed(fields []field, name string) *field {
	for i := range fields {
		if fields[i].name == name {
			return &fields[i]
		}
	}
	return nil
}

// finish sorts the operations like Diff and anchors adds under parents raw lacks, like Rebase.
func (w *walker) finish(raw []byte) (Patch, error) {
	sort.Stable((*byKey)(w)) // in place: the walker's lists are this patch's
	return rebase(w.ops, raw, w.paths, w.check)
}

// byKey sorts a walker's operations, with their paths and checks, as sortedOrder orders keys.
type byKey walker

func (w *byKey) Len() int           { return len(w.ops) }
func (w *byKey) Less(i, j int) bool { return compareSegments(w.keys[i], w.keys[j]) < 0 }
func (w *byKey) Swap(i, j int) {
	w.ops[i], w.ops[j] = w.ops[j], w.ops[i]
	w.paths[i], w.paths[j] = w.paths[j], w.paths[i]
	w.keys[i], w.keys[j] = w.keys[j], w.keys[i]
	w.check[i], w.check[j] = w.check[j], w.check[i]
}

// renderMembers writes {"name":value,...} for the members that encoding/json would write.
func renderMembers(fields []field, v reflect.Value) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for _, f := range fields {
		fv := v
		if !f.whole {
			fv = v.FieldByIndex(f.index)
			if f.omitted(fv) {
				continue
			}
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		name, _ := json.Marshal(f.name)
		buf.Write(name)
		buf.WriteByte(':')
		enc, err := json.Marshal(valueOf(fv))
		if err != nil {
			return nil, fmt.Errorf("diff: encoding %s: %w", f.name, err)
		}
		buf.Write(enc)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

type descent int

const (
	leaf           descent = iota
	descendStruct          // a struct member, always rendered
	descendPointer         // a pointer to a struct, rendered when non-nil
	descendSlice           // a slice of structs or of pointers to structs
)

// field is one JSON member of a struct type, as encoding/json sees it.
type field struct {
	name      string
	index     []int
	omitEmpty bool
	omitZero  bool
	// container marks a map or slice: its presence in the typed value implies its presence in raw.
	container   bool
	descend     descent
	elemPointer bool
	fields      []field // members of the struct descended into
	whole       bool    // stands for the value itself rather than a member of it
}

func (f field) omitted(v reflect.Value) bool {
	if f.omitEmpty && isEmptyValue(v) {
		return true
	}
	return f.omitZero && isZero(v)
}

// isEmptyValue is encoding/json's notion of empty for omitempty.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

type isZeroer interface{ IsZero() bool }

// isZero is encoding/json's notion of zero for omitzero: the type's IsZero method when it has one.
func isZero(v reflect.Value) bool {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return v.IsNil() || v.Interface().(isZeroer).IsZero()
	case t.Implements(isZeroerType):
		return v.Interface().(isZeroer).IsZero()
	case reflect.PointerTo(t).Implements(isZeroerType) && v.CanAddr():
		return v.Addr().Interface().(isZeroer).IsZero()
	}
	return v.IsZero()
}

var (
	fieldCache    sync.Map // reflect.Type -> fieldsResult
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	isZeroerType  = reflect.TypeFor[isZeroer]()
)

type fieldsResult struct {
	fields []field
	ok     bool
}

// fieldsOf lists the JSON members of struct type t. ok is false for types the walk leaves to the
// library whole: custom encodings, and shapes whose member names need encoding/json's full rules
// (embedded pointers, name clashes between embedded structs, the string option).
func fieldsOf(t reflect.Type) ([]field, bool) {
	if r, ok := fieldCache.Load(t); ok {
		res := r.(fieldsResult)
		return res.fields, res.ok
	}
	fields, ok := computeFields(t, map[reflect.Type]bool{})
	fieldCache.Store(t, fieldsResult{fields, ok})
	return fields, ok
}

func customEncoding(t reflect.Type) bool {
	return t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
		t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler)
}

func computeFields(t reflect.Type, visiting map[reflect.Type]bool) ([]field, bool) {
	if t.Kind() != reflect.Struct || customEncoding(t) || visiting[t] {
		// A recursive type is left whole rather than walked forever; Kubernetes pod specs have none.
		return nil, false
	}
	visiting[t] = true
	defer delete(visiting, t)
	var out []field
	seen := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			if sf.Type.Kind() != reflect.Struct || customEncoding(sf.Type) {
				return nil, false
			}
			inner, ok := computeFields(sf.Type, visiting)
			if !ok {
				return nil, false
			}
			for _, f := range inner {
				f.index = append([]int{i}, f.index...)
				if seen[f.name] {
					return nil, false
				}
				seen[f.name] = true
				out = append(out, f)
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if seen[name] || hasOption(opts, "string") {
			return nil, false
		}
		seen[name] = true
		f := field{name: name, index: []int{i}, omitEmpty: hasOption(opts, "omitempty"), omitZero: hasOption(opts, "omitzero")}
		ft := sf.Type
		f.container = ft.Kind() == reflect.Map || ft.Kind() == reflect.Slice
		var ok bool
		switch {
		case ft.Kind() == reflect.Struct && !f.omitZero:
			f.fields, ok = computeFields(ft, visiting)
			if ok {
				f.descend = descendStruct
			}
		case ft.Kind() == reflect.Pointer && !customEncoding(ft):
			if f.fields, ok = computeFields(ft.Elem(), visiting); ok {
				f.descend = descendPointer
			}
		case ft.Kind() == reflect.Slice && !customEncoding(ft):
			elem := ft.Elem()
			if elem.Kind() == reflect.Pointer && !customEncoding(elem) {
				f.elemPointer, elem = true, elem.Elem()
			}
			if f.fields, ok = computeFields(elem, visiting); ok {
				f.descend = descendSlice
			}
		}
		out = append(out, f)
	}
	return out, true
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}
