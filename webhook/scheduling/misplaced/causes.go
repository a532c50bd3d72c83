package misplaced

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/truncate"
)

// Cause is why a Windows pod failed on its node for reasons of operating system or build: the
// closed set of the misplaced-pods metric's cause label and of the audit's `misplaced` finding.
type Cause string

// The causes, one per row of table.
const (
	// CauseOSMismatch: the host compute service refused the container's OS version (process isolation
	// of an image of another build, HCS error 0xc0370101).
	CauseOSMismatch Cause = "os-mismatch"
	// CauseNoPlatformMatch: containerd found no entry of the image index for the node's platform.
	CauseNoPlatformMatch Cause = "no-platform-match"
	// CauseNoWindowsManifest: Docker (dockershim, cri-dockerd) found no windows/<arch> entry.
	CauseNoWindowsManifest Cause = "no-windows-manifest"
	// CauseLinuxImage: the image is a Linux one (Docker's refusal of an image of another OS).
	CauseLinuxImage Cause = "linux-image"
	// CauseExitedUnexpectedly: HCS 0xc0370106. Also seen for reasons that have nothing to do with the
	// build (volumes, memory limits, a damaged layer), so it counts only where the node's build cannot
	// run the pod's images (Row.Corroborate).
	CauseExitedUnexpectedly Cause = "exited-unexpectedly"
)

// Row is one row of the table: a message pattern the runtime writes, through the kubelet, into
// a container's state or a Warning Event, the cause it means, and what to do.
type Row struct {
	Cause Cause
	// Patterns: any one of them, as a case-insensitive substring of the message. Lower case ASCII.
	Patterns []string
	// Corroborate: the message alone does not prove a build or OS mismatch; it counts only when the
	// node's build cannot run the pod's images, or is none of the builds wincompat chose.
	Corroborate bool
	// Fix is what to do, before the build the images need and the nodes that have it are named.
	Fix string
	// Source is where the message text was seen, for the README.
	Source string
}

// table drives detection, the README table and the tests (TestMisplacedTable). Order matters
// only where a message could hold two patterns: the first row that matches wins.
var table = []Row{
	{CauseOSMismatch,
		[]string{"container operating system does not match the host operating system",
			"operating system of the container does not match the operating system of the host", "0xc0370101"},
		false,
		"run it on a node of the build its images were made for (process isolation needs the same build, or a 2025 node for 2022 images), or rebuild the image on the node's build",
		"moby/moby#35462, #36735 (0xc0370101); kubernetes/kubernetes#74019; MicrosoftDocs/Virtualization-Documentation#765 (FailedCreatePodSandBox); microsoft/dotnet-framework-docker#1265 (hcsshim::CreateComputeSystem)"},
	{CauseNoPlatformMatch,
		[]string{"no match for platform in manifest"},
		false,
		"the image has no entry this node's containerd accepts (another Windows build, or Linux only): run it on a node of a build the image has, or publish an entry for this build",
		"containerd/containerd#6989 (ltsc2022 image on a 2019 node: Failed to pull image ... no match for platform in manifest: not found), #7439, #5190"},
	{CauseNoWindowsManifest,
		[]string{"no matching manifest for windows/"},
		false,
		"the image index has no entry for this node's Windows build or architecture: run it on a node of a build the image has, or publish one",
		"docker/for-win#1949, #4518; docker-archive-public/docker.kitematic#5236 (no matching manifest for windows/amd64 10.0.17763 in the manifest list entries)"},
	{CauseLinuxImage,
		[]string{`image operating system "linux" cannot be used on this platform`},
		false,
		"the image is a Linux image: use a Windows image, or run the pod on Linux nodes",
		"microsoft/mindaro#53 (Failed to pull image ...: image operating system \"linux\" cannot be used on this platform); docker/for-win#7132"},
	{CauseExitedUnexpectedly,
		[]string{"0xc0370106"},
		true,
		"the container exited as it started; with the node's build unable to run the images, run it on a node of the build they need",
		"microsoft/hcsshim#598, #917 (hcs::System::Start ... The virtual machine or container exited unexpectedly. (0xc0370106)); also volumes and limits: microsoft/navcontainerhelper#3923, #4082"},
}

// Table returns the rows, for the README and the tests.
func Table() []Row { return slices.Clone(table) }

// Causes is the closed set of causes, in table order.
func Causes() []Cause {
	out := make([]Cause, len(table))
	for i, r := range table {
		out[i] = r.Cause
	}
	return out
}

// MaxFailureMessage bounds what is searched of one message: the runtime's text comes first (the kubelet
// prefixes a few words), and what follows it, HCS's "extra info" JSON, can be kilobytes long. Anything
// an Event or a container state holds past this is not read, so a hostile message costs bounded time.
const MaxFailureMessage = 4096

