package policy

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Gated placement: where admission cannot decide a Windows pod's build because its images' registry has
// not answered yet, the pod is admitted behind SchedulingGate instead of with a fallback build that may
// be wrong. The leader reads the images off the admission path and calls Ungate, which pins the build
// and removes the gate. Kubernetes lets little change on a stored pod: while it is gated, nodeSelector
// keys may be added, terms of required node affinity may gain requirements, tolerations may be added,
// and gates may only be removed; spec.runtimeClassName and spec.overhead never change after creation
// (pkg/apis/core/validation ValidatePodUpdate, 1.30 and later). So a gated pod carries no build pin of
// any kind (one could never be corrected), and Ungate pins with what may still be added.

// DefaultGateTimeout is how long the leader keeps a pod behind the gate without every answer before it
// removes the gate with the fallback build (`wincompat serve --gate-timeout`, the chart's
// imageResolver.gateTimeout): long enough for a registry that is slow on a busy morning, short enough
// that a pod waits minutes, not hours, for one that never answers. The audit, which reads no replica's
// flags, judges gated pods by it unless told otherwise.
const DefaultGateTimeout = 3 * time.Minute

// gatePath is where the gate is recorded.
const gatePath = "spec.schedulingGates"

// Reasons the build-gate rule records.
const (
	ReasonGated = "its images' registry has not answered yet: wincompat pins the build when it does, then removes the gate"
	// reasonDecidedAfter is recorded when the leader removes the gate with the registry's answer.
	reasonDecidedAfter = "removed: the build was decided after admission, from the registry's answer"
)

// Gated reports whether the pod carries wincompat's scheduling gate.
func Gated(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == SchedulingGate })
}

// mustGate says whether a pod being created waits behind the gate: gating is on, an image is pending,
// and nothing above the registry in buildSources decides the build without it (the pod's own pin,
// RuntimeClass, required affinity or request). A pod bound to a node (spec.nodeName: the API server
// refuses it with a gate) or made by a DaemonSet for one node is never gated.
func (p *Policy) mustGate(q *buildQuery) bool {
	pod := q.pod
	if !q.facts.Gate || q.facts.afterCreation || q.facts.Operation != Create || pod.Spec.NodeName != "" || daemonSetPod(&pod.ObjectMeta) {
		return false
	}
	if !slices.ContainsFunc(q.images, func(ci containerImage) bool { return ci.pending }) {
		return false
	}
	// The sources above the registry only read the pod; their warnings come when the gate goes.
	quiet := *q
	quiet.rec = &recorder{}
	for _, s := range buildSources {
		if s.name == SourceImageManifest {
			break
		}
		if _, decided := s.choose(p, &quiet); decided {
			return false
		}
	}
	return true
}

func daemonSetPod(meta *metav1.ObjectMeta) bool {
	ref := metav1.GetControllerOfNoCopy(meta)
	return ref != nil && ref.Kind == "DaemonSet"
}

// gate adds the gate and its label. Recorded once: in hybrid the admission policies may have added
// both (they record nothing), and a second pass finds the entry in the record.
func gate(pod *corev1.Pod, rec *recorder) {
	if !Gated(pod) {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: SchedulingGate})
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[LabelGated] = "true"
	if !recordedGate(pod) {
		rec.add(Change{Action: Inject, Path: gatePath, To: jsonValue(corev1.PodSchedulingGate{Name: SchedulingGate}), Reason: ReasonGated, Rule: RuleBuildGate})
	}
}

// recordedGate: the pod's record holds the gate's entry.
func recordedGate(pod *corev1.Pod) bool {
	s, ok := pod.Annotations[AnnotationChanges]
	if !ok {
		return false
	}
	changes, err := DecodeChanges(s)
	return err == nil && slices.ContainsFunc(changes, func(c Change) bool { return c.Rule == RuleBuildGate && c.Action == Inject })
}

// removeGate removes wincompat's gate and label, and no other gate; it reports whether there was one.
func removeGate(pod *corev1.Pod) bool {
	delete(pod.Labels, LabelGated)
	if !Gated(pod) {
		return false
	}
	pod.Spec.SchedulingGates = slices.DeleteFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == SchedulingGate })
	if len(pod.Spec.SchedulingGates) == 0 {
		pod.Spec.SchedulingGates = nil
	}
	return true
}

