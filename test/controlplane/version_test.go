package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The version named by test/go.mod is the one the Makefile builds, and the override is taken only when it
// is a release tag that cannot leave bin/k8s.
func TestVersion(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "test"), 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := "module example/test\n\nrequire (\n\tk8s.io/kubelet v0.37.2 // indirect\n\tk8s.io/kubernetes v1.37.2\n)\n\nreplace k8s.io/api => k8s.io/api v0.37.2\n"
	if err := os.WriteFile(filepath.Join(root, "test", "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env, want, wantErr string
	}{
		{"test/go.mod", "", "v1.37.2", ""},
		{"override", "v1.34.5", "v1.34.5", ""},
		{"pre-release", "v1.38.0-alpha.1", "v1.38.0-alpha.1", ""},
		{"no v", "1.36.3", "", "not a Kubernetes release version"},
		{"a path", "v1.36.3/../../..", "", "not a Kubernetes release version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(VersionEnv, tc.env)
			got, err := Version(root)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Version = %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Version = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// This repository's test/go.mod names a release, so that BinDir looks in a directory of its own.
func TestVersionOfThisCheckout(t *testing.T) {
	t.Setenv(VersionEnv, "")
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	v, err := Version(root)
	if err != nil {
		t.Fatal(err)
	}
	if !releaseVersion.MatchString(v) {
		t.Fatalf("Version = %q", v)
	}
}

// A binary not built from k8s.io/kubernetes at the version asked for is refused: here the test binary
// itself, whose main module is this one.
func TestCheckBuiltFromRefusesAnotherBuild(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	err = checkBuiltFrom(self, "v1.37.2")
	if err == nil || !strings.Contains(err.Error(), "not k8s.io/kubernetes v1.37.2") {
		t.Fatalf("checkBuiltFrom(test binary) = %v", err)
	}
}
