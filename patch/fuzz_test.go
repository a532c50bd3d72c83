package patch

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
)

// applyRFC6902 applies p to doc with an implementation independent of ours and of the diff library.
func applyRFC6902(p Patch, doc []byte) ([]byte, error) {
	pj, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	dp, err := jsonpatch.DecodePatch(pj)
	if err != nil {
		return nil, err
	}
	return dp.Apply(doc)
}

// equalJSON compares two documents as the diff library sees them: numbers as float64. The library
// decodes values into float64, so an integer beyond 2^53 that it carries comes out rounded; FuzzObjects
// checks numbers exactly and pins that (testdata/fuzz/FuzzObjects/int-beyond-float64).
func equalJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// limits says which of the diff library's known limitations a pair of documents runs into. Diff promises
// nothing beyond them; wincompat's documents never reach them (pod types have no slices of pointers or
// of mixed kinds, and the policy only ever appends to arrays).
type limits struct {
	// reorder: an array changed length and the elements both versions share are in another order; the
	// library then removes and adds at the wrong places (TestDiffReorderedArrayLimitation).
	reorder bool
	// mixed: array elements of one index are an object or null on one side and something else on the
	// other; the library panics on the first and inserts instead of replacing on the second. Typed
	// renderings only produce that from slices of pointers with nil elements.
	mixed bool
	// emptyKey: the diff descends into a member named "". The library then writes its children's paths
	// without the empty segment ("/0" for "//0", TestDiffEmptyKeyLimitation). Typed renderings only have
	// such members in maps of objects, and the pod types have none.
	emptyKey bool
}

// libraryLimits walks two decoded documents the way the library's diff does.
func libraryLimits(a, b any) limits {
	var l limits
	var value func(a, b any)
	var array func(a, b []any)
	members := func(a, b map[string]any) {
		for k, bv := range b {
			if av, ok := a[k]; ok && reflect.TypeOf(av) == reflect.TypeOf(bv) {
				if k == "" && descends(av) && !reflect.DeepEqual(av, bv) {
					l.emptyKey = true
				}
				value(av, bv)
			}
		}
	}
	value = func(a, b any) {
		switch at := a.(type) {
		case map[string]any:
			bt, ok := b.(map[string]any)
			if !ok {
				l.mixed = true
				return
			}
			members(at, bt)
		case []any:
			if bt, ok := b.([]any); ok {
				array(at, bt)
			}
		case nil:
			if b != nil {
				l.mixed = true
			}
		}
	}
	array = func(a, b []any) {
		if len(a) == len(b) {
			for i := range a {
				value(a[i], b[i])
			}
			return
		}
		if !reflect.DeepEqual(matched(a, b), matched(b, a)) {
			l.reorder = true
		}
	}
	value(a, b)
	return l
}