// ClassifyFailure says which row a runtime's message matches, if any. Case-insensitive; the message is
// read up to MaxFailureMessage bytes.
func ClassifyFailure(message string) (Row, bool) {
	r, _, ok := classify(message)
	return r, ok
}

// FailurePattern is the pattern of the table that message matches, "" when none: all a cache needs
// to keep of a message, since ClassifyFailure classifies the pattern as it classified the message (an
// earlier row's pattern inside it would have matched the message first).
func FailurePattern(message string) string {
	_, p, _ := classify(message)
	return p
}

func classify(message string) (Row, string, bool) {
	lower := asciiLower(clipMessage(message))
	for _, r := range table {
		for _, p := range r.Patterns {
			if strings.Contains(lower, p) {
				return r, p, true
			}
		}
	}
	return Row{}, "", false
}

// asciiLower lowers ASCII letters only: the patterns are ASCII, and strings.ToLower's Unicode rules
// could change a message's length.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Container-state reasons under which the kubelet puts a runtime's message that can be one of the
// table's: image pulls (ErrImagePull, then ImagePullBackOff with the same message), container creation
// and start (CreateContainerError, RunContainerError, containerd's terminated StartError, then
// CrashLoopBackOff), and sandbox creation (reported as CreatePodSandboxError on some kubelets).
var failureStateReasons = []string{"ErrImagePull", "ImagePullBackOff", "CreateContainerError", "RunContainerError",
	"StartError", "CrashLoopBackOff", "ContainerCannotRun", "CreatePodSandboxError"}

// Event reasons the kubelet records such a message under (pkg/kubelet/events: Failed for pulls, creation
// and start; FailedCreatePodSandBox; BackOff repeats the pull's). Other Warning reasons are never read.
var failureEventReasons = []string{"Failed", "FailedCreatePodSandBox", "BackOff", "InspectFailed"}

// FailureEventReason reports whether a Warning Event of this reason is read for a failure.
func FailureEventReason(reason string) bool { return slices.Contains(failureEventReasons, reason) }

// PodFailure is a failure found on a pod: the row, and where it was seen (the container and the reason).
type PodFailure struct {
	Row       Row
	Container string // "" for the sandbox (an Event)
	Reason    string
	Message   string // at most MaxFailureMessage bytes
}

// PodStatusFailure finds the first container, init containers first, whose current or last state says
// the runtime refused it for one of the table's reasons. Pods that have finished are not judged.
func PodStatusFailure(p *corev1.Pod) (PodFailure, bool) {
	if p.Status.Phase == corev1.PodSucceeded {
		return PodFailure{}, false
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, s := range list {
			for _, st := range []corev1.ContainerState{s.State, s.LastTerminationState} {
				reason, message := "", ""
				switch {
				case st.Waiting != nil:
					reason, message = st.Waiting.Reason, st.Waiting.Message
				case st.Terminated != nil:
					reason, message = st.Terminated.Reason, st.Terminated.Message
				}
				if !slices.Contains(failureStateReasons, reason) {
					continue
				}
				if r, ok := ClassifyFailure(message); ok {
					return PodFailure{Row: r, Container: s.Name, Reason: reason, Message: clipMessage(message)}, true
				}
			}
		}
	}
	return PodFailure{}, false
}

// EventFailure classifies a Warning Event the kubelet recorded on a pod.
func EventFailure(reason, message string) (PodFailure, bool) {
	if !FailureEventReason(reason) {
		return PodFailure{}, false
	}
	r, ok := ClassifyFailure(message)
	if !ok {
		return PodFailure{}, false
	}
	return PodFailure{Row: r, Reason: reason, Message: clipMessage(message)}, true
}

func clipMessage(s string) string { return truncate.AtRune(s, MaxFailureMessage) }

// Placement is what a misplaced pod needs: the builds its images can run on, the nodes of those builds,
// and whether its node's build is among them.
type Placement struct {
	// Needed are the builds the images need, from wincompat's record when it read them (build sources
	// image-manifest and image), else from the image tags; empty when nothing says.
	Needed []string
	// From says where Needed comes from: "record" or "tags"; "" when Needed is empty.
	From string
	// Nodes are the ready nodes whose build is in Needed (by the compatibility rule), sorted.
	Nodes []string
	// NodeRuns: the pod's node, of nodeBuild, can run what Needed says (false when Needed is empty).
	NodeRuns bool
}

