package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ungate follows the conventions of the other commands: -h prints its usage and short flag help,
// kubectl's connection flags and -n/-A are there, a bad flag value is a usage error.
func TestUngateCommandLine(t *testing.T) {
	code, out, _ := runCLI(t, "", "ungate", "-h")
	if code != 0 || !strings.Contains(out, "Usage: wincompat ungate") {
		t.Fatalf("ungate -h: exit %d:\n%s", code, out)
	}
	_, flags, ok := strings.Cut(out, "\nFlags:\n")
	if !ok {
		t.Fatalf("ungate -h prints no Flags section:\n%s", out)
	}
	helps := flagHelps(flags)
	for _, name := range []string{"all-namespaces", "namespace", "settle", "timeout", "page-size", "kubeconfig", "context", "as"} {
		if _, ok := helps[name]; !ok {
			t.Errorf("ungate has no --%s", name)
		}
	}
	for name, help := range helps {
		if len(help) == 0 || len(help) > flagHelpMaxLines {
			t.Errorf("--%s: %d lines of help", name, len(help))
		}
		for _, line := range help {
			if len(line) > flagHelpMaxChars {
				t.Errorf("--%s: a help line of %d characters", name, len(line))
			}
		}
	}
	if code, _, errOut := runCLI(t, "", "ungate", "--settle=0s", "-A"); code != 2 || !strings.Contains(errOut, "--settle") {
		t.Errorf("--settle=0s: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "ungate", "--all-namespace"); code != 2 || !strings.Contains(errOut, "did you mean --all-namespaces?") {
		t.Errorf("--all-namespace: exit %d: %s", code, errOut)
	}
}

// Without a kubeconfig ungate says what to do, as audit and nodes do (in a child process: client-go
// reads $HOME when it starts).
func TestUngateNoKubeconfig(t *testing.T) {
	if os.Getenv("WINCOMPAT_TEST_CHILD_UNGATE") != "" {
		code, _, errOut := runCLI(t, "", "ungate", "-A")
		fmt.Printf("exit %d: %s", code, errOut)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUngateNoKubeconfig$")
	cmd.Env = []string{"WINCOMPAT_TEST_CHILD_UNGATE=1", "HOME=" + filepath.Join(t.TempDir()), "PATH=" + os.Getenv("PATH")}
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "exit 1: wincompat ungate: kubeconfig: no cluster to talk to") {
		t.Errorf("want the no-kubeconfig message:\n%s", out)
	}
}
