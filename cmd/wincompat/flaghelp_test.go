package main

import (
	"regexp"
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
		code, usage, _ := runCLI(t, "", append(cmd, "-h")...)
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

// flagEntry is the start of a flag's entry as pflag prints it: "  -o, --output string   help" or
// "      --policy string   help"; the lines after it that are not entries continue its help.
var flagEntry = regexp.MustCompile(`^  (?:-[^-], |    )--([^ =]+)(?: [^ ]+)?(?:   +(.*))?$`)

// flagHelps splits pflag's flag usages into each flag's help lines as printed: the entry line when it
// holds help, and its continuation lines.
func flagHelps(flags string) map[string][]string {
	helps := map[string][]string{}
	var current string
	for line := range strings.SplitSeq(strings.TrimRight(flags, "\n"), "\n") {
		m := flagEntry.FindStringSubmatch(line)
		if m == nil {
			helps[current] = append(helps[current], line)
			continue
		}
		current = m[1]
		helps[current] = nil
		if strings.TrimSpace(m[2]) != "" {
			helps[current] = append(helps[current], line)
		}
	}
	return helps
}
