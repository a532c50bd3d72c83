package main

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The Windows builds of the lab's nodes: most run 2022, the build of the Windows pods' images; a quarter
// run 2019, where the misplaced pods are bound.
const (
	build2019 = "10.0.17763"
	build2022 = "10.0.20348"
)

// The runtime's refusal as the kubelet records it (misplaced.Table, os-mismatch; test/e2e uses
// the same words).
const osMismatchMessage = `Error: failed to create containerd task: failed to create shim task: hcs::CreateComputeSystem app: The container operating system does not match the host operating system.: unknown`

// nodeKind: which node j is. A fifth of the nodes are Windows, a quarter of those of build 2019.
func nodeKind(j int) (windows bool, build string) {
	if j%5 != 0 {
		return false, ""
	}
	if (j/5)%4 == 3 {
		return true, build2019
	}
	return true, build2022
}

func nodeName(j int) string {
	if w, b := nodeKind(j); w {
		return fmt.Sprintf("akswin%s%06d", b[len(b)-5:], j)
	}
	return fmt.Sprintf("aks-pool-%06d", j)
}

// newNode is node j as a kubelet registers it: the labels it sets, a Windows node's taint and windows-build
// label. Its status is written separately (nodeStatus), through the status subresource as a kubelet does.
func newNode(j int) *corev1.Node {
	windows, build := nodeKind(j)
	name := nodeName(j)
	os := "linux"
	if windows {
		os = "windows"
	}
	zone := fmt.Sprintf("westeurope-%d", j%3+1)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelOSStable: os, corev1.LabelArchStable: "amd64", corev1.LabelHostname: name,
		"beta.kubernetes.io/os": os, "beta.kubernetes.io/arch": "amd64",
		corev1.LabelInstanceTypeStable: "Standard_D8s_v5", corev1.LabelTopologyRegion: "westeurope", corev1.LabelTopologyZone: zone,
		"kubernetes.azure.com/agentpool": strings.Split(name, "-")[0], "kubernetes.azure.com/cluster": "MC_lab_scale_westeurope",
	}, Annotations: map[string]string{
		"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
		"csi.volume.kubernetes.io/nodeid": fmt.Sprintf(`{"disk.csi.azure.com":"%s","file.csi.azure.com":"%s"}`, name, name),
	}}}
	if windows {
		n.Labels[corev1.LabelWindowsBuild] = build
		n.Spec.Taints = []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}
	}
	n.Spec.PodCIDR = fmt.Sprintf("10.%d.%d.0/24", 100+j/256, j%256)
	n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
	n.Spec.ProviderID = "azure:///subscriptions/0000/resourceGroups/mc_lab/providers/Microsoft.Compute/virtualMachineScaleSets/" + name
	return n
}

