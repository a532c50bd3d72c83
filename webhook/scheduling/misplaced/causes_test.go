package misplaced

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wincompat/wincompat/policy"
)

// misplacedSamples are messages as the kubelet writes them (its prefixes: "Failed to pull image %q: ",
// "Error: ", "Failed to create pod sandbox: "), around the runtimes' texts cited in the table's sources.
var misplacedSamples = map[Cause][]string{
	CauseOSMismatch: {
		`Error: failed to create containerd task: failed to create shim task: hcs::CreateComputeSystem app: The container operating system does not match the host operating system.: unknown`,
		`Failed to create pod sandbox: rpc error: code = Unknown desc = failed to start sandbox container for pod "web": Error response from daemon: container 0238 encountered an error during CreateContainer: failure in a Windows system call: The operating system of the container does not match the operating system of the host. (0xc0370101) extra info: {"SystemType":"Container"}`,
		`HCS FAILURE 0XC0370101`,
	},
	CauseNoPlatformMatch: {
		`Failed to pull image "mcr.microsoft.com/windows/servercore:ltsc2022": rpc error: code = NotFound desc = failed to pull and unpack image "mcr.microsoft.com/windows/servercore:ltsc2022": no match for platform in manifest: not found`,
	},
	CauseNoWindowsManifest: {
		`Failed to pull image "nginx": rpc error: code = Unknown desc = no matching manifest for windows/amd64 10.0.17763 in the manifest list entries`,
	},
	CauseLinuxImage: {
		`Failed to pull image "example.com/app:0.1.1": rpc error: code = Unknown desc = image operating system "linux" cannot be used on this platform`,
	},
	CauseExitedUnexpectedly: {
		`Error: failed to start containerd task "app": hcs::System::Start app: The virtual machine or container exited unexpectedly. (0xc0370106): unknown`,
	},
}

// misplacedNearMisses are real Windows failures that are not of OS or build: none may match.
var misplacedNearMisses = []string{
	`Error: failed to create containerd task: failed to create shim task: hcs::CreateComputeSystem app: The directory name is invalid.: unknown`,
	`Error: failed to create containerd task: failed to create shim task: hcs::CreateComputeSystem : The requested operation for attach namespace failed.: unknown`,
	`Failed to pull image "example.com/app:1": rpc error: code = NotFound desc = failed to pull and unpack image "example.com/app:1": failed to resolve reference "example.com/app:1": example.com/app:1: not found`,
	`Failed to pull image "example.com/app:1": pull access denied, repository does not exist or may require authorization`,
	`no matching manifest`, // no platform named
	`image operating system "windows" cannot be used on this platform`, // a Windows image on a Linux node
	`hcs::System::Start: 0xc0370110`,
	`Failed create pod sandbox: HNS failed with error : The parameter is incorrect.`,
	`the container operating system matches the host operating system`,
}

func TestMisplacedTable(t *testing.T) {
	seen := map[Cause]bool{}
	for _, r := range Table() {
		if seen[r.Cause] {
			t.Errorf("cause %s has two rows", r.Cause)
		}
		seen[r.Cause] = true
		if len(r.Patterns) == 0 || r.Fix == "" || r.Source == "" {
			t.Errorf("row %s lacks patterns, fix or source", r.Cause)
		}
		for _, p := range r.Patterns {
			if p != asciiLower(p) {
				t.Errorf("row %s: pattern %q is not lower case", r.Cause, p)
			}
		}
		if len(misplacedSamples[r.Cause]) == 0 {
			t.Errorf("row %s has no sample message", r.Cause)
		}
	}
	for cause, msgs := range misplacedSamples {
		for _, m := range msgs {
			r, ok := ClassifyFailure(m)
			if !ok || r.Cause != cause {
				t.Errorf("%q: got %q, %v; want %s", m, r.Cause, ok, cause)
			}
		}
	}
	for _, m := range misplacedNearMisses {
		if r, ok := ClassifyFailure(m); ok {
			t.Errorf("near miss %q matched %s", m, r.Cause)
		}
	}
}

// TestMisplacedHostileMessages: a pattern past the bound is not read, and megabytes of text cost
// time linear in the bound, not the message.
func TestMisplacedHostileMessages(t *testing.T) {
	pad := strings.Repeat("x", MaxFailureMessage)
	if _, ok := ClassifyFailure(pad + "0xc0370101"); ok {
		t.Error("a pattern beyond the bound was read")
	}
	if _, ok := ClassifyFailure(pad[:MaxFailureMessage-10] + "0xc0370101"); !ok {
		t.Error("a pattern that ends at the bound was not read")
	}
	huge := strings.Repeat("no matching manifest for windows", 1<<20/32*8) // 8 MiB of near misses
	start := time.Now()
	for range 100 {
		ClassifyFailure(huge)
	}
	// Generous: 100 calls on 4 KiB each take well under a millisecond; reading 8 MiB would take seconds.
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("100 hostile messages took %v", d)
	}
	if f, ok := EventFailure("Failed", huge[:10]+"0xc0370101"+huge); !ok || len(f.Message) != MaxFailureMessage {
		t.Errorf("kept message of %d bytes (ok %v), want %d", len(f.Message), ok, MaxFailureMessage)
	}
}

