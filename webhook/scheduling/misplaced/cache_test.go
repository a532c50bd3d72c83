package misplaced

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
		}
	}
	events = func(o any) (any, error) { return keptEvent(o.(*corev1.Event)), nil }
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
	if n := len(p.Status.ContainerStatuses); n != 0 {
		t.Errorf("kept %d container statuses whose message matches no pattern", n)
	}
	// Issue 41: the status of a container that tells a failure of the table is kept, with the pattern
	// alone; a running container's is not.
	failing := pod(true)
	failing.Status.ContainerStatuses[0].State.Waiting.Message = "hcs::CreateComputeSystem app: The container operating system does not match the host operating system." + huge
	failing.Status.ContainerStatuses = append(failing.Status.ContainerStatuses, corev1.ContainerStatus{Name: "sidecar", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	out, _ = transform(failing)
	if kept := out.(*corev1.Pod).Status.ContainerStatuses; len(kept) != 1 || kept[0].Name != "app" || len(kept[0].State.Waiting.Message) > 200 {
		t.Errorf("of a failing and a running container the cache kept %+v, want the failing one's pattern", kept)
	} else if f, ok := PodStatusFailure(out.(*corev1.Pod)); !ok || f.Row.Cause != CauseOSMismatch {
		t.Errorf("the kept pod no longer tells its failure: %+v %v", f, ok)
	}
	e, _ := events(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "n", ManagedFields: []metav1.ManagedFieldsEntry{{}}},
		Reason: "Failed", Message: huge, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "n", Name: "p", UID: "u", FieldPath: huge}})
	if ev := e.(*corev1.Event); len(ev.Message) != 0 || ev.InvolvedObject.FieldPath != "" || ev.ManagedFields != nil || ev.InvolvedObject.UID != "u" {
		t.Errorf("an Event kept %d bytes of message, fieldPath %d bytes", len(ev.Message), len(ev.InvolvedObject.FieldPath))
	}
	e, _ = events(&corev1.Event{Reason: "Scheduled", Message: huge})
	if ev := e.(*corev1.Event); ev.Message != "" {
		t.Error("an Event of a reason never read kept its message")
	}
}

// TestCacheBoundsEveryString: issue 40, finding 2. 120 Events with a 1 MB reason, in a namespace that
// never opted in, took the leader from 50 to 248 MiB. Whatever strings an Event or a Windows pod holds,
// the cache keeps a few hundred bytes of it; of an Event of a reason the watcher never reads, or about
// no pod that can exist, its name alone.
func TestCacheBoundsEveryString(t *testing.T) {
	const bound = 2048 // bytes of JSON kept per object
	huge := strings.Repeat("x", 1<<20)
	opts := CacheOptions()
	keep := func(obj client.Object) client.Object {
		if e, ok := obj.(*corev1.Event); ok {
			return keptEvent(e)
		}
		for o, c := range opts {
			if reflect.TypeOf(o) == reflect.TypeOf(obj) {
				out, err := c.Transform(obj)
				if err != nil {
					t.Fatal(err)
				}
				return out.(client.Object)
			}
		}
		t.Fatalf("no cache options for %T", obj)
		return nil
	}
	event := func(reason, message string, about corev1.ObjectReference) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "n"}, Type: corev1.EventTypeWarning,
			Reason: reason, Message: message, InvolvedObject: about}
	}
	pod := corev1.ObjectReference{Kind: "Pod", Namespace: "n", Name: "p", UID: "u"}
	for name, e := range map[string]*corev1.Event{
		"a reason of 1 MB":           event(huge, "0xc0370101", pod),
		"a reason never read":        event("Scheduled", huge, pod),
		"a pod name of 1 MB":         event("Failed", "0xc0370101", corev1.ObjectReference{Kind: "Pod", Namespace: "n", Name: huge, UID: "u"}),
		"a pod UID of 1 MB":          event("Failed", "0xc0370101", corev1.ObjectReference{Kind: "Pod", Namespace: "n", Name: "p", UID: types.UID(huge)}),
		"another namespace's pod":    event("Failed", "0xc0370101", corev1.ObjectReference{Kind: "Pod", Namespace: huge, Name: "p", UID: "u"}),
		"a message of 1 MB":          event("Failed", huge+"0xc0370101"+huge, pod),
		"a controller name of 1 MB":  {ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "n"}, Reason: ReasonDeleted, InvolvedObject: pod, Related: &corev1.ObjectReference{Kind: huge, Name: huge, UID: types.UID(huge)}},
		"wincompat's report, padded": event(ReasonMismatch, huge, pod),
	} {
		kept := keep(e).(*corev1.Event)
		if n := jsonSize(t, kept); n > bound {
			t.Errorf("%s: kept %d bytes", name, n)
		}
		if kept.Name != "e" || kept.Namespace != "n" {
			t.Errorf("%s: the informer's key lost: %s/%s", name, kept.Namespace, kept.Name)
		}
	}
	if e := keep(event("Failed", huge+"0xc0370101", pod)).(*corev1.Event); e.Reason != "Failed" || e.InvolvedObject.UID != "u" {
		t.Errorf("an Event the watcher reads lost what it reads: %+v", e)
	}
	if e := keep(event("Failed", "0xc0370101", pod)).(*corev1.Event); FailurePattern(e.Message) != "0xc0370101" {
		t.Errorf("an Event's message kept as %q, which classifies otherwise", e.Message)
	}

	labels := map[string]string{}
	for i := range 1000 {
		labels[fmt.Sprintf("label-%d", i)] = strings.Repeat("v", 63)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", UID: "u", Labels: labels,
			Annotations:     map[string]string{policy.AnnotationVersion: huge, policy.AnnotationBuild: huge, policy.AnnotationBuildSource: huge},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: huge, Kind: huge, Name: huge, UID: types.UID(huge), Controller: new(true)}}},
		Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, NodeSelector: labels,
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{huge}},
					{Key: huge, Operator: corev1.NodeSelectorOpIn, Values: []string{huge}}}}}}}},
			Containers: []corev1.Container{{Name: "app", Image: huge}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: huge, Message: huge}}}}},
	}
	kept := keep(p).(*corev1.Pod)
	if n := jsonSize(t, kept); n > bound {
		t.Errorf("a Windows pod of hostile strings: kept %d bytes", n)
	}
	if !windowsPod(kept) || RemediationBlock(kept) == "" {
		t.Errorf("a Windows pod whose controller no object can be kept as %+v: windows %v, remediation %q", kept, windowsPod(kept), RemediationBlock(kept))
	}
}

func jsonSize(t *testing.T, obj any) int {
	t.Helper()
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}
