package misplaced

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// maxKeptMessage bounds what the cache keeps of one message: what policy.ClassifyFailure reads.
const maxKeptMessage = policy.MaxFailureMessage

// CacheOptions keep in the leader's memory only what the watcher reads. Pods: of a Windows pod its
// owners, wincompat's annotations, node, scheduling, images and container states (messages cut to
// 4 KiB); of every other pod its name alone. Events: only Warnings about pods (a field selector, so the
// API server filters them), and of those the reason, message (cut) and the pod they are about; of
// wincompat's own WindowsBuildMismatchDeleted also the controller and the time.
func CacheOptions() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Transform: func(obj any) (any, error) {
			if p, ok := obj.(*corev1.Pod); ok {
				return keptPod(p), nil
			}
			return obj, nil
		}},
		&corev1.Event{}: {
			Field: fields.SelectorFromSet(fields.Set{"type": corev1.EventTypeWarning, "involvedObject.kind": "Pod"}),
			Transform: func(obj any) (any, error) {
				if e, ok := obj.(*corev1.Event); ok {
					kept := &corev1.Event{Reason: e.Reason, Message: cut(e.Message), Type: e.Type,
						InvolvedObject: corev1.ObjectReference{Kind: e.InvolvedObject.Kind, Namespace: e.InvolvedObject.Namespace,
							Name: e.InvolvedObject.Name, UID: e.InvolvedObject.UID}}
					kept.Name, kept.Namespace, kept.UID, kept.ResourceVersion = e.Name, e.Namespace, e.UID, e.ResourceVersion
					if e.Reason == ReasonDeleted && e.Related != nil {
						// wincompat's own record of a deletion: its controller and when, for the owner window.
						kept.Related = &corev1.ObjectReference{Kind: e.Related.Kind, Name: e.Related.Name, UID: e.Related.UID}
						kept.EventTime, kept.LastTimestamp, kept.FirstTimestamp = e.EventTime, e.LastTimestamp, e.FirstTimestamp
					}
					if !policy.FailureEventReason(e.Reason) {
						kept.Message = ""
					}
					return kept, nil
				}
				return obj, nil
			}},
	}
}

func keptPod(p *corev1.Pod) *corev1.Pod {
	kept := &corev1.Pod{}
	kept.Name, kept.Namespace, kept.UID, kept.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	if !windowsPod(p) {
		return kept
	}
	kept.Labels, kept.OwnerReferences, kept.DeletionTimestamp = p.Labels, p.OwnerReferences, p.DeletionTimestamp
	kept.Annotations = map[string]string{}
	for _, k := range []string{policy.AnnotationVersion, policy.AnnotationBuild, policy.AnnotationBuildSource} {
		if v, ok := p.Annotations[k]; ok {
			kept.Annotations[k] = v
		}
	}
	kept.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName, NodeSelector: p.Spec.NodeSelector, Affinity: p.Spec.Affinity, OS: p.Spec.OS,
		Containers: images(p.Spec.Containers), InitContainers: images(p.Spec.InitContainers)}
	kept.Status = corev1.PodStatus{Phase: p.Status.Phase, ContainerStatuses: states(p.Status.ContainerStatuses),
		InitContainerStatuses: states(p.Status.InitContainerStatuses)}
	return kept
}

func images(cs []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image}
	}
	return out
}

func states(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, len(ss))
	for i, s := range ss {
		out[i] = corev1.ContainerStatus{Name: s.Name, State: state(s.State), LastTerminationState: state(s.LastTerminationState)}
	}
	return out
}

func state(s corev1.ContainerState) corev1.ContainerState {
	var out corev1.ContainerState
	if s.Waiting != nil {
		out.Waiting = &corev1.ContainerStateWaiting{Reason: s.Waiting.Reason, Message: cut(s.Waiting.Message)}
	}
	if s.Terminated != nil {
		out.Terminated = &corev1.ContainerStateTerminated{Reason: s.Terminated.Reason, Message: cut(s.Terminated.Message), ExitCode: s.Terminated.ExitCode}
	}
	return out
}

func cut(s string) string { return policy.CutAtRune(s, maxKeptMessage) }
