package termsafe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"unicode"
	"unicode/utf8"
)

// hostile holds what could act on a terminal: an ANSI colour and cursor movement, a title change
// (OSC ... BEL), a carriage return that overwrites the line, a C1 CSI, DEL, bidi overrides and
// isolates, zero-width characters, line separators and bytes that are not UTF-8.
var hostile = []string{
	"\x1b[31mred\x1b[0m",
	"\x1b[2J\x1b[Hcleared",
	"\x1b]0;owned\x07",
	"ok\rFAKE",
	"line\nfake line\ttab",
	"\u009b31m",
	"del\x7f",
	"admin\u202egnp.exe",
	"\u2066iso\u2069\u200f\u200b\ufeff",
	"sep\u2028\u2029",
	"bad\xffbyte\xc3",
	"\x00nul",
}

// acts says what in s a terminal could act on, or "".
func acts(s string) string {
	for i, r := range s {
		if _, size := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && size == 1 {
			return fmt.Sprintf("byte %#x at %d is not UTF-8", s[i], i)
		}
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return fmt.Sprintf("%U at %d", r, i)
		}
	}
	return ""
}

func TestStringEscapes(t *testing.T) {
	for _, s := range hostile {
		got := String(s)
		if what := acts(got); what != "" {
			t.Errorf("String(%q) = %q still holds %s", s, got, what)
		}
	}
	for s, want := range map[string]string{
		"\x1b[31mred":  `\x1b[31mred`,
		"ok\rFAKE":     `ok\x0dFAKE`,
		"a\u202eb":     `a\u202eb`,
		"\u009b":       `\u009b`,
		"x\xffy":       `x\xffy`,
		`C:\data\logs`: `C:\data\logs`, // Windows paths stay readable
		"Zürich 東京 🙂":  "Zürich 東京 🙂",
	} {
		if got := String(s); got != want {
			t.Errorf("String(%q) = %q, want %q", s, got, want)
		}
	}
}

// Every rune: escaped exactly when a terminal could act on it.
func TestStringEveryRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		s := string(r)
		got := String(s)
		if acts(s) == "" && got != s {
			t.Fatalf("%U changed to %q", r, got)
		}
		if acts(s) != "" && acts(got) != "" {
			t.Fatalf("%U not escaped: %q", r, got)
		}
	}
}

// JSON keeps the values and leaves nothing a terminal could act on.
func TestJSON(t *testing.T) {
	b, err := json.MarshalIndent(map[string][]string{"values": hostile}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(b)
	var back, want map[string][]string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	_ = json.Unmarshal(b, &want)
	if fmt.Sprint(back) != fmt.Sprint(want) {
		t.Errorf("values changed:\n%q\n%q", back, want)
	}
	// Outside the strings JSON's own newlines and indentation remain; nothing else acts.
	if what := acts(string(bytes.ReplaceAll(got, []byte("\n"), nil))); what != "" {
		t.Errorf("JSON output still holds %s:\n%s", what, got)
	}
	if clean := []byte(`{"a": "b"}`); !bytes.Equal(JSON(clean), clean) {
		t.Error("clean JSON changed")
	}
}
