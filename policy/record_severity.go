package policy

import (
	"slices"
	"strings"
)

// Severity says whether a change asks something of the user. Kubernetes has one kind of admission
// warning, so Warnings marks what needs action and puts it first; the CLI and the KRM function's
// results carry the severity itself.
type Severity string

const (
	// SeverityInfo is a change wincompat made as intended (strip, rewrite, inject), or something it
	// tells without asking anything (which mirror answered for an image).
	SeverityInfo Severity = "info"
	// SeverityWarning is what the user must act on: a field wincompat left alone that Windows cannot
	// honour, a readiness finding, a request it could not follow, a refusal.
	SeverityWarning Severity = "warning"
)

// Message is one rendered warning and its severity. Text is the warning without the mark Warnings
// gives what needs action, for outputs that show the severity on their own.
type Message struct {
	Severity Severity `json:"severity"`
	Text     string   `json:"text"`
}

// warnSeverities is the one table of what a Warn change of each rule asks of the user; a change
// wincompat made (strip, rewrite, inject) is info whatever its rule. Every rule that records Warn
// changes has its row, so a new one is a decision rather than a default (TestWarnSeverities).
var warnSeverities = map[Rule]Severity{
	// Told without asking anything: the image was read, from a mirror the policy names.
	RuleImageMirror: SeverityInfo,
	// On a template: what each pod gets when it is created, which wincompat then does itself.
	RuleMemoryEmptyDir: SeverityInfo,
	RuleDNSPolicy:      SeverityInfo,
	// The gate went: the build was decided after admission, or without the registry (its image-unread
	// warning says so and asks for action).
	RuleBuildGate: SeverityInfo,

	// Left unchanged, and not supported on Windows.
	RuleVolumeDevices: SeverityWarning,
	RuleHostNetwork:   SeverityWarning,
	// A RuntimeClass the pod names contradicts the pin: the pod may land where it cannot run.
	RuleWindowsNodeSelector: SeverityWarning,
	RuleArch:                SeverityWarning,
	// No build chosen, or none a ready node runs: the pod may not schedule, or land on the wrong build.
	RuleBuild: SeverityWarning,
	// The build's RuntimeClass contradicts the pod's nodeSelector, so it was not set.
	RuleRuntimeClass:        SeverityWarning,
	RuleLinuxOnlyImage:      SeverityWarning,
	RuleImageNotOnBuild:     SeverityWarning,
	RuleImageUnread:         SeverityWarning,
	RuleBuildRequestIgnored: SeverityWarning,
	RuleUnknownBuild:        SeverityWarning,
	RuleAffinityAllowsNone:  SeverityWarning,
	RuleImageNewerRevision:  SeverityWarning,
	// Hyper-V isolation would run the pod, but it was created gated and can no longer name the class.
	RuleHyperV: SeverityWarning,

	// The readiness checks: what a Windows node cannot do with a pod the API server accepts.
	RuleMemoryNoLimit:              SeverityWarning,
	RuleMemoryRequestNotLimit:      SeverityWarning,
	RuleNonRootNoUser:              SeverityWarning,
	RuleNonRootAdminUser:           SeverityWarning,
	RuleSubPath:                    SeverityWarning,
	RuleVolumeFileMode:             SeverityWarning,
	RuleSecretOnDisk:               SeverityWarning,
	RuleUnmountableVolume:          SeverityWarning,
	RuleLinuxCommand:               SeverityWarning,
	RuleLinuxScriptCommand:         SeverityWarning,
	RuleLinuxHostPath:              SeverityWarning,
	RuleLinuxRuntimeHostPath:       SeverityWarning,
	RuleHostPathBlockDevice:        SeverityWarning,
	RuleHostPathSocketOrCharDevice: SeverityWarning,
	RulePartialServiceName:         SeverityWarning,
}

// Severity is what the change asks of the user. A Warn change whose rule the table does not know (a
// record of another version, or none) is a warning: telling too loudly costs less than burying it.
func (c Change) Severity() Severity {
	switch c.Action {
	case Strip, Rewrite, Inject:
		return SeverityInfo
	}
	if s, ok := warnSeverities[c.Rule]; ok {
		return s
	}
	return SeverityWarning
}

// Messages are the changes' warnings with their severities, grouped as Warnings groups them: what
// needs action first, then the rest, each in first-seen order.
func Messages(changes []Change) []Message { return messages(changes, false) }

// WouldMessages are Messages for warn mode, as WouldWarnings renders them.
func WouldMessages(changes []Change) []Message { return messages(changes, true) }

// Messages renders the decision's changes with their severities; Warnings are their texts, marked.
func (d Decision) Messages() []Message { return Messages(d.Changes) }

// WouldMessages are the decision's messages for warn mode, where nothing was changed; a refusal is the
// one message, a warning.
func (d Decision) WouldMessages() []Message {
	if d.Denied != "" {
		return []Message{{SeverityWarning, "wincompat (warn mode) would have refused it: " + d.Denied}}
	}
	return WouldMessages(d.Changes)
}

// AdmissionWarnings renders messages as admission warnings, in their order: each that needs action
// marked "action needed" after wincompat's name, so that among the warnings kubectl prints alike the
// ones to act on read differently. The order matters beyond reading: once a response's warnings pass
// 4096 characters in all, the API server cuts each to 256 and drops those past 4096 of them
// (k8s.io/apiserver's warning recorder, endpoints/filters/warning.go), so a pod of many changes keeps
// what needs action.
func AdmissionWarnings(messages []Message) []string {
	out := make([]string, len(messages))
	for i, m := range messages {
		out[i] = m.Admission()
	}
	return out
}

// Admission is the message as an admission warning: "wincompat: action needed: ..." for a warning,
// and "wincompat (warn mode): action needed: ..." in warn mode; info as it is.
func (m Message) Admission() string {
	if m.Severity == SeverityInfo {
		return m.Text
	}
	tag, rest := "wincompat", m.Text
	switch {
	case strings.HasPrefix(rest, warnModeTag):
		tag, rest = warnModeTag, rest[len(warnModeTag):]
	case strings.HasPrefix(rest, "wincompat"):
		rest = rest[len("wincompat"):]
	}
	rest = strings.TrimPrefix(strings.TrimPrefix(rest, ":"), " ")
	return tag + actionNeeded + rest
}

const (
	warnModeTag  = "wincompat (warn mode)"
	actionNeeded = ": action needed: "
)

// ByAttention orders messages what needs action first, keeping first-seen order within each severity.
// Every output that shows messages (admission warnings, the CLI, KRM results) orders them so.
func ByAttention(ms []Message) []Message {
	slices.SortStableFunc(ms, func(a, b Message) int { return attention(a) - attention(b) })
	return ms
}

func attention(m Message) int {
	if m.Severity == SeverityInfo {
		return 1
	}
	return 0
}
