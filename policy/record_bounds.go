package policy

import (
	"strconv"

	"github.com/wincompat/wincompat/policy/truncate"
)

// What a change keeps of the pod author's strings. Mutating admission runs before validation, so a
// review may carry a volume name of 200 KB or 20,000 items of one volume: a path that repeated such a
// name for each item would make one review allocate gigabytes. Every name a path carries is clipped,
// every row's warnings are capped, and a path is built only for what is recorded, so that what one
// decision allocates stays a small multiple of the review's size (record_bounds_test.go measures it for
// every row).

// maxNameBytes bounds a name inside a record path's brackets: the longest name validation accepts for
// the names a path carries (a DNS subdomain, a ConfigMap key), so that a valid pod's paths, which the
// admission policies write in full, are never clipped.
const maxNameBytes = 253

// maxFindingsPerRow bounds the warnings one row (one rule) records for one object: past it the object
// says what is wrong often enough, and a pod of 10,000 containers must not make a record of 10,000
// entries. Detectors stop scanning there too.
const maxFindingsPerRow = 32

// clipName cuts a name to maxNameBytes on a rune boundary, marked as cut.
func clipName(s string) string { return clipMarked(s, maxNameBytes) }

// clipMarked cuts s to at most n bytes on a rune boundary, ending in clipMark when it was cut.
func clipMarked(s string, n int) string { return truncate.Marked(s, n, clipMark) }

// named is "[name]" appended to a path, the name clipped.
func named(path, name string) string { return path + "[" + clipName(name) + "]" }

// indexed is "[i]" appended to a path, for the lists whose elements have no name.
func indexed(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// containerAt is where a container is in its pod spec, for its record paths. A path is built only when
// a change is recorded: visiting every container on every pass allocates nothing.
type containerAt struct {
	list string // containers, initContainers or ephemeralContainers
	name string
}

// path is the container's record path followed by field: spec.containers[app].securityContext.
func (at containerAt) path(field string) string {
	return "spec." + at.list + "[" + clipName(at.name) + "]" + field
}

// volumePath is the record path of the volume named name followed by field.
func volumePath(name, field string) string { return "spec.volumes[" + clipName(name) + "]" + field }
