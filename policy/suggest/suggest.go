// Package suggest finds what a user probably meant by a name that is not known: a command, a flag's
// value, a policy key. It is pure (no I/O), so the policy package may use it.
package suggest

import (
	"strings"

	"github.com/agnivade/levenshtein"
)

// maxTyped bounds the names looked at: no known name is nearly this long, and the distance costs the
// product of the lengths, while a policy file's keys are whatever its author wrote.
const maxTyped = 64

// Closest returns the known name nearest to typed, ignoring case: within two edits as cobra suggests
// commands (its SuggestionsMinimumDistance), or a quarter of typed's length for long names
// (excludeNamespace for excludedNamespaces), or one typed is the beginning of. Ties go to the first
// in known's order. ok is false when no name is near enough.
func Closest(typed string, known []string) (name string, ok bool) {
	if typed == "" || len(typed) > maxTyped {
		return "", false
	}
	lower := strings.ToLower(typed)
	most := max(2, len(typed)/4)
	best := -1
	for _, k := range known {
		kl := strings.ToLower(k)
		d := levenshtein.ComputeDistance(lower, kl)
		if d > most && !strings.HasPrefix(kl, lower) {
			continue
		}
		if best < 0 || d < best {
			name, best = k, d
		}
	}
	if best < 0 || name == typed {
		return "", false
	}
	return name, true
}
