package misplaced

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/truncate"
)

// Bounds on what the cache keeps of one string. The API server validates names (253), label values
// (63) and the namespace of an Event, but not an Event's reason, the names and UID of the object it is
// about, an image or a container's state: anyone who may create Events, or pods, chooses those lengths.
const (
	maxName  = 253  // longer names no object, so what is longer is dropped, never cut
	maxUID   = 64   // a UID is 36 bytes
	maxShort = 64   // reasons, kinds, API versions, wincompat's version and build source
	maxLong  = 1024 // an image reference (the registry allows 255 for the name, 128 for the tag), a build list
)

// CacheOptions keep in the leader's memory only what the watcher reads, every string bounded. Pods:
// those labelled policy.LabelOS=windows alone (sweep.go), and of a Windows pod its controller, wincompat's annotations, the skip label, node, the build and OS terms of
// its scheduling, images, readiness and container states (of a message only the pattern of the table
// it matches); of every other pod its name alone. Events have an informer of their own (events.go).
func CacheOptions() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}: {
			// Only the pods either engine admitted as Windows pods (sweep.go finds the others).
			Label: labels.SelectorFromSet(labels.Set{policy.LabelOS: string(corev1.Windows)}),
			Transform: func(obj any) (any, error) {
				if p, ok := obj.(*corev1.Pod); ok {
					return keptPod(p), nil
				}
				return obj, nil
			}},
	}
}

// readEvent: the watcher reads Events of this reason, about a pod that can exist.
func readEvent(e *corev1.Event) bool {
	read := FailureEventReason(e.Reason) || e.Reason == ReasonMismatch || e.Reason == ReasonDeleted
	o := e.InvolvedObject
	return read && o.Kind == "Pod" && o.Namespace == e.Namespace && len(o.Name) <= maxName && len(o.UID) <= maxUID
}

// keptEvent is what the Event informer keeps of an Event: the reason, the pod it is about and the
// pattern its message matches, and of wincompat's own WindowsBuildMismatchDeleted also the controller
// and the time; of an Event the watcher does not read (the informer's filter drops those) its name.
func keptEvent(e *corev1.Event) *corev1.Event {
	kept := &corev1.Event{}
	kept.Name, kept.Namespace, kept.UID, kept.ResourceVersion = e.Name, e.Namespace, e.UID, e.ResourceVersion
	if len(kept.UID) > maxUID {
		kept.UID = ""
	}
	if !readEvent(e) {
		return kept
	}
	kept.Reason, kept.Type = e.Reason, corev1.EventTypeWarning
	kept.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name, UID: e.InvolvedObject.UID}
	if FailureEventReason(e.Reason) {
		kept.Message = FailurePattern(e.Message)
	}
	if r := e.Related; e.Reason == ReasonDeleted && r != nil && len(r.Kind) <= maxShort && len(r.Name) <= maxName && len(r.UID) <= maxUID {
		// wincompat's own record of a deletion: its controller and when, for the owner window.
		kept.Related = &corev1.ObjectReference{Kind: r.Kind, Name: r.Name, UID: r.UID}
		kept.EventTime, kept.LastTimestamp, kept.FirstTimestamp = e.EventTime, e.LastTimestamp, e.FirstTimestamp
	}
	return kept
}

