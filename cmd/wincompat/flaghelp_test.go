package main

import (
	"strings"
	"testing"
)

// Flag help says what a flag does; why, and the details, are in README.md beside this file.
const (
	flagHelpMaxLines = 2
	flagHelpMaxChars = 200
)

// TestFlagHelpIsShort: every flag of every command, as -h prints it, has at most two lines of help of
// at most 200 characters each as printed (indent included), controller-runtime's logging flags too.
func TestFlagHelpIsShort(t *testing.T) {
	commands := [][]string{{"serve"}, {"mutate"}, {"audit"}, {"nodes"}, {"policy"}, {"policy", "export"}}
	for _, cmd := range commands {
		name := strings.Join(cmd, " ")
		code, _, usage := runCLI(t, "", append(cmd, "-h")...)
		if code != 0 {
			t.Fatalf("wincompat %s -h: exit %d", name, code)
		}
		_, flags, ok := strings.Cut(usage, "\nFlags:\n")
		if !ok {
			t.Fatalf("wincompat %s -h prints no Flags section:\n%s", name, usage)
		}
		for flagName, help := range flagHelps(flags) {
			if len(help) == 0 {
				t.Errorf("wincompat %s: --%s has no help", name, flagName)
			}
			if len(help) > flagHelpMaxLines {
				t.Errorf("wincompat %s: --%s has %d lines of help, more than %d:\n%s", name, flagName, len(help), flagHelpMaxLines, strings.Join(help, "\n"))
			}
			for _, line := range help {
				if len(line) > flagHelpMaxChars {
					t.Errorf("wincompat %s: --%s has a help line of %d characters, more than %d:\n%s", name, flagName, len(line), flagHelpMaxChars, line)
				}
			}
		}
	}
}

// flagHelps splits the flag package's PrintDefaults output into each flag's help lines as printed. An
// entry is "  -name type" then its help lines, each indented "    \t"; a one-letter bool flag's help
// follows its name on the same line after a tab.
func flagHelps(flags string) map[string][]string {
	helps := map[string][]string{}
	var current string
	for line := range strings.SplitSeq(strings.TrimRight(flags, "\n"), "\n") {
		if strings.HasPrefix(line, "    \t") {
			helps[current] = append(helps[current], line)
			continue
		}
		head, inline, hasInline := strings.Cut(strings.TrimPrefix(line, "  -"), "\t")
		current, _, _ = strings.Cut(head, " ")
		helps[current] = nil
		if hasInline && strings.TrimSpace(inline) != "" {
			helps[current] = append(helps[current], line)
		}
	}
	return helps
}