// PlacementOf works out a failed pod's Placement. nodeBuilds maps the names of ready Windows nodes to
// their builds; nodeBuild is the build of the node the pod failed on ("" when unknown).
func PlacementOf(p *policy.Policy, pod *corev1.Pod, nodeBuild string, nodeBuilds map[string]string) Placement {
	var pl Placement
	switch pod.Annotations[policy.AnnotationBuildSource] {
	case policy.SourceImageManifest, policy.SourceImage:
		for _, b := range strings.Split(pod.Annotations[policy.AnnotationBuild], ",") {
			if b = strings.TrimSpace(b); b != "" && policy.IsBuildNumber(b) {
				pl.Needed = append(pl.Needed, b)
			}
		}
		if len(pl.Needed) > 0 {
			pl.From = "record"
		}
	}
	if len(pl.Needed) == 0 {
		var catalog []string
		for _, b := range p.Builds {
			catalog = append(catalog, b.Number)
		}
		spec := pod.Spec
		spec.NodeSelector, spec.Affinity = nil, nil // the images alone
		if run := p.CheckBuilds(&spec, nil, catalog).Runnable; len(run) > 0 && len(run) < len(catalog) {
			pl.Needed, pl.From = run, "tags"
		}
	}
	if len(pl.Needed) == 0 {
		return pl
	}
	runs := func(host string) bool {
		return slices.ContainsFunc(pl.Needed, func(b string) bool { return host == b || p.HostRuns(host, b) })
	}
	pl.NodeRuns = nodeBuild != "" && runs(nodeBuild)
	for name, b := range nodeBuilds {
		if runs(b) {
			pl.Nodes = append(pl.Nodes, name)
		}
	}
	slices.Sort(pl.Nodes)
	return pl
}

// maxNodesNamed bounds the nodes a fix names; the rest are counted.
const maxNodesNamed = 5

// Explain is the text of the finding and of the Event: the cause, what to do (the row's Fix), the
// build the images need and the nodes that have it.
func Explain(f PodFailure, node, nodeBuild string, pl Placement) string {
	var b strings.Builder
	b.WriteString(string(f.Row.Cause))
	b.WriteString(" on node ")
	b.WriteString(node)
	if nodeBuild != "" {
		b.WriteString(" (build " + nodeBuild + ")")
	}
	if f.Container != "" {
		b.WriteString(", container " + f.Container)
	}
	b.WriteString(" (" + f.Reason + "): " + f.Row.Fix)
	if len(pl.Needed) > 0 {
		b.WriteString("; its images run on build " + strings.Join(pl.Needed, " or ") + " (from the " + pl.From + ")")
		switch n := len(pl.Nodes); {
		case n == 0:
			b.WriteString("; no ready node can run them")
		case n <= maxNodesNamed:
			b.WriteString("; ready nodes that can: " + strings.Join(pl.Nodes, ", "))
		default:
			b.WriteString("; ready nodes that can: " + strings.Join(pl.Nodes[:maxNodesNamed], ", ") + " and " + strconv.Itoa(n-maxNodesNamed) + " more")
		}
	}
	return b.String()
}

// Corroborated says whether a failure counts as misplaced: a row that needs corroboration counts only
// when the node's build cannot run what the pod's images need.
func Corroborated(f PodFailure, pl Placement) bool {
	return !f.Row.Corroborate || len(pl.Needed) > 0 && !pl.NodeRuns
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// RemediationBlock says why a misplaced pod must not be deleted so that its controller makes it again,
// or "" when it may be. Never a pod that is Ready, nor a Job's. A new pod helps only if something recreates it and admission may then decide
// otherwise: wincompat decided its build from the images or the cluster (or decided none), and neither
// the pod's own spec nor a person chose the build it failed on.
func RemediationBlock(p *corev1.Pod) string {
	ref := metav1.GetControllerOfNoCopy(p)
	switch {
	case ref == nil:
		return "a bare pod: no controller would make it again"
	case ref.Kind == "DaemonSet":
		return "a DaemonSet pod: it belongs to its node"
	case ref.Kind == "Node":
		return "a static pod: the node's kubelet runs it"
	case ref.Kind == "Job":
		// The Job controller counts a deleted pod as a failure: with backoffLimit 0 the Job fails for good.
		return "a Job's pod: its Job would count the deletion as a failure"
	case p.DeletionTimestamp != nil:
		return "already being deleted"
	case PodReady(p):
		// A forged Event or a stale state must never cost a pod that serves.
		return "it is Ready"
	}
	switch src := p.Annotations[policy.AnnotationBuildSource]; src {
	case policy.SourceNodeSelector, policy.SourceRuntimeClass, policy.SourceAffinity:
		return "its own spec pins the build (" + src + "): a new pod would be pinned alike"
	case policy.SourceAnnotation, policy.SourceNamespace, policy.SourceDefault:
		return "its build was asked for (" + src + "): a new pod would get the same"
	case "":
		// Not decided by wincompat (admitted while it was down, or before a build was chosen): only a
		// build its spec names pins it.
		if policy.PinnedBuilds(&p.Spec) != nil {
			return "its own spec pins the build (nodeSelector or required node affinity)"
		}
	}
	return ""
}