func keptPod(p *corev1.Pod) *corev1.Pod {
	kept := &corev1.Pod{}
	kept.Name, kept.Namespace, kept.UID, kept.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	if !windowsPod(p) {
		return kept
	}
	kept.DeletionTimestamp = p.DeletionTimestamp
	if v, ok := p.Labels[policy.LabelSkip]; ok {
		kept.Labels = map[string]string{policy.LabelSkip: v}
	}
	if ref := controllerRef(p); ref != nil {
		kept.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	kept.Annotations = map[string]string{}
	for k, limit := range map[string]int{policy.AnnotationVersion: maxShort, policy.AnnotationBuild: maxLong, policy.AnnotationBuildSource: maxShort} {
		if v, ok := p.Annotations[k]; ok {
			kept.Annotations[k] = truncate.AtRune(v, limit)
		}
	}
	kept.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName, NodeSelector: buildTerms(p.Spec.NodeSelector), Affinity: buildAffinity(p.Spec.Affinity),
		Containers: images(p.Spec.Containers), InitContainers: images(p.Spec.InitContainers)}
	if p.Spec.OS != nil {
		kept.Spec.OS = &corev1.PodOS{Name: corev1.OSName(truncate.AtRune(string(p.Spec.OS.Name), maxShort))}
	}
	kept.Status = corev1.PodStatus{Phase: p.Status.Phase, ContainerStatuses: states(p.Status.ContainerStatuses),
		InitContainerStatuses: states(p.Status.InitContainerStatuses)}
	if PodReady(p) {
		kept.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return kept
}

// controllerRef is the pod's controller reference, nil when it has none or one no object can match.
func controllerRef(p *corev1.Pod) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || len(ref.APIVersion) > maxShort || len(ref.Kind) > maxShort || len(ref.Name) > maxName || len(ref.UID) > maxUID {
		return nil
	}
	return &metav1.OwnerReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Controller: ref.Controller}
}

// buildTerms keeps the nodeSelector terms the watcher reads: the OS and the Windows build.
func buildTerms(selector map[string]string) map[string]string {
	var out map[string]string
	for _, k := range []string{corev1.LabelOSStable, corev1.LabelWindowsBuild} {
		if v, ok := selector[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// buildAffinity keeps of the required node affinity what policy.PinnedBuilds reads: every term (a term
// without a build expression allows every build), and in each the In expressions on the Windows build,
// without values longer than a label value (which no node has).
func buildAffinity(a *corev1.Affinity) *corev1.Affinity {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	kept := make([]corev1.NodeSelectorTerm, len(terms))
	for i, t := range terms {
		for _, e := range t.MatchExpressions {
			if e.Key != corev1.LabelWindowsBuild || e.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			values := slices.DeleteFunc(slices.Clone(e.Values), func(v string) bool { return len(v) > maxLabelValue })
			kept[i].MatchExpressions = append(kept[i].MatchExpressions, corev1.NodeSelectorRequirement{Key: e.Key, Operator: e.Operator, Values: values})
		}
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: kept}}}
}

// maxLabelValue is the API server's limit on a label value: a longer build value matches no node.
const maxLabelValue = 63

func images(cs []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name}
		if len(c.Image) <= maxLong {
			out[i].Image = c.Image // a longer one is no image reference: no tag to read a build from
		}
	}
	return out
}

// states keeps the statuses of containers whose current or last state tells a failure of the table:
// PodStatusFailure reads nothing else, and the running containers of thousands of healthy
// Windows pods are most of what a kept pod would weigh.
func states(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, s := range ss {
		kept := corev1.ContainerStatus{Name: truncate.AtRune(s.Name, maxName), State: state(s.State), LastTerminationState: state(s.LastTerminationState)}
		if tells(kept.State) || tells(kept.LastTerminationState) {
			out = append(out, kept)
		}
	}
	return out
}

// tells: a kept state has a message of the table's (state keeps no other).
func tells(s corev1.ContainerState) bool {
	return s.Waiting != nil && s.Waiting.Message != "" || s.Terminated != nil && s.Terminated.Message != ""
}

func state(s corev1.ContainerState) corev1.ContainerState {
	var out corev1.ContainerState
	if s.Waiting != nil {
		out.Waiting = &corev1.ContainerStateWaiting{Reason: truncate.AtRune(s.Waiting.Reason, maxShort), Message: FailurePattern(s.Waiting.Message)}
	}
	if s.Terminated != nil {
		out.Terminated = &corev1.ContainerStateTerminated{Reason: truncate.AtRune(s.Terminated.Reason, maxShort),
			Message: FailurePattern(s.Terminated.Message), ExitCode: s.Terminated.ExitCode}
	}
	return out
}
