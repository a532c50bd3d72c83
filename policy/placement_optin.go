package policy

import (
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"

	"github.com/wincompat/wincompat/policy/truncate"
)

// Only wincompat.io/enabled=true opts a namespace in (Scope). A person who types yes, True or 1, or
// wincompat/enabled, gets a namespace wincompat never sees, and a Windows pod that the API server then
// refuses for a field wincompat would have removed, with nothing pointing at the label. The audit, the
// webhook's opt-in check and offline mutate name such labels with NamespaceOptInMistakes.

// OptInMistakeKind is what is wrong with a namespace label that looks meant to opt the namespace in.
type OptInMistakeKind int

const (
	// EnabledValue: wincompat.io/enabled has a value other than "true" that does not say no.
	EnabledValue OptInMistakeKind = iota + 1
	// NearKey: a label key close to one of wincompat's namespace labels (wincompat/enabled,
	// wincompat.io/enable, wincompat.io/default_os), which wincompat does not read.
	NearKey
	// NotEnabled: wincompat.io/default-os=windows on a namespace without wincompat.io/enabled: it takes
	// effect only in an opted-in namespace. (default-os=linux and mode also serve Linux by default,
	// which needs no opt-in.)
	NotEnabled
)

// OptInMistake is one namespace label that a person plausibly meant to opt the namespace in, or to
// configure it, and that does not.
type OptInMistake struct {
	Kind OptInMistakeKind
	// Key and Value are the label as found, bounded.
	Key, Value string
	// FixKey and FixValue are the label that does what Key=Value was meant to do.
	FixKey, FixValue string
}

// OptOutValues are the values of wincompat.io/enabled that say no to a person (compared ignoring
// case): a namespace labelled so is out of scope on purpose, and nothing hints at it. Every other
// value than "true" is a mistake.
var OptOutValues = []string{"false", "f", "no", "n", "off", "0", "disabled", "disable"}

// namespaceLabels are the keys wincompat reads on a namespace, the ones a near key is compared with.
var namespaceLabels = []string{LabelEnabled, LabelDefaultOS, LabelMode}

// ownLabels are every key wincompat reads or writes: none of them is a near key of another.
var ownLabels = []string{LabelEnabled, LabelDefaultOS, LabelMode, LabelSkip, LabelOS}

const (
	// maxOptInMistakes bounds what one namespace reports: a namespace has as many labels as its
	// author gave it.
	maxOptInMistakes = 4
	// maxLabelKey is the longest key a valid label has (a 253-byte prefix, "/", a 63-byte name);
	// longer keys are not compared, so the distance's cost stays bounded.
	maxLabelKey = 317
	// maxLabelValue is the longest valid label value.
	maxLabelValue = 63
)

