package policy

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Operation is the admission operation the object arrives with.
type Operation string

const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
)

// Namespace holds the facts of the object's namespace that decisions depend on.
type Namespace struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

// Cluster holds what the server knows about the cluster. Offline (wincompat mutate) it is nil, and every
// decision that would need it falls back as build_source.go orders it.
type Cluster struct {
	// Builds are the Windows builds of ready nodes.
	Builds []string
	// RuntimeClasses are the RuntimeClasses that exist, by name.
	RuntimeClasses map[string]RuntimeClass
	// Revisions are, for each build of Builds, the highest revision (the fourth number of
	// status.nodeInfo.kernelVersion) among its ready nodes; a build none of whose nodes reports one is
	// absent. An image of a newer revision is reported failing on those nodes (RuleImageNewerRevision).
	Revisions map[string]int
	// WindowsTaints are the distinct taints of Windows nodes, ready or joining, sorted; the policy decides which a
	// Windows pod tolerates (WindowsPodsTolerate).
	WindowsTaints []corev1.Taint
}

// RuntimeClass is what scheduling decisions need of a RuntimeClass.
type RuntimeClass struct {
	// NodeSelector is the class's scheduling.nodeSelector. The RuntimeClass admission plugin merges it into
	// the pod's and rejects the pod when a key has another value there.
	NodeSelector map[string]string
	// Handler is the class's handler: the CRI runtime handler that runs its pods. The Hyper-V isolated
	// classes are found by it (HyperVHandler), never by their name.
	Handler string
	// Tolerations are the class's scheduling.tolerations.
	Tolerations []corev1.Toleration
	// Overhead is the class's overhead.podFixed: the RuntimeClass admission plugin refuses a pod naming
	// the class whose spec.overhead differs.
	Overhead corev1.ResourceList
}

// Facts are everything outside the object that a decision depends on.
type Facts struct {
	Operation Operation
	Namespace Namespace
	Cluster   *Cluster
	// Images is what registries say of the pod's images, keyed by the reference as the pod spells it
	// (see Policy.ImagesToLookUp). nil offline or when image resolution is off: builds then come from tags.
	Images map[string]Image
	// Version is stamped into wincompat.io/version on every Windows pod processed.
	Version string
	// Gate lets a pod whose images are pending wait behind SchedulingGate, for the leader to decide its
	// build after admission (build_gate.go). Only a server that runs that leader sets it: offline
	// (`wincompat mutate`) nothing would ever remove the gate.
	Gate bool
	// afterCreation: the pod is stored and gated, and only what Kubernetes lets change on a gated pod
	// may change (Ungate).
	afterCreation bool
}

// Decision says what Decide did.
type Decision struct {
	// Windows is true when the object is a Windows pod (or template) in scope; Linux when it chose no
	// operating system and was pinned to Linux; otherwise Skipped says why.
	Windows bool
	Linux   bool
	Skipped string
	// Changes found in this pass, including warnings; already recorded in the object's annotations.
	Changes []Change
	// Build and BuildSource are the chosen build, for pods: one build, or several joined by commas when
	// the pod may run on any of them (required node affinity rather than a nodeSelector).
	Build       string
	BuildSource string
	// changesJSON is Changes rendered, when the object's record holds exactly them.
	changesJSON string
	// Gated: the pod leaves admission behind SchedulingGate, its build to be decided by the leader.
	Gated bool
	// Denied, when set, is why the pod must be refused (imagesWithoutWindows: deny). The object is left
	// as it came. It is the reason alone: DeniedMessage is what the user is shown.
	Denied string
}

// Handled reports whether wincompat decided on the object, as a Windows or as a Linux one.
func (d Decision) Handled() bool { return d.Windows || d.Linux }

// ChangesJSON renders Changes as EncodeChanges does, a version 3 record. An object's first pass records
// exactly its changes, and that rendering is reused, so the audit annotation costs no second one.
func (d Decision) ChangesJSON() string {
	if d.changesJSON != "" {
		return d.changesJSON
	}
	return EncodeChanges(d.Changes)
}

// Warnings renders the decision's admission warnings.
func (d Decision) Warnings() []string { return Warnings(d.Changes) }

