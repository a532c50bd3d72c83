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

// maxHeuristicFindings bounds what one detector reports for one pod: past it the pod says what is wrong
// often enough, and a pod of 10,000 containers must not make a record of 10,000 entries. The scan stops
// there too.
const maxHeuristicFindings = 32

// maxRecordedBytes bounds one recorded string (a command element, a host path, a service name), and
// maxRecordedArgs the elements recorded of one command: enough to recognise it, small enough that the
// record stays small however long the pod's strings are.
const (
	maxRecordedBytes = 128
	maxRecordedArgs  = 4
)

// clipMark ends a recorded string or command that was cut.
const clipMark = "…"

// clipRecorded cuts s to maxRecordedBytes on a rune boundary. Invalid UTF-8 is left to encoding/json, which
// writes it as U+FFFD.
func clipRecorded(s string) string {
	if len(s) <= maxRecordedBytes {
		return s
	}
	return CutAtRune(s, maxRecordedBytes-len(clipMark)) + clipMark
}

// recordString is a found string as a finding's Value.
func recordString(s string) json.RawMessage { return jsonValue(clipRecorded(s)) }

// recordArgv is a found command as a finding's Value: its first elements, each clipped, and clipMark as
// a last element when some were left out.
func recordArgv(argv []string) json.RawMessage {
	n := min(len(argv), maxRecordedArgs)
	out := make([]string, n, n+1)
	for i := range n {
		out[i] = clipRecorded(argv[i])
	}
	if len(argv) > n {
		out = append(out, clipMark)
	}
	return jsonValue(out)
}

// findingList collects a detector's findings up to maxHeuristicFindings.
type findingList []readinessFinding

// add records a finding and says whether there is room for more.
func (l *findingList) add(path string, value json.RawMessage) bool {
	*l = append(*l, readinessFinding{Path: path, Value: value})
	return len(*l) < maxHeuristicFindings
}

// eachContainer visits init containers, containers and ephemeral containers with their record path,
// in that order, until visit returns false. It only reads: an ephemeral container is visited as a copy.
func eachContainer(spec *corev1.PodSpec, visit func(path string, c *corev1.Container) bool) {
	for i := range spec.InitContainers {
		if !visit("spec.initContainers["+spec.InitContainers[i].Name+"]", &spec.InitContainers[i]) {
			return
		}
	}
	for i := range spec.Containers {
		if !visit("spec.containers["+spec.Containers[i].Name+"]", &spec.Containers[i]) {
			return
		}
	}
	for i := range spec.EphemeralContainers {
		c := corev1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		if !visit("spec.ephemeralContainers["+c.Name+"]", &c) {
			return
		}
	}
}

// hasSuffixFold is strings.HasSuffix ignoring ASCII case: Windows file names are case-insensitive.
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}
