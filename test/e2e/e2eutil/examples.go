package e2eutil

import (
	"path/filepath"
	"testing"

	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/fixtures"
)

// LoadExamples reads deploy/examples/*.yaml, the manifests the README tells a new user to apply, and
// returns their Pods and workloads as written (no namespace of their own), each a fresh copy.
func LoadExamples(t *testing.T) []Workload {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(root, "deploy", "examples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples in deploy/examples: %v", err)
	}
	var out []Workload
	for _, path := range paths {
		docs, err := fixtures.ReadDocuments(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, obj := range docs {
			if _, ok := TemplatePaths[obj.GetKind()]; ok {
				out = append(out, Workload{File: filepath.Base(path), Obj: obj})
			}
		}
	}
	return out
}