// NamespaceOptInMistakes names the labels of a namespace that a person plausibly meant to opt it in
// with, or to configure it with, and that wincompat does not act on: wincompat.io/enabled with a value
// other than "true" (yes, True, 1, on, enabled, ...: anything but "true" and OptOutValues), a key close
// to wincompat's namespace labels, wincompat.io/default-os=windows without wincompat.io/enabled. A namespace that says no (enabled=false) has no mistake. The result is sorted
// by key and holds at most four mistakes.
func NamespaceOptInMistakes(labels map[string]string) []OptInMistake {
	var out []OptInMistake
	enabled, hasEnabled := labels[LabelEnabled]
	if hasEnabled && enabled != "true" && !optOut(enabled) {
		out = append(out, OptInMistake{Kind: EnabledValue, Key: LabelEnabled, Value: bound(enabled, maxLabelValue),
			FixKey: LabelEnabled, FixValue: "true"})
	}
	nearEnabled := false
	for key, value := range labels {
		known, ok := nearKey(key)
		if !ok {
			continue
		}
		if _, present := labels[known]; present {
			continue // the namespace has the real label: this one is only noise
		}
		fixValue := value
		if known == LabelEnabled {
			if optOut(value) {
				continue // a no with a misspelt key still means no
			}
			fixValue, nearEnabled = "true", true
		}
		out = append(out, OptInMistake{Kind: NearKey, Key: bound(key, maxLabelKey), Value: bound(value, maxLabelValue),
			FixKey: known, FixValue: bound(fixValue, maxLabelValue)})
	}
	// default-os=linux and mode work without the enable label (Linux by default), so only
	// default-os=windows says that Windows pods were meant to be wincompat's.
	if !hasEnabled && !nearEnabled && labels[LabelDefaultOS] == "windows" {
		out = append(out, OptInMistake{Kind: NotEnabled, Key: LabelDefaultOS, Value: "windows", FixKey: LabelEnabled, FixValue: "true"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if len(out) > maxOptInMistakes {
		out = out[:maxOptInMistakes]
	}
	return out
}

func optOut(value string) bool {
	for _, no := range OptOutValues {
		if strings.EqualFold(value, no) {
			return true
		}
	}
	return false
}

// nearKey returns the namespace label key is a plausible misspelling of. A key that names wincompat
// (wincompat/enabled, wincompat.com/enabled, wincompat-enabled, wincompat) is compared by the part
// after it; any other key as a whole, within three edits (wincomapt.io/enabled).
func nearKey(key string) (string, bool) {
	if len(key) > maxLabelKey {
		return "", false
	}
	for _, own := range ownLabels {
		if key == own {
			return "", false
		}
	}
	lower := strings.ToLower(key)
	if i := strings.Index(lower, "wincompat"); i >= 0 {
		name := lower[i+len("wincompat"):]
		if j := strings.LastIndexByte(name, '/'); j >= 0 {
			name = name[j+1:]
		}
		name = strings.Trim(name, "./-_:")
		if name == "" {
			return LabelEnabled, true // wincompat=true
		}
		name = strings.ReplaceAll(name, "_", "-")
		for _, known := range namespaceLabels {
			knownName := known[strings.IndexByte(known, '/')+1:]
			if name == knownName || levenshtein.ComputeDistance(name, knownName) <= 2 ||
				(len(name) >= 3 && strings.HasPrefix(knownName, name)) {
				return known, true
			}
		}
		if strings.HasPrefix(name, "enable") || name == "on" || name == "opt-in" || name == "optin" {
			return LabelEnabled, true
		}
		return "", false
	}
	for _, known := range namespaceLabels {
		if levenshtein.ComputeDistance(lower, known) <= 3 {
			return known, true
		}
	}
	return "", false
}

func bound(s string, n int) string { return truncate.AtRune(s, n) }

// Label is the mistaken label as key=value.
func (m OptInMistake) Label() string { return m.Key + "=" + m.Value }

// Fix is the label that does what the mistaken one was meant to, as key=value.
func (m OptInMistake) Fix() string { return m.FixKey + "=" + m.FixValue }

// String says what is wrong and what to set instead, in one sentence without the namespace's name.
func (m OptInMistake) String() string {
	switch m.Kind {
	case EnabledValue:
		return "label " + m.Label() + " does not opt the namespace in: only the value \"true\" does; set " + m.Fix()
	case NearKey:
		return "label " + m.Label() + " is not one wincompat reads: did you mean " + m.Fix() + "?"
	case NotEnabled:
		return "label " + m.Label() + " takes effect only in a namespace labelled " + m.Fix() + "; set it too"
	}
	return ""
}

// Command is the kubectl command that fixes the mistake in namespace ns.
func (m OptInMistake) Command(ns string) string {
	ns = bound(ns, 63)
	switch m.Kind {
	case EnabledValue:
		return "kubectl label namespace " + ns + " " + m.Fix() + " --overwrite"
	case NearKey:
		return "kubectl label namespace " + ns + " " + m.Key + "- " + m.Fix()
	case NotEnabled:
		return "kubectl label namespace " + ns + " " + m.Fix()
	}
	return ""
}
