package misplaced

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wincompat/wincompat/policy"
)

// TestCacheKeepsLittle: of a pod that is not a Windows one the cache keeps its name; of a Windows pod
// what the watcher reads, with messages cut; of an Event its reason, the pod and a cut message.
func TestCacheKeepsLittle(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	pod := func(windows bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", UID: "u", Annotations: map[string]string{"big": huge},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "img", Command: []string{huge},
				Env: []corev1.EnvVar{{Name: "E", Value: huge}}}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: huge}}}}},
		}
		if windows {
			p.Annotations[policy.AnnotationVersion] = "v1"
		}
		return p
	}
	var transform, events func(any) (any, error)
	for obj, c := range CacheOptions() {
		switch obj.(type) {
		case *corev1.Pod:
			transform = c.Transform
		case *corev1.Event:
			events = c.Transform
		}
	}
	out, _ := transform(pod(false))
	if p := out.(*corev1.Pod); p.Name != "p" || len(p.Annotations) != 0 || len(p.Spec.Containers) != 0 || len(p.Status.ContainerStatuses) != 0 {
		t.Errorf("a pod that is not a Windows one kept %+v", p)
	}
	out, _ = transform(pod(true))
	p := out.(*corev1.Pod)
	if !windowsPod(p) || len(p.Annotations) != 1 || p.ManagedFields != nil || p.Spec.Containers[0].Image != "img" ||
		p.Spec.Containers[0].Command != nil || p.Spec.Containers[0].Env != nil {
		t.Errorf("a Windows pod kept %+v", p)
	}
	if n := len(p.Status.ContainerStatuses[0].State.Waiting.Message); n != maxKeptMessage {
		t.Errorf("kept a message of %d bytes", n)
	}
	e, _ := events(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "n", ManagedFields: []metav1.ManagedFieldsEntry{{}}},
		Reason: "Failed", Message: huge, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", UID: "u", FieldPath: huge}})
	if ev := e.(*corev1.Event); len(ev.Message) != maxKeptMessage || ev.InvolvedObject.FieldPath != "" || ev.ManagedFields != nil || ev.InvolvedObject.UID != "u" {
		t.Errorf("an Event kept %d bytes of message, fieldPath %d bytes", len(ev.Message), len(ev.InvolvedObject.FieldPath))
	}
	e, _ = events(&corev1.Event{Reason: "Scheduled", Message: huge})
	if ev := e.(*corev1.Event); ev.Message != "" {
		t.Error("an Event of a reason never read kept its message")
	}
}

// TestEventNote: a note the API server would refuse (over 1024 bytes) is cut, never mid-character.
func TestEventNote(t *testing.T) {
	if got := eventNote("short"); got != "short" {
		t.Errorf("a short note changed: %q", got)
	}
	long := strings.Repeat("é", 600) // 1200 bytes
	got := eventNote(long)
	if len(got) > maxNote || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
		t.Errorf("cut note of %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
}
