package manifest

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/wincompat/wincompat/policy"
)

// A chart whose layout the YAML encoder rewrites (blank lines of indentation, unindented sequences):
// the diff holds the two things wincompat changed, the record and the Linux pin, and no hunk of
// whitespace it did not.
func TestWriteDiffHoldsOnlyTheRewrite(t *testing.T) {
	src, err := os.ReadFile("testdata/bitnami-nginx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := opts()
	o.Namespace.Labels[policy.LabelDefaultOS] = "linux"
	var out bytes.Buffer
	docs, err := Process("nginx.yaml", src, &out, o)
	if err != nil || len(docs) != 1 || !docs[0].Mutated {
		t.Fatalf("%+v %v", docs, err)
	}
	// The case proves something only while the output's layout differs from the input's.
	if raw, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(docs[0].Before)), B: difflib.SplitLines(string(docs[0].After))}); strings.Count(raw, "\n@@") < 3 {
		t.Fatalf("the output keeps the input's layout; the case tests nothing:\n%s", raw)
	}
	var diff bytes.Buffer
	if err := WriteDiff(&diff, docs); err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, line := range strings.Split(diff.String(), "\n") {
		if (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-")) && !strings.HasPrefix(line, "+++") && !strings.HasPrefix(line, "---") {
			changed = append(changed, line)
		}
	}
	want := []string{
		`+        wincompat.io/template-changes: '{"v":3,"c":[["i","spec.nodeSelector[kubernetes.io/os]",null,"linux","linux-by-default"]]}'`,
		"+      nodeSelector:",
		"+        kubernetes.io/os: linux",
	}
	if strings.Join(changed, "\n") != strings.Join(want, "\n") || strings.Count(diff.String(), "\n@@") != 2 {
		t.Errorf("diff:\n%s\nwant only the lines\n%s", diff.String(), strings.Join(want, "\n"))
	}
}