func descends(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// matched keeps the elements of x the library pairs with one of y: each with the first unpaired equal one.
func matched(x, y []any) []any {
	used := make([]bool, len(y))
	var out []any
	for _, v := range x {
		for j, w := range y {
			if !used[j] && reflect.DeepEqual(v, w) {
				used[j] = true
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// The library drops the empty segment from paths below a member named "": this patch removes /0 where
// it must remove //0, and does not apply. wincompat's documents have no such member (pod types have no
// map of objects); the fuzz targets step around it. This test notices when the library changes.
func TestDiffEmptyKeyLimitation(t *testing.T) {
	before, after := `{"":{"0":1}}`, `{"":{}}`
	p, err := Diff([]byte(before), []byte(after))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := applyRFC6902(p, []byte(before)); err == nil && equalJSON(got, []byte(after)) {
		t.Log("the library now handles members named \"\"; drop limits.emptyKey")
	} else if len(p) != 1 || p[0].Path != "/0" {
		t.Errorf("unexpected patch below an empty key: %+v", p)
	}
}

// FuzzDiff: for two JSON objects within the library's limits, Diff's patch turns the first into the
// second when applied by another RFC 6902 implementation. That tests the sorting Diff adds on top of
// the library, which must keep index-shifting operations in their order.
func FuzzDiff(f *testing.F) {
	for _, tc := range [][2]string{
		{`{"t":[{"k":"a"}]}`, `{"t":[{"k":"a"},{"k":"os"}]}`},
		{`{"t":[0,1,2,3,4,5,6,7,8]}`, `{"t":[0,1,2,3,4,5,6,7,8,9,10]}`},
		{`{"c":[{"n":"a","u":1},{"n":"b","u":2,"g":3}]}`, `{"c":[{"n":"a"},{"n":"b"}]}`},
		{`{"a":{"x/y":1,"m~n":2,"k":0}}`, `{"a":{"k":0,"new/key~1":true}}`},
		{`{"t":[1,2,3,4,5],"u":[[1],[2,3]]}`, `{"t":[1,3,5],"u":[[1,1],[3]]}`},
		{`{"a":{"b":[1]},"10":{"9":[]}}`, `{"a":{"b":{"c":1}},"10":{"9":[1,2],"10":null}}`},
		{`{"m":{"e":1,"d":1},"arr":[{"x":1,"y":1},{"x":1,"y":1}],"n":{"10":1,"9":1}}`, `{"m":{},"arr":[{},{}],"n":{}}`},
		{`{"spec":{"containers":[{"name":"a","securityContext":{"runAsUser":1}}],"tolerations":[{"key":"a"}]}}`,
			`{"spec":{"containers":[{"name":"a","securityContext":{}}],"tolerations":[{"key":"a"},{"key":"os","value":"windows"}],"nodeSelector":{"kubernetes.io/os":"windows"}}}`},
	} {
		f.Add([]byte(tc[0]), []byte(tc[1]))
	}
	f.Fuzz(func(t *testing.T, before, after []byte) {
		var a, b any
		if !decodeUnique(before, &a) || !decodeUnique(after, &b) {
			return
		}
		if _, ok := a.(map[string]any); !ok {
			return // Diff's documents are renderings of Go structs: objects
		}
		if _, ok := b.(map[string]any); !ok {
			return
		}
		// The limits as the library sees the documents: numbers as float64, so 1 and 1.0 are one value
		// to it (decodeUnique keeps integers apart from floats).
		var la, lb any
		_ = json.Unmarshal(before, &la)
		_ = json.Unmarshal(after, &lb)
		if l := libraryLimits(la, lb); l.reorder || l.mixed || l.emptyKey {
			return
		}
		p, err := Diff(before, after)
		if err != nil {
			t.Fatalf("Diff: %v", err)
		}
		got, err := applyRFC6902(p, before)
		if err != nil {
			pj, _ := json.Marshal(p)
			t.Fatalf("the patch does not apply: %v\n%s", err, pj)
		}
		if !equalJSON(got, after) {
			pj, _ := json.Marshal(p)
			t.Fatalf("patch %s gives\n%s\nwant\n%s", pj, got, after)
		}
	})
}

// decodeUnique decodes data into v unless it is not JSON or repeats a key, which RFC 8259 leaves
// undefined and the two implementations may read differently.
func decodeUnique(data []byte, v any) bool {
	strict, err := sigsjson.UnmarshalStrict(data, v, sigsjson.DisallowDuplicateFields)
	return err == nil && len(strict) == 0
}

// fuzzDoc exercises the shapes Objects handles besides those of the pod types: embedding, omitzero,
// slices of pointers (with nil elements), maps of structs and custom encodings at every level.
type fuzzDoc struct {
	fuzzEmbedded
	Name     string                         `json:"name,omitempty"`
	Zero     fuzzInner                      `json:"zero,omitzero"`
	Inner    fuzzInner                      `json:"inner"`
	Ptr      *fuzzInner                     `json:"ptr,omitempty"`
	List     []fuzzInner                    `json:"list"`
	PtrList  []*fuzzInner                   `json:"ptrList,omitempty"`
	Strings  map[string]string              `json:"strings,omitempty"`
	Structs  map[string]fuzzInner           `json:"structs,omitempty"`
	Quantity resource.Quantity              `json:"quantity"`
	Port     *intstr.IntOrString            `json:"port,omitempty"`
	Time     metav1.Time                    `json:"time"`
	Limits   corev1.ResourceList            `json:"limits,omitempty"`
	Numbers  []int64                        `json:"numbers,omitempty"`
	Nested   [][]string                     `json:"nested,omitempty"`
	Bare     string                         // no tag: named Bare in JSON
	Skipped  string                         `json:"-"`
	Options  map[string]*fuzzInner          `json:"options,omitempty"`
	Labels   map[corev1.ResourceName]string `json:"labels,omitempty"`
	Plain    map[string]string              `json:"plain"`
}

type fuzzEmbedded struct {
	Kind  string `json:"kind,omitempty"`
	Count int64  `json:"count,omitempty"`
}

type fuzzInner struct {
	A string   `json:"a,omitempty"`
	B *int64   `json:"b,omitempty"`
	C bool     `json:"c"`
	D []string `json:"d"`
}

// objectKinds are the types FuzzObjects decodes raw into.
var objectKinds = []func() any{
	func() any { return &corev1.Pod{} },
	func() any { return &appsv1.Deployment{} },
	func() any { return &batchv1.CronJob{} },
	func() any { return &fuzzDoc{} },
}

// FuzzObjects: Objects must give what diffing the two whole renderings and rebasing onto raw gives,
// wherever that reference is right, and in any case a patch that applies to raw and turns it into
// exactly the rendering of after. raw comes from the fuzzer, after is before changed by edits the
// fuzzer drives (set and clear pointers, add and drop elements, change maps, strings and numbers, zero
// structs), so the walk meets real differences at every depth, next to fields raw has and our types do
// not know.
func FuzzObjects(f *testing.F) {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":{"app":"web"},"annotations":{"a/b":"1","x~y":"2"},"unknownMeta":true},
"spec":{"os":{"name":"windows"},"unknownSpec":{"keep":[1,2]},"securityContext":{"runAsUser":1000,"fsGroup":1,"newField":"kept"},
"containers":[{"name":"app","image":"img:ltsc2022","ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1","hugepages-2Mi":"1Gi"}},
"securityContext":{"runAsUser":1,"capabilities":{"drop":["ALL"]},"privileged":false},"volumeMounts":[{"name":"v","mountPath":"C:\\v","mountPropagation":"None"}],
"livenessProbe":{"httpGet":{"port":"http","path":"/"}}}],
"initContainers":[{"name":"init","image":"i"}],"tolerations":[{"key":"a","operator":"Exists","tolerationSeconds":9007199254740993}],
"volumes":[{"name":"v","emptyDir":{"medium":"Memory","sizeLimit":"1Gi"}}],"nodeSelector":null}}`
	for _, seed := range []struct {
		kind  uint8
		raw   string
		edits []byte
	}{
		{0, pod, []byte{}},
		{0, pod, []byte{200, 100, 7, 0}},
		{0, pod, []byte{90, 200, 30, 5, 10, 64, 1, 2, 3}},
		{0, `{"spec":null,"metadata":{"annotations":null}}`, []byte{100, 0, 200, 65, 3}},
		{0, `{}`, []byte{70, 70, 70, 70, 70, 1, 1, 1}},
		{1, `{"apiVersion":"apps/v1","kind":"Deployment","spec":{"template":{"spec":{"containers":[{"name":"a","securityContext":{"runAsUser":1}}]}},"paused":false}}`, []byte{150, 150, 150, 150, 2}},
		{2, `{"spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":{"spec":{"containers":[]}}}}}}`, []byte{100, 100, 100, 100, 100, 1}},
		{3, `{"kind":"k","inner":{"a":"x","d":null},"ptrList":[null,{"a":"y"}],"structs":{"s":{"c":true}},"quantity":"1Gi","time":null,"extra":{"z":1}}`, []byte{64, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{3, `{"list":[{"a":"1"},{"a":"2"},{"a":"3"}],"numbers":[1,2,3],"Bare":"b","zero":{"c":true}}`, []byte{90, 5, 2, 1, 90, 12, 0}},
	} {
		f.Add([]byte(seed.raw), seed.kind, seed.edits)
	}
	f.Fuzz(func(t *testing.T, raw []byte, kind uint8, edits []byte) {
		newObject := objectKinds[int(kind)%len(objectKinds)]
		before := newObject()
		// As the webhook decodes: case-sensitive, duplicate keys refused (the typed value would merge
		// both while a patch applies to one of them).
		if !decodeUnique(raw, before) {
			return
		}
		var rawDoc any
		if json.Unmarshal(raw, &rawDoc) != nil {
			return
		}
		if _, isObject := rawDoc.(map[string]any); !isObject {
			return
		}
		after := newObject()
		if !decodeUnique(raw, after) {
			t.Fatal("raw decoded once and not twice")
		}
		(&editor{data: edits}).edits(reflect.ValueOf(after).Elem())
		if got, want := equal(reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem()), reflect.DeepEqual(before, after); got != want {
			t.Fatalf("equal says %v where reflect.DeepEqual says %v", got, want)
		}
		beforeJSON, err := json.Marshal(before)
		if err != nil {
			return // a value raw can hold that its type cannot render (the webhook never diffs one)
		}
		afterJSON, err := json.Marshal(after)
		if err != nil {
			t.Fatalf("an edit made an unrenderable value: %v", err)
		}

		var beforeDoc, afterDoc any
		_ = json.Unmarshal(beforeJSON, &beforeDoc)
		_ = json.Unmarshal(afterJSON, &afterDoc)
		l := libraryLimits(beforeDoc, afterDoc)
		if l.reorder || l.emptyKey {
			return // Objects hands such members to the library, limits and all
		}

		p, err := Objects(before, after, raw)
		if err != nil {
			t.Fatalf("Objects: %v", err)
		}
		pj, _ := json.Marshal(p)
		var ref Patch
		var want []byte
		if !l.mixed { // the reference cannot diff these
			if ref, err = Diff(beforeJSON, afterJSON); err != nil {
				t.Fatalf("Diff: %v", err)
			}
			if ref, err = Rebase(ref, raw); err != nil {
				t.Fatalf("Rebase: %v", err)
			}
			if want, err = applyRFC6902(ref, raw); err != nil {
				// Rebase only anchors adds: a member the type always renders, raw lacks and after
				// changes becomes a replace of nothing. The pod types' members the policy writes are all
				// omitempty or written whole, so Objects promises no more than the reference here.
				return
			}
		}
		got, err := applyRFC6902(p, raw)
		if err != nil {
			t.Fatalf("Objects' patch does not apply to raw: %v\npatch: %s\nraw: %s", err, pj, raw)
		}
		gotTyped := newObject()
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(got, gotTyped); err != nil {
			t.Fatalf("the patched document does not decode: %v\n%s", err, got)
		}
		// Both through one decode and encode: after may hold invalid UTF-8, which renders as an escaped
		// U+FFFD that decodes to the character itself.
		wantTyped := newObject()
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(afterJSON, wantTyped); err != nil {
			t.Fatal(err)
		}
		typed, _ := json.Marshal(gotTyped)
		if wantJSON, _ := json.Marshal(wantTyped); string(typed) != string(wantJSON) {
			t.Fatalf("the patched raw document is not after\npatch: %s\nraw:   %s\ngot:   %s\nwant:  %s", pj, raw, typed, wantJSON)
		}
		if want != nil && !equalJSON(got, want) {
			rj, _ := json.Marshal(ref)
			t.Fatalf("Objects and Diff+Rebase disagree on raw\nraw:       %s\nobjects:   %s\ngives:     %s\nreference: %s\ngives:     %s", raw, pj, got, rj, want)
		}
	})
}

// settableFields are the exported fields of struct type t, with those an embedded unexported struct
// promotes (settable one by one, not as a whole).
func settableFields(t reflect.Type) [][]int {
	var out [][]int
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case f.IsExported():
			out = append(out, []int{i})
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			for _, inner := range settableFields(f.Type) {
				out = append(out, append([]int{i}, inner...))
			}
		}
	}
	return out
}

// editor changes a typed value as its bytes say. Each edit walks down from the root, choosing a field,
// element, map entry or pointer target per byte, and acts where a byte says so or where it can go no
// deeper.
type editor struct{ data []byte }

func (e *editor) next() int {
	if len(e.data) == 0 {
		return 0
	}
	b := e.data[0]
	e.data = e.data[1:]
	return int(b)
}

// str is a string an edit sets: valid UTF-8, as every string of an object the policy edits is (decoding
// replaces invalid bytes, and the policy writes only its own constants); encoding/json would replace
// invalid bytes on the way out, so two different Go strings would render as one.
func (e *editor) str() string {
	n := min(e.next()%12, len(e.data))
	s := strings.ToValidUTF8(string(e.data[:n]), "\uFFFD")
	e.data = e.data[n:]
	return s
}

func (e *editor) int() int64 {
	switch e.next() % 4 {
	case 0:
		return 0
	case 1:
		return int64(e.next())
	case 2:
		return -int64(e.next())
	default:
		return 1<<53 + 1 + int64(e.next()) // beyond float64's exact integers
	}
}

func (e *editor) edits(root reflect.Value) {
	for range 16 {
		if len(e.data) == 0 {
			return
		}
		e.edit(root, 0)
	}
}

var (
	stamp       = metav1.NewTime(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	customLeafs = map[reflect.Type][]any{
		reflect.TypeFor[resource.Quantity]():  {resource.Quantity{}, resource.MustParse("1"), resource.MustParse("100m"), resource.MustParse("1Gi")},
		reflect.TypeFor[intstr.IntOrString](): {intstr.IntOrString{}, intstr.FromInt32(8080), intstr.FromString("http")},
		reflect.TypeFor[metav1.Time]():        {metav1.Time{}, stamp},
		reflect.TypeFor[metav1.MicroTime]():   {metav1.MicroTime{}, metav1.NewMicroTime(stamp.Time)},
	}
)

func (e *editor) edit(v reflect.Value, depth int) {
	b := e.next()
	act := depth > 0 && b < 32 || depth > 16
	t := v.Type()
	if leafs, ok := customLeafs[t]; ok {
		v.Set(reflect.ValueOf(leafs[b%len(leafs)]))
		return
	}
	if customEncoding(t) && t.Kind() != reflect.Pointer {
		v.SetZero() // an encoding we do not know how to fill validly
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		switch {
		case act && !v.IsNil():
			v.SetZero()
		case v.IsNil():
			v.Set(reflect.New(t.Elem()))
			if !act {
				e.edit(v.Elem(), depth+1)
			}
		default:
			e.edit(v.Elem(), depth+1)
		}
	case reflect.Struct:
		if act {
			v.SetZero()
			return
		}
		if fields := settableFields(t); len(fields) > 0 {
			e.edit(v.FieldByIndex(fields[e.next()%len(fields)]), depth+1)
		}
	case reflect.Slice:
		if !act && v.Len() > 0 {
			e.edit(v.Index(e.next()%v.Len()), depth+1)
			return
		}
		switch e.next() % 4 {
		case 0:
			v.SetZero()
		case 1:
			v.Set(reflect.Append(v, reflect.Zero(t.Elem())))
			e.edit(v.Index(v.Len()-1), depth+1)
		case 2:
			if n := v.Len(); n > 0 {
				i := e.next() % n
				kept := reflect.MakeSlice(t, 0, n-1)
				kept = reflect.AppendSlice(kept, v.Slice(0, i))
				v.Set(reflect.AppendSlice(kept, v.Slice(i+1, n)))
			}
		default:
			if n := v.Len(); n > 0 {
				v.Set(reflect.Append(v, v.Index(e.next()%n)))
			}
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int {
			if x.String() < y.String() {
				return -1
			}
			if x.String() > y.String() {
				return 1
			}
			return 0
		})
		switch op := e.next() % 4; {
		case act && op == 0:
			v.SetZero()
		case op == 1 || len(keys) == 0:
			if v.IsNil() {
				v.Set(reflect.MakeMap(t))
			}
			value := reflect.New(t.Elem()).Elem()
			e.edit(value, depth+1)
			v.SetMapIndex(reflect.ValueOf(e.str()).Convert(t.Key()), value)
		case op == 2:
			v.SetMapIndex(keys[e.next()%len(keys)], reflect.Value{})
		default:
			k := keys[e.next()%len(keys)]
			value := reflect.New(t.Elem()).Elem()
			value.Set(v.MapIndex(k))
			e.edit(value, depth+1)
			v.SetMapIndex(k, value)
		}
	case reflect.String:
		v.SetString(e.str())
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(e.int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(e.int()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(e.int()) / 4)
	}
}
