package policy

import cut "github.com/wincompat/wincompat/policy/truncate"

// CutAtRune is truncate.AtRune, until its callers import that.
func CutAtRune(s string, n int) string { return cut.AtRune(s, n) }
