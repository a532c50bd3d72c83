// Package readmetest keeps a generated section of a README true to the table that generates it: the
// text between two marker lines must be what the test renders, UPDATE_GOLDEN=1 rewrites it, and a stale
// or missing section fails the test with the command that regenerates it. The policy tables, the
// misplaced-pod causes and the e2e version probe all render README sections through it. Only tests
// import it.
package readmetest

import (
	"os"
	"strings"
	"testing"
)

// Check compares the text of file between the lines begin and end (each a whole marker line, begin with
// its newline) with want. regenerate is the command that rewrites it, for the failure message.
func Check(t testing.TB, file, begin, end, want, regenerate string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(data), begin)
	got, after, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the markers of its generated section:\n%s%s", file, begin, end)
	}
	if got == want {
		return
	}
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(file, []byte(before+begin+want+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the section after %q is stale; run %s\n%s", file, strings.TrimSpace(begin), regenerate, want)
}
