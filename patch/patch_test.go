package patch

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// apply applies p to doc with an independent RFC 6902 implementation.
func apply(t *testing.T, doc string, p Patch) string {
	t.Helper()
	pj, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := jsonpatch.DecodePatch(pj)
	if err != nil {
		t.Fatalf("decode %s: %v", pj, err)
	}
	out, err := dp.Apply([]byte(doc))
	if err != nil {
		t.Fatalf("apply %s: %v", pj, err)
	}
	return string(out)
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// The shapes wincompat produces must round-trip: diff, then apply to the before document.
func TestDiffRoundTrips(t *testing.T) {
	for name, tc := range map[string]struct{ before, after string }{
		"append to tolerations":      {`{"t":[{"k":"a"}]}`, `{"t":[{"k":"a"},{"k":"os"}]}`},
		"append two past index 9":    {`{"t":[0,1,2,3,4,5,6,7,8]}`, `{"t":[0,1,2,3,4,5,6,7,8,9,10]}`},
		"append after duplicates":    {`{"t":[{"k":"a"},{"k":"a"}]}`, `{"t":[{"k":"a"},{"k":"a"},{"k":"os"}]}`},
		"remove inside equal arrays": {`{"c":[{"n":"a","u":1},{"n":"b","u":2,"g":3}]}`, `{"c":[{"n":"a"},{"n":"b"}]}`},
		"new map":                    {`{"spec":{}}`, `{"spec":{"nodeSelector":{"kubernetes.io/os":"windows"}}}`},
		"escaped keys":               {`{"a":{"x/y":1,"m~n":2,"k":0}}`, `{"a":{"k":0,"new/key~1":true}}`},
		"replace value":              {`{"dnsPolicy":"ClusterFirstWithHostNet"}`, `{"dnsPolicy":"ClusterFirst"}`},
		"type change":                {`{"a":"1"}`, `{"a":{"b":1}}`},
		"false and null values":      {`{"a":true,"b":{}}`, `{"a":false,"b":{"c":null}}`},
		"removes shrinking an array": {`{"t":[1,2,3,4,5]}`, `{"t":[1,3,5]}`},
		"nothing":                    {`{"a":[1,{"b":2}]}`, `{"a":[1,{"b":2}]}`},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Diff([]byte(tc.before), []byte(tc.after))
			if err != nil {
				t.Fatal(err)
			}
			if got := apply(t, tc.before, p); !sameJSON(t, got, tc.after) {
				pj, _ := json.Marshal(p)
				t.Errorf("patch %s gives %s, want %s", pj, got, tc.after)
			}
		})
	}
}

// The library diffs reordered arrays wrongly ([1,4,5] -> [4,1] is a single remove). wincompat never
// reorders an array; this test pins the limitation so that a library change is noticed either way.
func TestDiffReorderedArrayLimitation(t *testing.T) {
	p, err := Diff([]byte(`{"a":[1,4,5]}`), []byte(`{"a":[4,1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := apply(t, `{"a":[1,4,5]}`, p); sameJSON(t, got, `{"a":[4,1]}`) {
		t.Log("the library now handles reordered arrays; this caveat can go")
	} else if len(p) != 1 || p[0].Op != "remove" {
		t.Errorf("unexpected patch for a reordered array: %+v", p)
	}
}

func TestDiffIsSortedAndStable(t *testing.T) {
	before := `{"m":{"e":1,"d":1,"c":1,"b":1,"a":1},"arr":[{"x":1,"y":1},{"x":1,"y":1}],"n":{"10":1,"9":1}}`
	after := `{"m":{},"arr":[{},{}],"n":{}}`
	first, err := Diff([]byte(before), []byte(after))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/arr/0/x", "/arr/0/y", "/arr/1/x", "/arr/1/y", "/m/a", "/m/b", "/m/c", "/m/d", "/m/e", "/n/9", "/n/10"}
	var got []string
	for _, op := range first {
		got = append(got, op.Path)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("paths %v, want %v", got, want)
	}
	for range 50 {
		again, _ := Diff([]byte(before), []byte(after))
		if !reflect.DeepEqual(again, first) {
			t.Fatalf("diff order is not stable: %v vs %v", again, first)
		}
	}
}

// A patch is written as encoding/json writes its operations, byte for byte (goldens and the API server
// see these bytes), whether marshalled whole or by the webhook's direct call.
func TestOperationJSON(t *testing.T) {
	p := Patch{
		{Op: "remove", Path: `/metadata/annotations/a~1"b`},
		{Op: "add", Path: "/a", Value: nil},
		{Op: "replace", Path: "/b", Value: false},
		{Op: "add", Path: "/c<&>", Value: "[{\"x\":\"<y> & \u2028\"}]"},
		{Op: "add", Path: "/d", Value: map[string]any{"z": 1, "a": []string{"é"}}},
		{Op: "test", Path: "/e", Value: json.RawMessage(`{"k": [1, 2]}`)},
		// Strings MarshalJSON writes without the encoder, and some it must not.
		{Op: "add", Path: "/metadata/annotations/wincompat.io~1version", Value: "ContainerUser"},
		{Op: "add", Path: "/ctl\x01\x7f/é", Value: "bad \xff UTF-8, a tab\t and é"},
	}
	wire := make([]any, len(p))
	for i, op := range p {
		wire[i] = op.wire()
	}
	want, err := json.Marshal(wire)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(want), `[{"op":"remove","path":"/metadata/annotations/a~1\"b"},{"op":"add","path":"/a","value":null},{"op":"replace","path":"/b","value":false},`) {
		t.Fatalf("the wire form changed: %s", want)
	}
	direct, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	whole, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"MarshalJSON": direct, "json.Marshal": whole} {
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	if _, err := (Patch{{Op: "add", Path: "/f", Value: func() {}}}).MarshalJSON(); err == nil {
		t.Error("a value JSON cannot hold was written")
	}
}

