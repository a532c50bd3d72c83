package strictyaml

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The decoder knows no policy: these types stand for any file's.
type item struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

type limits struct {
	Max string `json:"max"`
}

type header struct {
	Kind string `json:"kind"`
}

type file struct {
	header  `json:",inline"`
	Name    string `json:"name"`
	On      bool   `json:"on"`
	Items   []item `json:"items"`
	Limits  limits `json:"limits"`
	Count   int    `json:"count"` // no key: a file holds strings, booleans and lists and mappings of them
	private string
}

func decode(t *testing.T, data string, v *file) error {
	t.Helper()
	return Decode([]byte(data), v)
}

func TestKeysOf(t *testing.T) {
	keys := KeysOf(reflect.TypeFor[file]())
	if want := []string{"kind", "name", "on", "items", "limits"}; !slices.Equal(keys.Names, want) {
		t.Errorf("keys %v, want %v", keys.Names, want)
	}
	if k, ok := keys.Lookup("items"); !ok || k.Type != reflect.TypeFor[[]item]() {
		t.Errorf("items: %v %v", k, ok)
	}
	if _, ok := keys.Lookup("count"); ok {
		t.Error("count is a key")
	}
}

// What the file names is set over what the struct held; null and what it leaves out keep it.
func TestDecodeOverlay(t *testing.T) {
	v := file{Name: "before", On: true, Items: []item{{ID: "a"}}, Limits: limits{Max: "1"}}
	if err := decode(t, "", &v); err != nil || v.Name != "before" {
		t.Fatalf("empty data: %v %+v", err, v)
	}
	err := decode(t, "kind: K\nname: ~\non: no\nitems: [{id: b, tags: [x, ~, y]}, ~]\nlimits: {max: 2}\n", &v)
	want := file{header: header{Kind: "K"}, Name: "before", Items: []item{{ID: "b", Tags: []string{"x", "y"}}}, Limits: limits{Max: "2"}}
	if err != nil || !reflect.DeepEqual(v, want) {
		t.Errorf("got %+v, %v\nwant %+v", v, err, want)
	}
	v = file{}
	if err := decode(t, "items:\n- &i {id: a, tags: [t]}\n- {<<: *i, id: b}\nname: &n x\nkind: *n\n", &v); err != nil ||
		!reflect.DeepEqual(v.Items, []item{{ID: "a", Tags: []string{"t"}}, {ID: "b", Tags: []string{"t"}}}) || v.Kind != "x" {
		t.Errorf("anchors and merges: %+v %v", v, err)
	}
}

// Every problem is named with its line and path, in one refusal.
func TestDecodeRefusals(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"unknown, with the nearest and the keys known there", "nmae: x\nlimits: {mx: 1}\n",
			`line 1: unknown key "nmae" (did you mean "name"?); line 2: unknown key "limits.mx" (did you mean "max"?) (known keys: kind, name, on, items, limits; in limits: max)`},
		{"duplicate", "name: a\nname: b\n", `line 2: duplicate key "name" (first at line 1)`},
		{"wrong shape", "items: {id: a}\non: maybe\n", `line 1: items: got a mapping, want a list of items, each with id and tags; line 2: on: got str "maybe", want true or false`},
		{"top level", "[a]\n", `line 1: got a list, want a mapping of a policy's keys`},
		{"key not a string", "[a]: x\n", `line 1: the top level: a key must be a string, got a list`},
		{"self alias", "items:\n- &a {<<: *a}\n", `anchor "a" contains an alias of itself`},
		{"two documents", "name: a\n---\nname: b\n", "exactly one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v file
			err := decode(t, tc.data, &v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to say %s", err, tc.want)
			}
		})
	}
}

// Hostile input costs bounded time and a bounded refusal.
func TestDecodeBounds(t *testing.T) {
	var b strings.Builder
	for i := range maxMappingKeys + 1 {
		fmt.Fprintf(&b, "k%d: x\n", i)
	}
	var v file
	if err := decode(t, b.String(), &v); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("a mapping of %d keys", maxMappingKeys+1)) {
		t.Errorf("many keys: %.200v", err)
	}
	b.Reset()
	b.WriteString("name: x\nlimits: &l {max: [" + strings.Repeat("a,", 2000) + "a]}\nitems:\n")
	for range 200 {
		b.WriteString("- {id: *l, tags: [*l, *l, *l]}\n")
	}
	if err := decode(t, b.String(), &v); err == nil || len(err.Error()) > 16<<10 {
		t.Errorf("a refusal of %d bytes", len(fmt.Sprint(err)))
	}
	b.Reset()
	for i := range 2 * MaxProblems {
		fmt.Fprintf(&b, "unknown%d: x\n", i)
	}
	if err := decode(t, b.String(), &v); err == nil || strings.Count(err.Error(), "unknown key") != MaxProblems || !strings.Contains(err.Error(), fmt.Sprintf("and %d more", MaxProblems)) {
		t.Errorf("%v", err)
	}
	if got := ClipProblem(strings.Repeat("é", maxProblemBytes)); len(got) > maxProblemBytes+3 || !strings.HasSuffix(got, "é...") {
		t.Errorf("clipped to %d bytes: %.20q", len(got), got)
	}
}

// Node writes every key, in order, and what it writes reads back the same.
func TestNodeReadsBack(t *testing.T) {
	v := file{header: header{Kind: "K"}, Name: "yes", Items: []item{{ID: "1.10"}}}
	out, err := yaml.Marshal(Node(v))
	if err != nil {
		t.Fatal(err)
	}
	const want = "kind: K\nname: \"yes\"\non: false\nitems:\n    - id: \"1.10\"\n      tags: []\nlimits:\n    max: \"\"\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	var back file
	if err := Decode(out, &back); err != nil || back.Items[0].ID != "1.10" || back.Name != "yes" || back.Kind != "K" {
		t.Errorf("read back %+v %v", back, err)
	}
}