// WouldWarnings renders them for warn mode, where nothing was changed; a refusal is the one warning.
func (d Decision) WouldWarnings() []string { return AdmissionWarnings(d.WouldMessages()) }

// DeniedMessage renders the refusal as the user is shown it (the admission response, `wincompat
// mutate`), marked as wincompat's like every warning; "" when the object is not refused.
func (d Decision) DeniedMessage() string {
	if d.Denied == "" {
		return ""
	}
	return "wincompat: " + d.Denied
}

// UnsupportedKindError is returned for objects that carry no pod spec wincompat knows.
type UnsupportedKindError struct{ Type string }

func (e *UnsupportedKindError) Error() string {
	return fmt.Sprintf("unsupported object %s: wincompat handles Pods and the pod templates of Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob, ReplicationController and PodTemplate", e.Type)
}

// Decide applies the policy to obj in place. obj is a *corev1.Pod or a pointer to one of the eight
// workload kinds; anything else is an *UnsupportedKindError. Decide does no I/O.
func (p *Policy) Decide(obj any, facts Facts) (Decision, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		return p.decidePod(pod, facts), nil
	}
	tpl, err := PodTemplateOf(obj)
	if err != nil {
		return Decision{}, err
	}
	if tpl == nil {
		return Decision{Skipped: "no pod template"}, nil
	}
	return p.decideTemplate(tpl, facts), nil
}

// PodTemplateOf returns the pod template of a workload object (nil for a ReplicationController without
// one).
func PodTemplateOf(obj any) (*corev1.PodTemplateSpec, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template, nil
	case *appsv1.ReplicaSet:
		return &o.Spec.Template, nil
	case *appsv1.StatefulSet:
		return &o.Spec.Template, nil
	case *appsv1.DaemonSet:
		return &o.Spec.Template, nil
	case *batchv1.Job:
		return &o.Spec.Template, nil
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template, nil
	case *corev1.ReplicationController:
		return o.Spec.Template, nil // nil when the controller has no template yet
	case *corev1.PodTemplate:
		return &o.Template, nil
	default:
		return nil, &UnsupportedKindError{Type: fmt.Sprintf("%T", obj)}
	}
}

// decideTemplate gives a workload's pod template what validation needs: the Windows trigger, the strip
// table, the runAsUser intent rule (which must run where runAsUser is removed, or the intent is lost
// before any Pod exists) and the removal of mount propagation (Bidirectional is invalid once privileged
// is stripped). Scheduling and the other rewrites happen when the Pod itself is created; the template
// is warned about them, and about what the readiness checks find in the pods it will make.
func (p *Policy) decideTemplate(tpl *corev1.PodTemplateSpec, facts Facts) Decision {
	if d, handled := p.decideLinux(&tpl.ObjectMeta, &tpl.Spec, facts, false); handled {
		return d
	}
	if why := p.inScope(&tpl.ObjectMeta, facts.Namespace); why != "" {
		return Decision{Skipped: why}
	}
	rec := newRecorder(&tpl.ObjectMeta, AnnotationTemplateChanges, &tpl.Spec)
	if why := p.windowsTrigger(&tpl.Spec, facts.Namespace, rec); why != "" {
		return Decision{Skipped: why}
	}
	p.keepNonRootIntent(&tpl.Spec, rec)
	stripLinuxOnly(&tpl.Spec, rec)
	dropMountPropagation(&tpl.Spec, rec)
	dropStopSignal(&tpl.Spec, rec)
	// On the template, so that every pod carries the opt-outs when it is created: injectors' webhooks
	// may run before wincompat's on the pod itself.
	p.optOutOfInjectors(&tpl.ObjectMeta, rec)
	p.checkTemplate(tpl, facts, rec)
	record := recordChanges(&tpl.ObjectMeta, AnnotationTemplateChanges, rec.changes)
	return Decision{Windows: true, Changes: rec.changes, changesJSON: record}
}

