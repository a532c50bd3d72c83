package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeMutateExample: every line the top-level README quotes as `wincompat mutate`'s output on the
// example pod is a line the command prints today, so the first example a reader tries cannot go stale
// (it once showed a RuntimeClass where the pod now gets build affinity).
func TestReadmeMutateExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const command = "go run ./cmd/wincompat mutate -f deploy/examples/windows-pod.yaml\n```\n"
	_, after, ok := strings.Cut(string(readme), command)
	if !ok {
		t.Fatalf("README.md no longer shows %q followed by its output", strings.TrimSuffix(command, "\n```\n"))
	}
	_, block, ok := strings.Cut(after, "```\n")
	if !ok {
		t.Fatal("no output block after the command in README.md")
	}
	block, _, _ = strings.Cut(block, "```")
	t.Chdir("../..") // the README runs it from the repository root, and the paths in the warnings say so
	code, _, errOut := runCLI(t, "", "mutate", "-f", "deploy/examples/windows-pod.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	printed := strings.Split(errOut, "\n")
	quoted := 0
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		if line == "..." {
			continue
		}
		quoted++
		found := false
		for _, p := range printed {
			found = found || p == line
		}
		if !found {
			t.Errorf("README.md quotes a line mutate does not print:\n  %s\nit prints:\n%s", line, errOut)
		}
	}
	if quoted == 0 {
		t.Error("README.md quotes no output line")
	}
}

// readmeMaxBytes bounds the top-level README: what wincompat is, how to start and use it, and links.
// Reference material belongs beside the code it describes (this directory's README for the CLI).
const readmeMaxBytes = 20_000

// TestReadmeIsShort: the top-level README stays a page a newcomer reads, not a reference.
func TestReadmeIsShort(t *testing.T) {
	info, err := os.Stat("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() > readmeMaxBytes {
		t.Errorf("README.md is %d bytes, more than %d: move reference material into the README beside its code", info.Size(), readmeMaxBytes)
	}
}
