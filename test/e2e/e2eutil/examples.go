package e2eutil

import (
	"path/filepath"
	"testing"

	"github.com/wincompat/wincompat/test/controlplane"
)

// LoadExamples reads deploy/examples/*.yaml, the manifests the README tells a new user to apply, and
// returns their Pods and workloads as written (no namespace of their own), each a fresh copy.
func LoadExamples(t *testing.T) []Workload {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := loadWorkloads(t, filepath.Join(root, "deploy", "examples"))
	if len(out) == 0 {
		t.Fatal("no Pods or workloads in deploy/examples")
	}
	return out
}
