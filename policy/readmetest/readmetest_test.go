package readmetest

import (
	"os"
	"path/filepath"
	"testing"
)

// recorder stands in for *testing.T so that Check's failures can be asserted on.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Fatal(...any)          { r.failed = true }

func TestCheck(t *testing.T) {
	const begin, end = "<!-- t:begin -->\n", "<!-- t:end -->"
	file := filepath.Join(t.TempDir(), "README.md")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("UPDATE_GOLDEN", "")
	for _, tc := range []struct {
		name, readme string
		fails        bool
	}{
		{"current", "intro\n" + begin + "| a |\n" + end + "\nrest\n", false},
		{"stale", "intro\n" + begin + "| old |\n" + end + "\nrest\n", true},
		{"no markers", "intro\n", true},
		{"no end marker", begin + "| a |\n", true},
	} {
		write(tc.readme)
		r := &recorder{TB: t}
		Check(r, file, begin, end, "| a |\n", "UPDATE_GOLDEN=1 go test")
		if r.failed != tc.fails {
			t.Errorf("%s: failed = %v, want %v", tc.name, r.failed, tc.fails)
		}
	}

	write("intro\n" + begin + "| old |\n" + end + "\nrest\n")
	t.Setenv("UPDATE_GOLDEN", "1")
	Check(t, file, begin, end, "| a |\n", "")
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + begin + "| a |\n" + end + "\nrest\n"; string(got) != want {
		t.Errorf("UPDATE_GOLDEN=1 wrote\n%s\nwant\n%s", got, want)
	}
}