func TestPodStatusFailure(t *testing.T) {
	msg := misplacedSamples[CauseOSMismatch][0]
	for name, tc := range map[string]struct {
		status corev1.PodStatus
		want   bool
	}{
		"waiting CreateContainerError": {corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: msg}}}}}, true},
		"last state StartError, now CrashLoopBackOff": {corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: "init",
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "StartError", Message: msg}}}}}, true},
		"another reason with the text": {corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", Message: msg}}}}}, false},
		"succeeded": {corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: msg}}}}}, false},
	} {
		_, got := PodStatusFailure(&corev1.Pod{Status: tc.status})
		if got != tc.want {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
	if _, ok := EventFailure("FailedScheduling", msg); ok {
		t.Error("an Event reason the kubelet does not use for runtime failures was read")
	}
}

func TestPlacementAndFix(t *testing.T) {
	p := policy.Default()
	nodes := map[string]string{"win-2019": "10.0.17763", "win-2022": "10.0.20348", "win-2025": "10.0.26100"}
	recorded := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{policy.AnnotationBuild: "10.0.20348", policy.AnnotationBuildSource: policy.SourceImageManifest}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}
	pl := PlacementOf(p, recorded, "10.0.17763", nodes)
	if pl.From != "record" || pl.NodeRuns || strings.Join(pl.Nodes, ",") != "win-2022,win-2025" {
		t.Errorf("recorded: %+v", pl)
	}
	tagged := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/servercore:ltsc2019"}}}}
	pl = PlacementOf(p, tagged, "10.0.20348", nodes)
	if pl.From != "tags" || pl.NodeRuns || strings.Join(pl.Nodes, ",") != "win-2019" {
		t.Errorf("tagged: %+v", pl)
	}
	unknown := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}
	if pl := PlacementOf(p, unknown, "10.0.20348", nodes); len(pl.Needed) != 0 {
		t.Errorf("untagged image: %+v", pl)
	}
	f, _ := EventFailure("Failed", misplacedSamples[CauseExitedUnexpectedly][0])
	if Corroborated(f, PlacementOf(p, unknown, "10.0.20348", nodes)) {
		t.Error("0xc0370106 counted with nothing saying the node cannot run the images")
	}
	if !Corroborated(f, PlacementOf(p, tagged, "10.0.20348", nodes)) {
		t.Error("0xc0370106 not counted on a node that cannot run the image")
	}
	got := Explain(f, "win-2022", "10.0.20348", PlacementOf(p, tagged, "10.0.20348", nodes))
	for _, want := range []string{"exited-unexpectedly", "win-2022 (build 10.0.20348)", "run on build 10.0.17763 (from the tags)", "ready nodes that can: win-2019"} {
		if !strings.Contains(got, want) {
			t.Errorf("fix %q lacks %q", got, want)
		}
	}
}

func TestRemediationBlock(t *testing.T) {
	rs := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "u", Controller: new(true)}}
	ds := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u", Controller: new(true)}}
	job := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "once", UID: "u", Controller: new(true)}}
	notController := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "u"}}
	pinned := corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelWindowsBuild: "10.0.17763"}}
	for name, tc := range map[string]struct {
		owners      []metav1.OwnerReference
		source      string
		spec        corev1.PodSpec
		ready       bool
		wantBlocked bool
	}{
		"ReplicaSet, build from the images":  {rs, policy.SourceImageManifest, pinned, false, false},
		"ReplicaSet, build from the tags":    {rs, policy.SourceImage, pinned, false, false},
		"ReplicaSet, the only cluster build": {rs, policy.SourceCluster, pinned, false, false},
		"ReplicaSet, no decision, no pin":    {rs, "", corev1.PodSpec{}, false, false},
		"ReplicaSet, no decision, own pin":   {rs, "", pinned, false, true},
		"ReplicaSet, pinned by nodeSelector": {rs, policy.SourceNodeSelector, pinned, false, true},
		"ReplicaSet, pinned by RuntimeClass": {rs, policy.SourceRuntimeClass, pinned, false, true},
		"ReplicaSet, asked by annotation":    {rs, policy.SourceAnnotation, pinned, false, true},
		"ReplicaSet, the policy's default":   {rs, policy.SourceDefault, pinned, false, true},
		"bare pod":                           {nil, policy.SourceImageManifest, pinned, false, true},
		"owner that is not the controller":   {notController, policy.SourceImageManifest, pinned, false, true},
		"DaemonSet":                          {ds, policy.SourceImageManifest, pinned, false, true},
		"Job":                                {job, policy.SourceImageManifest, corev1.PodSpec{}, false, true},
		"Ready, build from the images":       {rs, policy.SourceImageManifest, corev1.PodSpec{}, true, true},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.owners}, Spec: tc.spec}
		if tc.ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		if tc.source != "" {
			p.Annotations = map[string]string{policy.AnnotationBuildSource: tc.source}
		}
		if got := RemediationBlock(p); (got != "") != tc.wantBlocked {
			t.Errorf("%s: %q, want blocked %v", name, got, tc.wantBlocked)
		}
	}
}