// Ungate decides the build of a stored pod that carries wincompat's gate and removes the gate, in
// place, changing only what Kubernetes lets change on a gated pod. facts are the server's, with the
// images' answers; overdue, when not "", says why the gate goes without every answer (the bound
// passed), and pending images then count as unread: the build comes from the tag, namespace, cluster
// or default, as at admission without gating. What cannot be done after creation is recorded instead:
// the build's RuntimeClass is not named (its nodeSelector and tolerations are pinned), and Hyper-V
// isolation is not chosen. The caller writes the difference with one patch.
//
// A pod no longer in scope (its namespace opted out, the skip label) or not a Windows pod is released:
// the gate goes and nothing else changes. Skipped then says why.
func (p *Policy) Ungate(pod *corev1.Pod, facts Facts, overdue string) Decision {
	if !Gated(pod) {
		return Decision{Skipped: "not gated by wincompat"}
	}
	why := p.inScope(&pod.ObjectMeta, facts.Namespace)
	if why == "" && (pod.Spec.OS == nil || pod.Spec.OS.Name != corev1.Windows) {
		why = "not a Windows pod"
	}
	if why != "" {
		changes := Release(pod, "removed without a build decision: "+why)
		return Decision{Skipped: why, Changes: changes}
	}
	facts.Gate, facts.afterCreation, facts.Operation = false, true, Create
	rec := newRecorder(&pod.ObjectMeta, AnnotationChanges, &pod.Spec)
	images := p.containerImages(&pod.Spec, facts)
	for _, ci := range images {
		if ci.linuxOnly() && rec.room(RuleLinuxOnlyImage) {
			// imagesWithoutWindows: deny cannot refuse a pod that exists: the warning is all there is.
			rec.add(Change{Action: Warn, Path: ci.imagePath(), Reason: linuxOnlyImageReason(ci.shown(), ci.platformsDescribed()), Rule: RuleLinuxOnlyImage})
		}
	}
	recordMirrors(images, rec)
	build, source := p.schedule(pod, facts, images, rec)
	_, versioned := pod.Annotations[AnnotationVersion]
	if !versioned {
		// Admitted by the admission policies alone: the webhook's findings were never made.
		checkReadiness(&pod.Spec, rec)
	}
	reason := reasonDecidedAfter
	if overdue != "" {
		reason = "removed without every answer from the registry: " + clipRecorded(overdue)
	}
	rec.add(Change{Action: Warn, Path: gatePath, Reason: reason, Rule: RuleBuildGate})
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if !versioned {
		pod.Annotations[AnnotationVersion] = facts.Version
	}
	if build != "" {
		pod.Annotations[AnnotationBuild] = build
		pod.Annotations[AnnotationBuildSource] = source
	}
	record := recordChanges(&pod.ObjectMeta, AnnotationChanges, rec.changes)
	return Decision{Windows: true, Changes: rec.changes, Build: build, BuildSource: source, changesJSON: record}
}

// Release removes wincompat's gate and label from a stored pod, in place, and records why; the pod's
// build stays undecided, so the scheduler may place it on any Windows build. It returns the changes
// recorded, none when the pod carries no gate of wincompat's.
func Release(pod *corev1.Pod, why string) []Change {
	if !removeGate(pod) {
		return nil
	}
	c := Change{Action: Warn, Path: gatePath, Reason: clipRecorded(why), Rule: RuleBuildGate}
	recordChanges(&pod.ObjectMeta, AnnotationChanges, []Change{c})
	return []Change{c}
}

// pinClassScheduling gives a pod that can no longer name the build's RuntimeClass what the class would
// have brought to its scheduling: its nodeSelector (which pin already set for the catalog's classes) and
// its tolerations, both only added.
func (p *Policy) pinClassScheduling(spec *corev1.PodSpec, b Build, facts Facts, rec *recorder) {
	if !p.SetRuntimeClassName || spec.RuntimeClassName != nil || b.RuntimeClass == "" {
		return
	}
	selector, tolerations := p.RuntimeClassNodeSelector(b), []corev1.Toleration(nil)
	if facts.Cluster != nil {
		rc, exists := facts.Cluster.RuntimeClasses[b.RuntimeClass]
		if !exists {
			return
		}
		selector, tolerations = rc.NodeSelector, rc.Tolerations
	}
	why := "RuntimeClass " + b.RuntimeClass + " not named: Kubernetes fixes runtimeClassName when a pod is created, and this one was created gated; its scheduling is pinned instead"
	if contradicts(spec.NodeSelector, selector) {
		return // setRuntimeClass would not have named it either
	}
	rec.add(Change{Action: Warn, Path: "spec.runtimeClassName", Reason: why, Rule: RuleBuildGate})
	for _, key := range sortedKeys(selector) {
		if _, set := spec.NodeSelector[key]; set {
			continue
		}
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[key] = selector[key]
		rec.add(Change{Action: Inject, Path: "spec.nodeSelector[" + key + "]", To: jsonValue(selector[key]), Reason: "scheduling of RuntimeClass " + b.RuntimeClass, Rule: RuleBuildGate})
	}
	for _, t := range tolerations {
		if slices.ContainsFunc(spec.Tolerations, func(o corev1.Toleration) bool { return o.MatchToleration(&t) }) {
			continue
		}
		spec.Tolerations = append(spec.Tolerations, t)
		rec.add(Change{Action: Inject, Path: "spec.tolerations", To: jsonValue(t), Reason: "scheduling of RuntimeClass " + b.RuntimeClass, Rule: RuleBuildGate})
	}
}
