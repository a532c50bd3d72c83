// Package truncate bounds text a user chose (a key, a value, a runtime's message) before wincompat
// quotes it, without splitting a character. The decision, the policy file's decoder, the audit and the
// misplaced-pod watcher all cut such text, and each would otherwise import another for it.
package truncate

import "unicode/utf8"

// AtRune is the longest prefix of s of at most n bytes that ends on a rune boundary.
func AtRune(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
