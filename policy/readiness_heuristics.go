package policy

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The heuristic readiness checks read what a pod runs and mounts (commands, host paths, the names it
// connects to) and say what will not work on a Windows node. They recognise only the forms their
// tables list, never a guess from an arbitrary string, and each table row says how sure it is: a
// command such as /bin/sh fails in every Windows image that nobody gave a sh.exe, so it is likely, not
// certain. One detector reports one certainty, so that the readiness row it feeds can give one honest
// reason. They only ever warn: a heuristic never blocks admission.

// certainty says how sure a table row is that what it recognises fails on a Windows node.
type certainty uint8

const (
	// windowsForm is a form that belongs to Windows (C:\..., powershell.exe, \\.\pipe\...): never
	// reported, and listed first so that no Linux row can claim it.
	windowsForm certainty = iota
	// likely fails unless the image or the node was given what the Linux form names (a sh.exe on the
	// PATH, a C:\run\flannel written by a Windows port of the daemon).
	likely
	// certain fails whatever the image or the node holds.
	certain
)

func (c certainty) String() string {
	switch c {
	case likely:
		return "likely"
	case certain:
		return "certain"
	}
	return "Windows form (never reported)"
}

// maxRecordedBytes bounds one recorded string (a program, a host path, a service name): enough to
// recognise it, small enough that the record stays small however long the pod's strings are.
const maxRecordedBytes = 128

// clipMark ends a recorded string or command that was cut.
const clipMark = "…"

// clipRecorded cuts s to maxRecordedBytes on a rune boundary. Invalid UTF-8 is left to encoding/json, which
// writes it as U+FFFD.
func clipRecorded(s string) string { return clipMarked(s, maxRecordedBytes) }

// recordString is a found string as a finding's Value.
func recordString(s string) json.RawMessage { return jsonValue(clipRecorded(s)) }

// recordArgv is a found command as a finding's Value: its program alone, clipped, and clipMark as a
// second element when it has arguments. The record is an audit annotation, which lands in the API
// server's audit log where pod specs usually do not, and arguments carry passwords (sh -c "curl -u
// admin:secret ..."); the program is all the rule matched.
// A program written with its arguments in one element ("/bin/sh -c ...") is cut at the first blank.
func recordArgv(argv []string) json.RawMessage {
	program, _, withArgs := strings.Cut(argv[0], " ")
	out := []string{clipRecorded(program)}
	if withArgs || len(argv) > 1 {
		out = append(out, clipMark)
	}
	return jsonValue(out)
}

// recordJSON is a found value as a finding's Value, cut to a string of maxRecordedBytes when its JSON
// is longer: a volume source is the pod author's to fill.
func recordJSON(v any) json.RawMessage {
	b := jsonValue(v)
	if len(b) <= maxRecordedBytes {
		return b
	}
	return recordString(string(b))
}

// findingList collects a detector's findings up to maxFindingsPerRow.
type findingList []readinessFinding

// add records a finding, unless the list is full, and says whether there is room for more.
func (l *findingList) add(path string, value json.RawMessage) bool {
	if !l.full() {
		*l = append(*l, readinessFinding{Path: path, Value: value})
	}
	return !l.full()
}

// full says that the list holds maxFindingsPerRow findings: a detector stops building paths there.
func (l *findingList) full() bool { return len(*l) >= maxFindingsPerRow }

// eachContainer visits init containers, containers and ephemeral containers with where they are, in
// that order, until visit returns false. It only reads.
func eachContainer(spec *corev1.PodSpec, visit func(at containerAt, c *corev1.Container) bool) {
	for i := range spec.InitContainers {
		if !visit(containerAt{"initContainers", spec.InitContainers[i].Name}, &spec.InitContainers[i]) {
			return
		}
	}
	for i := range spec.Containers {
		if !visit(containerAt{"containers", spec.Containers[i].Name}, &spec.Containers[i]) {
			return
		}
	}
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i]
		if !visit(containerAt{"ephemeralContainers", ec.Name}, (*corev1.Container)(&ec.EphemeralContainerCommon)) {
			return
		}
	}
}

// hasSuffixFold is strings.HasSuffix ignoring ASCII case: Windows file names are case-insensitive.
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}
