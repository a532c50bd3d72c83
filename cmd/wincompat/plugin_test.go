package main

import (
	"slices"
	"strings"
	"testing"
)

// As a kubectl plugin the CLI is named as kubectl runs it, prints its own help when run bare (not a
// command's), and answers kubectl's completion requests (kubectl 1.26 and later run
// kubectl_complete-wincompat with the words after "kubectl wincompat").
func TestKubectlPlugin(t *testing.T) {
	for _, tc := range []struct {
		argv0      string
		args, want []string
		name       string
	}{
		{"/usr/local/bin/wincompat", []string{"audit"}, []string{"audit"}, "wincompat"},
		{"/home/u/.krew/bin/kubectl-wincompat", nil, []string{"--help"}, "kubectl wincompat"},
		{`C:\krew\bin\kubectl-wincompat.exe`, []string{"nodes"}, []string{"nodes"}, "kubectl wincompat"},
		{"kubectl_complete-wincompat", []string{"audit", "--con"}, []string{"__complete", "audit", "--con"}, "kubectl wincompat"},
	} {
		// filepath.Base on Linux does not split a Windows path: the name is then the whole path.
		if strings.Contains(tc.argv0, `\`) {
			tc.argv0 = tc.argv0[strings.LastIndex(tc.argv0, `\`)+1:]
		}
		name, args := asInvoked(tc.argv0, tc.args)
		if name != tc.name || !slices.Equal(args, tc.want) {
			t.Errorf("%s %v: %q %v, want %q %v", tc.argv0, tc.args, name, args, tc.name, tc.want)
		}
	}

	t.Cleanup(func() { displayName = "wincompat" })
	displayName = pluginName
	code, out, _ := runCLI(t, "", "--help")
	if code != 0 || !strings.Contains(out, "  kubectl wincompat audit [flags]") || strings.Contains(out, "Usage: wincompat serve") ||
		!strings.Contains(out, `Run "kubectl wincompat <command> -h"`) {
		t.Errorf("kubectl wincompat --help: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "nodes", "-h")
	if code != 0 || !strings.HasPrefix(out, "Usage: kubectl wincompat nodes ") {
		t.Errorf("kubectl wincompat nodes -h: exit %d\n%.200s", code, out)
	}
	code, _, errOut := runCLI(t, "", "audit", "--contxt", "x")
	if want := "kubectl wincompat audit: unknown flag: --contxt; did you mean --context?\nSee 'kubectl wincompat audit --help' for usage.\n"; code != 2 || errOut != want {
		t.Errorf("exit %d, stderr %q, want %q", code, errOut, want)
	}
	code, out, _ = runCLI(t, "", "__complete", "au")
	if code != 0 || out != "audit\n:4\n" {
		t.Errorf("completing au: exit %d, %q", code, out)
	}
	code, out, _ = runCLI(t, "", "__complete", "nodes", "-o", "")
	if code != 0 || out != "table\njson\nyaml\n:4\n" {
		t.Errorf("completing nodes -o: exit %d, %q", code, out)
	}
}

// The completion scripts of the four shells cobra writes them for.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errOut := runCLI(t, "", "completion", shell)
		if code != 0 || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d, %s\n%.200s", shell, code, errOut, out)
		}
	}
	if code, _, errOut := runCLI(t, "", "completion", "tcsh"); code != 2 || errOut == "" {
		t.Errorf("completion tcsh: exit %d, %q", code, errOut)
	}
}
