package audit

import (
	"cmp"
	"slices"
	"strings"
)

// Report is everything the audit found. Every list is sorted, so output is stable.
type Report struct {
	Namespaces []NamespaceRow `json:"namespaces"`
	Changes    []ChangeRow    `json:"changes"`
	Objects    []ObjectRow    `json:"objects,omitempty"`
	Findings   []Finding      `json:"findings"`
	// Incomplete lists what could not be read (a namespace without list permission); the rest of the
	// report stands.
	Incomplete []string `json:"incomplete,omitempty"`
	// Notes say how the report was read when that differs from the plain way (namespace by namespace
	// because a cluster-wide list was refused, say); they do not make it incomplete.
	Notes []string `json:"notes,omitempty"`
	// Truncated counts findings left out beyond the first maxFindingsPerKind of each kind.
	Truncated map[string]int `json:"truncated,omitempty"`
	// Builds answers Options.Builds; nil without it.
	Builds *BuildsSummary `json:"builds,omitempty"`

	// onDisk holds the objects view's rows instead of Objects with Options.ObjectsOnDisk.
	onDisk *objectSpool
}

// Close removes the temporary file of Options.ObjectsOnDisk, if any.
func (r *Report) Close() error {
	if r.onDisk == nil {
		return nil
	}
	err := r.onDisk.close()
	r.onDisk = nil
	return err
}

// eachObject calls f with each row of the objects view, sorted, wherever they are kept.
func (r *Report) eachObject(f func(*ObjectRow) error) error {
	if r.onDisk != nil {
		return r.onDisk.each(f)
	}
	for i := range r.Objects {
		if err := f(&r.Objects[i]); err != nil {
			return err
		}
	}
	return nil
}

// maxFindingsPerKind bounds memory on a cluster where thousands of pods share one problem; the count of
// the rest is kept.
const maxFindingsPerKind = 1000

// NamespaceRow counts one namespace's Windows pods and workloads.
type NamespaceRow struct {
	Namespace   string `json:"namespace"`
	OptedIn     bool   `json:"optedIn"`
	WindowsPods int    `json:"windowsPods"`
	Covered     int    `json:"covered"` // carry wincompat.io/version
	Changed     int    `json:"changed"` // carry wincompat.io/changes
	Workloads   int    `json:"workloads"`
	Templates   int    `json:"templatesChanged"`
	// WouldChange counts the objects warn mode left as they came that enforce mode would change.
	WouldChange int `json:"wouldChange,omitempty"`
}

// ChangeRow counts one kind of change: "strip spec.securityContext.runAsUser: 412 objects in 9 namespaces".
type ChangeRow struct {
	Action     string `json:"action"`
	Field      string `json:"field"`
	Pods       int    `json:"pods"`
	Templates  int    `json:"templates"`
	Namespaces int    `json:"namespaces"`
}

// ObjectRow is one Windows pod or changed workload.
type ObjectRow struct {
	Namespace   string `json:"namespace"`
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Covered     bool   `json:"covered"`
	Changes     int    `json:"changes"`
	Build       string `json:"build,omitempty"`
	BuildSource string `json:"buildSource,omitempty"`
	Node        string `json:"node,omitempty"`
	NodeBuild   string `json:"nodeBuild,omitempty"`
}

