package gated

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy/truncate"
)

// Event reasons the controller records on a gated pod: a closed set.
const (
	ReasonDecided      = "WindowsBuildDecided"
	ReasonFallback     = "WindowsBuildFallback"
	ReasonReleased     = "WindowsBuildGateReleased"
	ReasonUngateFailed = "WindowsBuildUngateFailed"
)

// EventRow is one Event the controller records: the README's table is these rows.
type EventRow struct {
	Reason, Type, When string
}

// Events are every Event the controller records, in the order a pod may meet them.
func Events() []EventRow {
	return []EventRow{
		{ReasonDecided, corev1.EventTypeNormal, "the gate was removed with the build the registry's answers give (the build, its source, how long the pod waited)"},
		{ReasonFallback, corev1.EventTypeWarning, "the gate was removed without every answer: the bound (`--gate-timeout`) passed, or a registry answered with an error (a failed lookup, not found, unauthorized); the build comes from the tags, namespace, cluster or default (why, the build, its source)"},
		{ReasonReleased, corev1.EventTypeNormal, "the gate was removed and nothing decided: the pod is no longer in scope (its namespace opted out, the skip label) or not a Windows pod, or, past the bound, the API server refused the write of its decision"},
		{ReasonUngateFailed, corev1.EventTypeWarning, "the API server refused the write that removes the gate (RBAC, an admission policy, validation); the controller tries again"},
	}
}

// maxWhy bounds what a registry's error contributes to a note: the rest of the note must fit.
const maxWhy = 512

func buildNote(build, source string) string {
	if build == "" {
		return "no build pinned (wincompat.io/changes says why)"
	}
	return fmt.Sprintf("build %s from %s", build, source)
}

func decidedNote(build, source string, waited time.Duration) string {
	return truncate.EventNote(fmt.Sprintf("%s, decided after admission; the pod waited %s behind the gate", buildNote(build, source), waited.Round(100*time.Millisecond)))
}

func fallbackNote(why, build, source string, waited time.Duration) string {
	return truncate.EventNote(fmt.Sprintf("%s: %s; the pod waited %s behind the gate", truncate.AtRune(why, maxWhy), buildNote(build, source), waited.Round(100*time.Millisecond)))
}

func releasedNote(why string) string {
	return truncate.EventNote("gate removed without a build decision: " + truncate.AtRune(why, maxWhy))
}

func failedNote(err error) string {
	return truncate.EventNote("could not remove the gate, tried again later: " + truncate.AtRune(err.Error(), maxWhy))
}