// nodeStatus is what a kubelet reports: Ready, capacity, addresses, system info (a Windows node's
// kernelVersion is its build and revision) and the images it holds, the largest part of a real Node.
func nodeStatus(n *corev1.Node, j int) {
	windows, build := nodeKind(j)
	room := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("128Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	info := corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", j), SystemUUID: fmt.Sprintf("4c4c4544-%04x-4e10-8052-%012x", j%65536, j),
		BootID: fmt.Sprintf("b00d%028x", j), KernelVersion: "5.15.0-1079-azure", OSImage: "Ubuntu 22.04.5 LTS",
		ContainerRuntimeVersion: "containerd://1.7.27-1", KubeletVersion: "v1.37.2", KubeProxyVersion: "v1.37.2",
		OperatingSystem: "linux", Architecture: "amd64"}
	images := []string{"mcr.microsoft.com/oss/kubernetes/kube-proxy:v1.37.2", "mcr.microsoft.com/azuremonitor/containerinsights/ciprod:3.1.24",
		"mcr.microsoft.com/oss/kubernetes-csi/azuredisk-csi:v1.31.5", "mcr.microsoft.com/oss/kubernetes-csi/azurefile-csi:v1.31.3",
		"mcr.microsoft.com/oss/calico/node:v3.29.1", "registry.example/web:1.4.2", "registry.example/api:2.8.0",
		"docker.io/bitnami/redis:7.4.1", "docker.io/library/nginx:1.27.3", "quay.io/prometheus/node-exporter:v1.8.2",
		"registry.k8s.io/ingress-nginx/controller:v1.12.0", "mcr.microsoft.com/oss/kubernetes/pause:3.10"}
	if windows {
		rev := "2762"
		osImage := "Windows Server 2022 Datacenter"
		if build == build2019 {
			rev, osImage = "6054", "Windows Server 2019 Datacenter"
		}
		info.KernelVersion, info.OSImage, info.OperatingSystem = build+"."+rev, osImage, "windows"
		info.ContainerRuntimeVersion = "containerd://1.7.20+azure"
		images = []string{"mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "mcr.microsoft.com/windows/servercore:ltsc2022",
			"mcr.microsoft.com/windows/nanoserver:ltsc2022", "mcr.microsoft.com/dotnet/framework/aspnet:4.8-windowsservercore-ltsc2022",
			"mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image:v1.0.0", "mcr.microsoft.com/oss/kubernetes/pause:3.10",
			"mcr.microsoft.com/azuremonitor/containerinsights/ciprod:win-3.1.24", "mcr.microsoft.com/oss/kubernetes-csi/azuredisk-csi:v1.31.5-windows-hp"}
	}
	n.Status = corev1.NodeStatus{
		Capacity: room, Allocatable: room.DeepCopy(),
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.224.%d.%d", j/250, j%250+4)},
			{Type: corev1.NodeHostName, Address: n.Name}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo:        info,
	}
	for k, img := range images {
		repo, _, _ := strings.Cut(img, ":")
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("%s@sha256:%064x", repo, k+1), img},
			SizeBytes: int64(40+k*37) << 20,
		})
	}
}

// podRole says what pod i of the fill is.
type podRole int

const (
	roleLinux           podRole = iota
	roleWindows                 // admitted by wincompat: its annotations and the label policy.LabelOS
	roleLegacy                  // a Windows pod created before wincompat was installed: no label, no annotation
	roleMisplaced               // admitted by wincompat, bound to a 2019 node its 2022 images cannot run on, failing there
	roleLegacyMisplaced         // the same, created before wincompat was installed
)

func (r podRole) windows() bool { return r != roleLinux }

func (r podRole) misplaced() bool { return r == roleMisplaced || r == roleLegacyMisplaced }

// roleOf: one pod in ten is Windows (windowsEvery); of the Windows pods one in a hundred predates
// wincompat, one in 300 is misplaced, and one in 1,000 is misplaced and predates wincompat. The moduli
// never coincide (500+1000k is never 150 mod 300), so the counts are exact.
func roleOf(i, windowsEvery int) podRole {
	if i%windowsEvery != 0 {
		return roleLinux
	}
	w := i / windowsEvery
	switch {
	case w%300 == 150:
		return roleMisplaced
	case w%1000 == 500:
		return roleLegacyMisplaced
	case w%100 == 25:
		return roleLegacy
	}
	return roleWindows
}

const namespaces = 20

// namespaceName: even namespaces are opted in (wincompat.io/enabled=true). Windows pods live in those
// only, as wincompat mutates nothing elsewhere.
func namespaceName(k int) string { return fmt.Sprintf("team-%02d", k) }

func podNamespace(i int, role podRole) string {
	if role.windows() {
		return namespaceName(2 * ((i / 10) % (namespaces / 2)))
	}
	return namespaceName(i % namespaces)
}

// podFrom copies template into pod i: its name as a ReplicaSet names its pods, a Deployment of its own
// every 8 pods, bound to node.
func podFrom(template *corev1.Pod, i int, ns, node string, role podRole) *corev1.Pod {
	p := template.DeepCopy()
	deploy := fmt.Sprintf("svc-%04d", i/8)
	if role.windows() {
		deploy = fmt.Sprintf("win-%04d", i/8)
	}
	hash := fmt.Sprintf("%010x", uint32(i/8*2654435761))[:10]
	p.Namespace, p.GenerateName = ns, deploy+"-"+hash+"-"
	p.Name = fmt.Sprintf("%s%05x", p.GenerateName, i)
	p.ResourceVersion, p.UID = "", ""
	p.Labels["app.kubernetes.io/name"], p.Labels["app.kubernetes.io/instance"], p.Labels["pod-template-hash"] = deploy, deploy, hash
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: deploy + "-" + hash,
		UID: types.UID(fmt.Sprintf("5c0f7a52-8d1b-4c55-9d56-%012x", i/8)), Controller: new(true), BlockOwnerDeletion: new(true)}}
	p.Spec.NodeName = node
	return p
}