// Kinds of finding.
const (
	NotCovered     = "not-covered"
	BuildMismatch  = "build-mismatch"
	PendingNoBuild = "pending-no-build"
	// Misplaced: a Windows pod that failed on its node for a reason of operating system or build
	// (misplaced.Table), from its container states or the kubelet's Warning Events.
	Misplaced          = "misplaced"
	NamespaceUnlabeled = "namespace-not-labelled"
	// NamespaceOptInMistake: a namespace label meant to opt it in (wincompat.io/enabled=yes,
	// wincompat/enabled=true) that wincompat does not act on.
	NamespaceOptInMistake = "namespace-opt-in-mistake"
	BadAnnotation         = "bad-annotation"
	// BuildNotInImage: pinned to builds none of which its images can run on.
	BuildNotInImage = "build-not-in-image"
	// LinuxOnlyImage: a Windows pod or template with an image that has no Windows entry, as its
	// registry says (--resolve-images) or admission recorded.
	LinuxOnlyImage = "linux-only-image"
	// ImageNewerRevision: a pod whose image is of a newer revision than its node's (the node's
	// status.nodeInfo.kernelVersion).
	ImageNewerRevision = "image-newer-revision"
	// CannotRunOnBuilds: with --builds, a pod or template no build asked about could run.
	CannotRunOnBuilds = "cannot-run-on-builds"
	// WouldChange: an object in a namespace in warn mode that wincompat would change in enforce mode.
	WouldChange = "would-change"
	// WithoutBuildDecision: a Windows pod the admission policies (hybrid engine) admitted while the
	// webhook did not answer.
	WithoutBuildDecision = "admitted-without-build-decision"
	// GatedPod: a pod waiting behind wincompat's scheduling gate for the leader to decide its build; past
	// the bound (Options.GateTimeout), the leader cannot.
	GatedPod = "gated-pod"
)

// Finding is something a platform engineer should look at.
type Finding struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Object    string `json:"object,omitempty"` // Kind/name
	Detail    string `json:"detail"`
}

// sink collects what every concern reports, in the order reported: findings (at most
// maxFindingsPerKind of each kind, the rest counted), notes on how the report was read, and what could
// not be read. Each concern keeps its own state; only what it reports meets here.
type sink struct {
	findings   []Finding
	perKind    map[string]int
	truncated  map[string]int
	notes      []string
	incomplete []string
}

func newSink() *sink { return &sink{perKind: map[string]int{}} }

func (s *sink) finding(kind, ns, obj, detail string) {
	if s.perKind[kind] >= maxFindingsPerKind {
		if s.truncated == nil {
			s.truncated = map[string]int{}
		}
		s.truncated[kind]++
		return
	}
	s.perKind[kind]++
	s.findings = append(s.findings, Finding{Kind: kind, Namespace: ns, Object: obj, Detail: detail})
}

func (s *sink) note(n string) { s.notes = append(s.notes, n) }

func (s *sink) notRead(what string) { s.incomplete = append(s.incomplete, what) }

// fill puts what was reported into rep, findings sorted by kind, namespace and object (in the order
// reported among equals).
func (s *sink) fill(rep *Report) {
	slices.SortStableFunc(s.findings, func(x, y Finding) int {
		return strings.Compare(x.Kind+"\x00"+x.Namespace+"\x00"+x.Object, y.Kind+"\x00"+y.Namespace+"\x00"+y.Object)
	})
	rep.Findings, rep.Truncated, rep.Notes, rep.Incomplete = s.findings, s.truncated, s.notes, s.incomplete
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
}

// objectRows are the rows of the objects view, one per Windows pod or workload; kept only when asked
// for (Options.Objects), so that memory otherwise stays bounded whatever the number of pods, and on
// disk when so asked (Options.ObjectsOnDisk).
type objectRows struct {
	keep   bool
	rows   []ObjectRow
	onDisk *objectSpool
}

func (o *objectRows) add(row ObjectRow) {
	switch {
	case o.onDisk != nil:
		o.onDisk.add(row)
	case o.keep:
		o.rows = append(o.rows, row)
	}
}

// sorted returns the rows by namespace, kind and name (none when they are on disk).
func (o *objectRows) sorted() []ObjectRow {
	slices.SortStableFunc(o.rows, compareObjects)
	return o.rows
}

// compareObjects orders rows by namespace, kind and name.
func compareObjects(x, y ObjectRow) int {
	return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Kind, y.Kind), strings.Compare(x.Name, y.Name))
}