func (p *Policy) decidePod(pod *corev1.Pod, facts Facts) Decision {
	if d, handled := p.decideLinux(&pod.ObjectMeta, &pod.Spec, facts, true); handled {
		return d
	}
	if why := p.inScope(&pod.ObjectMeta, facts.Namespace); why != "" {
		return Decision{Skipped: why}
	}
	rec := newRecorder(&pod.ObjectMeta, AnnotationChanges, &pod.Spec)
	if facts.Operation == Update {
		// Only pods/ephemeralcontainers reaches us on UPDATE, and the API server ignores every other
		// field there, so only new ephemeral containers can need (and take) a change.
		if pod.Spec.OS == nil || pod.Spec.OS.Name != corev1.Windows {
			return Decision{Skipped: "not a Windows pod"}
		}
		stripEphemeral(&pod.Spec, rec)
		return Decision{Windows: true, Changes: rec.changes}
	}
	why, inferred := p.windowsReason(&pod.Spec, facts.Namespace)
	if why != "" {
		return Decision{Skipped: why}
	}
	images := p.containerImages(&pod.Spec, facts)
	for _, ci := range images {
		if !ci.linuxOnly() {
			continue
		}
		if p.ImagesWithoutWindows == ImagesWithoutWindowsDeny {
			return Decision{Windows: true, Denied: ci.owner() + ": image " + ci.describe() + " has no Windows entry and can never run on a Windows node; use a Windows image, or set imagesWithoutWindows: warn in the policy"}
		}
		if !rec.room(RuleLinuxOnlyImage) {
			continue
		}
		rec.add(Change{Action: Warn, Path: ci.imagePath(), Reason: linuxOnlyImageReason(ci.shown(), ci.platformsDescribed()), Rule: RuleLinuxOnlyImage})
	}
	if p.ImagesWithoutWindows == ImagesWithoutWindowsDeny {
		// An image wincompat could not check because of its own load may be one deny refuses: admitting
		// it would make deny hold only while wincompat is idle, and anyone creating pods can keep it
		// busy. The refusal is temporary; controllers retry pod creation.
		for _, ci := range images {
			if ci.busy {
				return Decision{Windows: true, Denied: ci.owner() + ": image " + ci.shown() + " could not be checked for a Windows entry now (" + ci.lookupErr + ") and the policy refuses images without one (imagesWithoutWindows: deny); retry in a few seconds"}
			}
		}
	}
	recordMirrors(images, rec)
	if inferred != "" {
		p.setWindowsOS(&pod.Spec, rec, inferred)
	}
	p.keepNonRootIntent(&pod.Spec, rec)
	stripLinuxOnly(&pod.Spec, rec)
	rewriteForWindows(pod, rec)
	p.satisfyRestricted(&pod.Spec, facts.Namespace, rec)
	// After every rule that names a user, so that it fills only what they left; opted into (rewrite_narrow.go).
	p.nameUserForRunAsNonRoot(&pod.Spec, rec)
	p.limitMemory(&pod.Spec, rec)
	p.optOutOfInjectors(&pod.ObjectMeta, rec)
	build, source := p.schedule(pod, facts, images, rec)
	// Last: a field a rewrite above set (a user for Pod Security restricted) is no longer a finding.
	checkReadiness(&pod.Spec, rec)

	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationVersion] = facts.Version
	// Like the version, not a change of the pod's: it says who admitted it, so it is not recorded.
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[LabelOS] = string(corev1.Windows)
	if build != "" {
		pod.Annotations[AnnotationBuild] = build
		pod.Annotations[AnnotationBuildSource] = source
	}
	record := recordChanges(&pod.ObjectMeta, AnnotationChanges, rec.changes)
	return Decision{Windows: true, Changes: rec.changes, Build: build, BuildSource: source, Gated: Gated(pod), changesJSON: record}
}

// stripEphemeral applies the container rows of the strip table to ephemeral containers only.
func stripEphemeral(spec *corev1.PodSpec, rec *recorder) {
	only := corev1.PodSpec{EphemeralContainers: spec.EphemeralContainers}
	stripLinuxOnly(&only, rec)
}

// recorder collects changes in the order they are made.
type recorder struct {
	changes []Change
	warned  map[Rule]int // warnings recorded, by rule
}