func TestRebaseAddsMissingParents(t *testing.T) {
	// A typed rendering has spec.template.metadata; the raw document does not.
	raw := `{"spec":{"template":{"spec":{"c":1}}}}`
	p := Patch{
		{Op: "add", Path: "/spec/template/metadata/annotations", Value: map[string]any{"a": "1"}},
		{Op: "add", Path: "/spec/template/metadata/labels", Value: map[string]any{"l": "v"}},
		{Op: "remove", Path: "/spec/template/spec/c"},
	}
	got, err := Rebase(p, []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Path != "/spec/template/metadata" {
		t.Fatalf("rebased patch: %+v", got)
	}
	want := `{"spec":{"template":{"metadata":{"annotations":{"a":"1"},"labels":{"l":"v"}},"spec":{}}}}`
	if out := apply(t, raw, got); !sameJSON(t, out, want) {
		t.Errorf("got %s, want %s", out, want)
	}
	// With the parent present the patch is unchanged.
	same, _ := Rebase(p[:1], []byte(`{"spec":{"template":{"metadata":{}}}}`))
	if !reflect.DeepEqual(same, p[:1]) {
		t.Errorf("rebase changed a patch that applies: %+v", same)
	}
}

func TestSplitPointer(t *testing.T) {
	if got := SplitPointer("/metadata/annotations/a~1b~0c"); !reflect.DeepEqual(got, []string{"metadata", "annotations", "a/b~c"}) {
		t.Errorf("SplitPointer = %q", got)
	}
	for _, segs := range [][]string{{}, {"a"}, {"metadata", "annotations", "a/b~c"}, {"~", "/", "~1/~0", ""}} {
		if got := SplitPointer(joinPointer(segs)); len(segs) > 0 && !reflect.DeepEqual(got, segs) {
			t.Errorf("SplitPointer(joinPointer(%q)) = %q", segs, got)
		}
	}
	if got := joinPointer([]string{"a/b~c", "d"}); got != "/a~1b~0c/d" {
		t.Errorf("joinPointer = %q", got)
	}
}

func TestRawDocLooksUpOnlyWhatItNeeds(t *testing.T) {
	d := newRawDoc([]byte(`{"spec":{"template":{"spec":{"tolerations":[{"k":1}]}}},"metadata":null,"n":5}`))
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/spec/template/metadata", 2}, {"/metadata/annotations", 0}, {"/spec/template/spec/tolerations", -1},
		{"/spec/template/spec/tolerations/3", -1}, {"/n/x", -1}, {"/absent/deeper", 0},
	} {
		got, err := d.firstMissing(SplitPointer(tc.path))
		if err != nil || got != tc.want {
			t.Errorf("firstMissing(%s) = %d, %v; want %d", tc.path, got, err, tc.want)
		}
	}
	v, found, err := d.at(SplitPointer("/spec/template/spec/tolerations"))
	if err != nil || !found || firstByte(v) != '[' {
		t.Errorf("at(tolerations) = %s, %v, %v", v, found, err)
	}
	if _, _, err := newRawDoc([]byte(`{"a":{`)).at([]string{"a", "b"}); err == nil {
		t.Error("a truncated document must be an error")
	}
}

func TestDiffKindChangesBelowTheRoot(t *testing.T) {
	for _, tc := range []struct{ before, after string }{
		{`{"a":{"b":1}}`, `{"a":null}`},
		{`{"a":null}`, `{"a":{"b":1}}`},
		{`{"a":[1,2]}`, `{"a":"x"}`},
		{`{"a":{"b":[1]}}`, `{"a":{"b":{"c":1}}}`},
		{`{"a":true}`, `{"a":1}`},
	} {
		p, err := Diff([]byte(tc.before), []byte(tc.after))
		if err != nil {
			t.Fatal(err)
		}
		if got := apply(t, tc.before, p); !sameJSON(t, got, tc.after) {
			t.Errorf("%s -> %s: got %s", tc.before, tc.after, got)
		}
	}
}
