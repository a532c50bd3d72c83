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

// Marked is s cut to at most n bytes on a rune boundary, ending in mark when it was cut.
func Marked(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	return AtRune(s, n-len(mark)) + mark
}

// MaxEventNote is the API server's limit on an Event's note (events.k8s.io/v1 NoteLengthLimit): a
// longer one is refused, and the Event lost. Names, a registry's error or an image reference a pod's
// author chose can make a note that long.
const MaxEventNote = 1024

// EventNote is s cut to a note the API server accepts, the cut marked.
func EventNote(s string) string { return Marked(s, MaxEventNote, "...") }