// runningStatus is what a kubelet reports of a pod that runs and is ready.
func runningStatus(p *corev1.Pod, i int, hostIP string) {
	start := metav1.NewTime(time.Now().Add(-time.Duration(i%7200) * time.Second))
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: start}
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}},
		PodIP: fmt.Sprintf("10.244.%d.%d", (i/250)%256, i%250+2), StartTime: &start, QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{cond("PodReadyToStartContainers"), cond(corev1.PodInitialized), cond(corev1.PodReady),
			cond(corev1.ContainersReady), cond(corev1.PodScheduled)}}
	p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
	for k, c := range p.Spec.Containers {
		repo, _, _ := strings.Cut(c.Image, ":")
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: fmt.Sprintf("%s@sha256:%064x", repo, k+1),
			ContainerID: fmt.Sprintf("containerd://%056x%08x", i, k), Ready: true, Started: new(true), RestartCount: int32(i % 3),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
		})
	}
}

// misplacedStatus is what a kubelet reports of a Windows pod whose containers the runtime refused.
func misplacedStatus(p *corev1.Pod, hostIP string) {
	now := metav1.Now()
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}}, StartTime: &now,
		QOSClass: corev1.PodQOSBurstable, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now}}}
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: osMismatchMessage}}})
	}
}

// podRef is what the fill keeps of a pod it created: enough for an Event about it.
type podRef struct {
	ns, name, node string
	uid            types.UID
	role           podRole
}

// eventAbout is the k-th Warning Event of the fill, about pod: the reasons a cluster's kubelets and
// scheduler record most. A misplaced pod gets the runtime's refusal (reason Failed), which the
// misplaced watcher reads.
func eventAbout(pod podRef, k int) *corev1.Event {
	reason, msg, component := "", "", "kubelet"
	switch {
	case pod.role.misplaced():
		reason, msg = "Failed", osMismatchMessage
	default:
		switch k % 6 {
		case 0:
			reason, msg = "BackOff", "Back-off restarting failed container c0 in pod "+pod.name+"_"+pod.ns+"("+string(pod.uid)+")"
		case 1:
			reason, msg = "Unhealthy", "Readiness probe failed: Get \"http://10.244.3.17:8080/ready\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
		case 2:
			reason, msg = "FailedMount", `MountVolume.SetUp failed for volume "config" : configmap "web" not found`
		case 3:
			reason, msg, component = "FailedScheduling", "0/334 nodes are available: 67 node(s) had untolerated taint {os: windows}, 267 Insufficient cpu. preemption: 0/334 nodes are available: 267 No preemption victims found for incoming pod, 67 Preemption is not helpful for scheduling.", "default-scheduler"
		case 4:
			reason, msg = "Failed", `Failed to pull image "registry.example/web:1.4.3": rpc error: code = NotFound desc = failed to pull and unpack image "registry.example/web:1.4.3": failed to resolve reference "registry.example/web:1.4.3": registry.example/web:1.4.3: not found`
		case 5:
			reason, msg = "FailedCreatePodSandBox", `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox: plugin type="azure-vnet" failed (add): IPAM Invoker Add failed with error: Failed to allocate pool`
		}
	}
	first := metav1.NewTime(time.Now().Add(-time.Duration(k%3600) * time.Second))
	last := metav1.Now()
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%016x", pod.name, uint64(k)*0x9e3779b97f4a7c15), Namespace: pod.ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.ns, Name: pod.name, UID: pod.uid, APIVersion: "v1",
			FieldPath: "spec.containers{c0}"},
		Reason: reason, Message: msg, Type: corev1.EventTypeWarning, Count: int32(k%40 + 1),
		FirstTimestamp: first, LastTimestamp: last, Source: corev1.EventSource{Component: component, Host: pod.node},
		ReportingController: component, ReportingInstance: pod.node,
	}
	if component == "default-scheduler" {
		e.Source.Host, e.ReportingInstance, e.InvolvedObject.FieldPath = "", "default-scheduler-lab", ""
	}
	return e
}
