package audit

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestMisplacedFinding: a pod whose container state, or whose kubelet Event, holds a row's message is a
// misplaced finding naming the build its image needs and the node that has it; a pod failing for another
// reason, and a 0xc0370106 on a node that can run the image, are not.
func TestMisplacedFinding(t *testing.T) {
	onNode := func(p *corev1.Pod, node string) *corev1.Pod {
		p.Spec.NodeName = node
		return p
	}
	waiting := func(p *corev1.Pod, reason, msg string) *corev1.Pod {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
		return p
	}
	event := func(name string, pod *corev1.Pod, reason, msg string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pod.Namespace}, Type: corev1.EventTypeWarning, Reason: reason, Message: msg,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
	}
	state := waiting(onNode(winPod("state", "mcr.microsoft.com/windows/servercore:ltsc2019"), "w2022"), "ErrImagePull",
		`Failed to pull image "mcr.microsoft.com/windows/servercore:ltsc2019": rpc error: code = NotFound desc = failed to pull and unpack image: no match for platform in manifest: not found`)
	sandbox := onNode(winPod("sandbox", "mcr.microsoft.com/windows/servercore:ltsc2022"), "w2019")
	sandbox.UID = types.UID("sandbox-uid")
	other := waiting(onNode(winPod("other", "mcr.microsoft.com/windows/servercore:ltsc2022"), "w2022"), "ErrImagePull", "pull access denied")
	exited := onNode(winPod("exited", "mcr.microsoft.com/windows/servercore:ltsc2022"), "w2022")
	exited.UID = types.UID("exited-uid")
	rep := run(t, Options{},
		namespace("web", map[string]string{"wincompat.io/enabled": "true"}),
		node("w2019", "10.0.17763", true), node("w2022", "10.0.20348", true),
		state, sandbox, other, exited,
		event("e1", sandbox, "FailedCreatePodSandBox", `Failed to create pod sandbox: rpc error: code = Unknown desc = hcs::CreateComputeSystem web: The container operating system does not match the host operating system.: unknown`),
		event("e2", exited, "Failed", `Error: failed to start containerd task "app": hcs::System::Start app: The virtual machine or container exited unexpectedly. (0xc0370106): unknown`),
		event("e3", other, "FailedScheduling", `0xc0370101`),
	)
	got := map[string]string{}
	for _, f := range rep.Findings {
		if f.Kind == Misplaced {
			got[f.Object] = f.Detail
		}
	}
	want := map[string][]string{
		"Pod/state":   {"no-platform-match on node w2022 (build 10.0.20348)", "run on build 10.0.17763 (from the tags); ready nodes that can: w2019", "not for remediation: a bare pod"},
		"Pod/sandbox": {"os-mismatch on node w2019", "FailedCreatePodSandBox", "run on build 10.0.20348 or 10.0.26100 (from the tags); ready nodes that can: w2022"},
	}
	if len(got) != len(want) {
		t.Errorf("misplaced findings %q, want for %d pods", got, len(want))
	}
	for obj, parts := range want {
		for _, p := range parts {
			if !strings.Contains(got[obj], p) {
				t.Errorf("%s: %q lacks %q", obj, got[obj], p)
			}
		}
	}
}
