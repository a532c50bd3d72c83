package yamlpatch

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/wincompat/wincompat/patch"
)

func TestApplyKeepsComments(t *testing.T) {
	src := `# head
kind: Pod # kind comment
metadata:
  name: app
spec:
  # containers follow
  containers:
    - name: app # the app
      securityContext:
        runAsUser: 1000
        runAsNonRoot: true
  tolerations:
    - key: a
`
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	err := Apply(doc.Content[0], patch.Patch{
		{Op: "remove", Path: "/spec/containers/0/securityContext/runAsUser"},
		{Op: "add", Path: "/metadata/annotations", Value: map[string]any{"wincompat.io/build": "10.0.20348"}},
		{Op: "add", Path: "/spec/tolerations/1", Value: map[string]any{"key": "os"}},
		{Op: "add", Path: "/spec/nodeSelector", Value: map[string]any{"kubernetes.io/os": "windows"}},
		{Op: "replace", Path: "/kind", Value: "Pod"},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{"# head", "# kind comment", "# containers follow", "# the app", "wincompat.io/build: 10.0.20348", "kubernetes.io/os: windows", "- key: os", "runAsNonRoot: true"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "runAsUser") {
		t.Errorf("runAsUser not removed:\n%s", got)
	}
	if strings.Index(got, "metadata") > strings.Index(got, "spec") {
		t.Errorf("key order changed:\n%s", got)
	}
}

func TestApplyRefusesAnchors(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("a: &x {b: 1}\nc: *x\n"), &doc); err != nil {
		t.Fatal(err)
	}
	if err := Apply(doc.Content[0], patch.Patch{{Op: "remove", Path: "/c/b"}}); err == nil {
		t.Error("editing through an alias must fail, it would change the anchor too")
	}
	if err := Apply(doc.Content[0], patch.Patch{{Op: "remove", Path: "/a/b"}}); err == nil {
		t.Error("editing an anchored node must fail, it would change every alias too")
	}
}

func TestApplyErrors(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("a: [1]\nb: x\n"), &doc); err != nil {
		t.Fatal(err)
	}
	for _, op := range []patch.Operation{
		{Op: "remove", Path: "/nope"},
		{Op: "remove", Path: "/a/5"},
		{Op: "add", Path: "/b/c", Value: 1},
		{Op: "move", Path: "/a"},
		{Op: "replace", Path: ""},
	} {
		if err := Apply(doc.Content[0], patch.Patch{op}); err == nil {
			t.Errorf("%+v: no error", op)
		}
	}
}
