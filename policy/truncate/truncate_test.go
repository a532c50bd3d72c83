package truncate

import "testing"

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
