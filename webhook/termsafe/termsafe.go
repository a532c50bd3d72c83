// Package termsafe makes strings from the cluster safe to print to a terminal. Pod authors choose
// annotation values (and, before validation, names) that wincompat's commands print: a raw escape
// sequence there could move the cursor, rewrite lines already printed, retitle the window or, on some
// terminals, do worse; a bidirectional override could make a line read other than it is.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every character a terminal could act on written as a Go-style escape:
// control characters (C0 including tab and newline, DEL, C1) as \xNN or \u00NN, format characters
// (bidirectional overrides and isolates, zero-width characters), the line and paragraph separators
// as \uNNNN, and bytes that are not UTF-8 as \xNN. Everything else, backslashes included (Windows
// paths), is left as it is; s comes back unchanged, without a copy, when nothing needs escaping.
func String(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Strings applies String to each of ss, in place, and returns it.
func Strings(ss []string) []string {
	for i, s := range ss {
		ss[i] = String(s)
	}
	return ss
}

// JSON rewrites, in encoded JSON, the characters encoding/json writes as they are but a terminal could
// act on (DEL, C1 controls, format characters, invalid bytes) as \u escapes: the same JSON values,
// safe to print. They can only occur inside strings, JSON's syntax being ASCII.
func JSON(b []byte) []byte {
	if firstUnsafe(string(b)) < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case unsafeRune(r) && r >= 0x20:
			out = fmt.Appendf(out, `\u%04x`, r)
		default: // C0 controls outside strings are JSON's own whitespace
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// firstUnsafe is the index of the first byte String would escape, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

func unsafeRune(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}