// newRecorder is a recorder for an object whose record is under key. One that wincompat has not
// changed yet gets room for the changes a pod of spec's containers usually gets (a chart's pod of two:
// 22), so that recording them does not grow the list again and again; one it changed before (hybrid's
// pods, which the admission policies changed) usually gets a few, and no room ahead.
func newRecorder(meta *metav1.ObjectMeta, key string, spec *corev1.PodSpec) *recorder {
	if _, recorded := meta.Annotations[key]; recorded {
		return &recorder{}
	}
	return &recorder{changes: make([]Change, 0, min(16+4*(len(spec.InitContainers)+len(spec.Containers)), maxPreallocatedChanges))}
}

// maxPreallocatedChanges bounds the room a recorder takes ahead: a pod of thousands of containers must not
// reserve four changes for each before one is found.
const maxPreallocatedChanges = 256

// room says whether a warning of rule would still be recorded: a caller checks it before building a
// warning's reason once per container.
func (r *recorder) room(rule Rule) bool { return r.warned[rule] < maxFindingsPerRow }

// add records c; past maxFindingsPerRow warnings of one rule it drops the warning (a change made is always
// recorded): one image or one container repeated thousands of times says nothing new after the first few.
func (r *recorder) add(c Change) {
	if c.Action == Warn {
		if r.warned == nil {
			r.warned = map[Rule]int{}
		}
		if r.warned[c.Rule] >= maxFindingsPerRow {
			return
		}
		r.warned[c.Rule]++
	}
	if len(r.changes) == cap(r.changes) {
		// Doubled: append grows a long slice by a quarter, which allocates five times what it keeps.
		r.changes = slices.Grow(r.changes, max(len(r.changes), 16))
	}
	r.changes = append(r.changes, c)
}

// recordChanges merges found into the record under key. A record that does not parse (edited by hand)
// is replaced rather than trusted; the lost entries are past decisions, not state we depend on. An
// earlier record is kept as it was, and the new changes written after it (appendRecord), as the
// admission policies keep it (they cannot rewrite it). It returns the record written when that is found
// alone, and "" otherwise.
func recordChanges(meta *metav1.ObjectMeta, key string, found []Change) string {
	if len(found) == 0 {
		return ""
	}
	var prior string
	kind := noRecord
	var held []Change
	if s, ok := meta.Annotations[key]; ok {
		var err error
		if kind, held, err = decodeRecord(s); err != nil || kind == noRecord {
			kind, held = noRecord, nil
		}
		prior = s
	}
	merged, added := mergeChanges(held, found)
	if !added {
		return ""
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	record := appendRecord(prior, kind, merged[len(held):])
	meta.Annotations[key] = record
	if len(held) > 0 || len(merged) != len(found) { // an earlier record, or one change found twice
		return ""
	}
	return record
}

// linuxOnlyImageReason words the warning recorded for an image with no Windows entry; platforms are
// its entries as describedImage lists them. RecordedLinuxOnly reads the record back through this
// function alone, so a rewording here is a rewording there. A variable only so that a test can reword it.
var linuxOnlyImageReason = func(image, platforms string) string {
	return describedImage(image, platforms) + " has no Windows entry: it cannot run on a Windows node"
}

// RecordedLinuxOnly finds, among the changes recorded on a pod, the warning that the image of the
// container at containerPath (spec.containers[NAME]) has no Windows entry, and returns the image as the
// warning describes it. A warning about another image does not count: a container's image can be
// changed after admission, which records nothing then. The warning is recognised by its structure: the
// reason linuxOnlyImageReason gives for this image, whatever the platforms between.
func RecordedLinuxOnly(changes []Change, containerPath, image string) (string, bool) {
	// A NUL marks where the platforms go. An image holding one is no valid reference, and at worst is
	// not found: the comparison below keeps every match exact.
	const hole = "\x00"
	before, after, _ := strings.Cut(linuxOnlyImageReason(image, hole), hole)
	for _, c := range changes {
		if c.Action != Warn || c.Path != containerPath+".image" || len(c.Reason) < len(before)+len(after) ||
			!strings.HasPrefix(c.Reason, before) || !strings.HasSuffix(c.Reason, after) {
			continue
		}
		platforms := c.Reason[len(before) : len(c.Reason)-len(after)]
		if linuxOnlyImageReason(image, platforms) == c.Reason {
			return describedImage(image, platforms) + " has no Windows entry", true
		}
	}
	return "", false
}
