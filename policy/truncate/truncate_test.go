package truncate

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAtRune(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 3, "abc"},
		{"abc", 2, "ab"},
		{"aé", 2, "a"}, // é is two bytes: not split
		{"aé", 3, "aé"},
		{"日本", 4, "日"},
		{"日本", 2, ""},
		{"", 0, ""},
	} {
		if got := AtRune(tc.s, tc.n); got != tc.want {
			t.Errorf("AtRune(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestEventNote: a note the API server would refuse (over 1024 bytes) is cut, never mid-character.
func TestEventNote(t *testing.T) {
	if got := EventNote("short"); got != "short" {
		t.Errorf("a short note changed: %q", got)
	}
	long := strings.Repeat("é", 600) // 1200 bytes
	got := EventNote(long)
	if len(got) > MaxEventNote || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
		t.Errorf("cut note of %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
}
