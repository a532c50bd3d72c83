package main

import (
	"strings"
	"testing"

	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// The slow phases measure gated admission only if every review's pod was gated, for the reason of its
// mode: a review answered with a fallback build, or gated for another reason, fails the run.
func TestCheckGated(t *testing.T) {
	r := &perf.Review{Name: "image-slow-gate"}
	phase := func(ok int64, gated map[string]float64) perf.Phase {
		return perf.Phase{Summary: load.Summary{OK: ok}, Wincompat: perf.Admissions{Gated: gated}}
	}
	for _, tc := range []struct {
		name string
		p    perf.Phase
		ok   bool
	}{
		{"every pod gated, not cached", phase(12, map[string]float64{"not-cached": 12}), true},
		{"some answered with a fallback build", phase(12, map[string]float64{"not-cached": 10}), false},
		{"gated for another reason too", phase(12, map[string]float64{"not-cached": 12, "busy": 1}), false},
		{"no review answered", phase(0, nil), false},
	} {
		e := &env{}
		e.checkGated(r, "fixed", tc.p, "not-cached")
		if (len(e.failures) == 0) != tc.ok {
			t.Errorf("%s: failures %q, want ok %v", tc.name, e.failures, tc.ok)
		}
		if !tc.ok && len(e.failures) > 0 && !strings.Contains(e.failures[0], "image-slow-gate") {
			t.Errorf("%s: %q does not name the phase", tc.name, e.failures[0])
		}
	}
}
