package e2eutil

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/controller/daemon"
	daemonutil "k8s.io/kubernetes/pkg/controller/daemon/util"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/audit"
)

// TaintStyle is how a platform taints its Windows nodes.
type TaintStyle struct {
	Name   string
	Taints []corev1.Taint
}

const (
	NSLinux   = "linux-default" // labelled wincompat.io/default-os=linux
	NSPlain   = "linux-plain"   // no label: as without wincompat
	NSWindows = "windows-apps"  // opted in, for Windows pods
	TeamNode  = "win-team"
)

// MadePod is a pod the test made as a controller would, and where it went.
type MadePod struct {
	Workload string // Kind/name
	Daemon   bool   // made by the DaemonSet logic for one node
	Chose    string // the workload's own OS choice (policy.OSSignal), "" for none
	Name     string
	Node     string // bound node, "" while not
	pending  bool
	Why      string // the scheduler's message when pending
}

// CheckJoiningNodeTaints: a Windows node that has joined but is not Ready yet (a pool scaling up) already
// carries its OS taint, and the pods created for it meanwhile must tolerate that taint, never its
// not-ready one.
func (cl *Cluster) CheckJoiningNodeTaints(t *testing.T) {
	t.Helper()
	joiningTaint := corev1.Taint{Key: corev1.LabelOSStable, Value: "Windows", Effect: corev1.TaintEffectNoSchedule}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	Create(context.Background(), t, cl.C, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-joining", Labels: map[string]string{
		corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: Build2022,
	}}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{joiningTaint, notReady}}})
	tolerates := func(p *corev1.Pod, taint corev1.Taint) bool {
		return slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logr.Discard(), &taint, false) })
	}
	var last *corev1.Pod
	cl.WaitForAdmission(t, NSWindows, WindowsPod(NSWindows, "joining"), "the joining node's OS taint", func(p *corev1.Pod, _ []string) bool {
		last = p
		return tolerates(p, joiningTaint)
	})
	if tolerates(last, notReady) {
		t.Errorf("a Windows pod tolerates the joining node's %s: %v", notReady.ToString(), last.Spec.Tolerations)
	}
}

// WaitForLinuxPin waits until wincompat's namespace cache has the default-os label: a dry-run unpinned
// pod comes back pinned to Linux.
func (cl *Cluster) WaitForLinuxPin(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: NSLinux},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "ghcr.io/example/probe:1.0"}}}}
		err := cl.C.Create(context.Background(), pod, client.DryRunAll)
		if err == nil && pod.Spec.NodeSelector[corev1.LabelOSStable] == "linux" {
			cl.Warnings.Take()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("wincompat does not pin unpinned pods in %s to Linux: %v", NSLinux, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitForTaints waits until wincompat's inventory holds the Windows nodes: a dry-run Windows pod is
// admitted with no "no ready node" warning and tolerating the style's taints.
func (cl *Cluster) WaitForTaints(t *testing.T, style TaintStyle) {
	t.Helper()
	waited := cl.WaitForAdmission(t, NSWindows, WindowsPod(NSWindows, "probe"), "the Windows nodes and their taints", func(p *corev1.Pod, w []string) bool {
		for _, taint := range style.Taints {
			if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logr.Discard(), &taint, false) }) {
				return false
			}
		}
		return !HasWarning(w, NoReadyNode(Build2022))
	})
	t.Logf("nodes and taints reached wincompat's admission after %v", waited.Round(time.Millisecond))
}

// DeployAndPlace creates every workload in ns through the API server (and so through wincompat), makes
// their pods as the controllers would from what was stored, and waits for the scheduler.
func (cl *Cluster) DeployAndPlace(t *testing.T, ns string, workloads []Workload, nodes []corev1.Node) []*MadePod {
	t.Helper()
	ctx := context.Background()
	pol := policy.Default()
	var made []*MadePod
	var pods []*corev1.Pod
	for _, w := range workloads {
		// What the workload chose itself, before wincompat: the pods of those that chose nothing are
		// the ones that must land on Linux.
		chose := osChoice(t, pol, w.Obj)
		obj := w.Obj.DeepCopy()
		obj.SetNamespace(ns)
		if err := cl.C.Create(ctx, obj); err != nil {
			t.Fatalf("%v rejected in %s: %v", w, ns, err)
		}
		if err := cl.C.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		kind, id := obj.GetKind(), obj.GetKind()+"/"+obj.GetName()
		if kind == "Pod" {
			var pod corev1.Pod
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pod); err != nil {
				t.Fatal(err)
			}
			made = append(made, &MadePod{Workload: id, Chose: chose, Name: pod.Name})
			continue
		}
		tplMap, _, err := unstructured.NestedMap(obj.Object, TemplatePaths[kind]...)
		if err != nil {
			t.Fatal(err)
		}
		var tpl corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tplMap, &tpl); err != nil {
			t.Fatal(err)
		}
		if kind == "DaemonSet" {
			var ds appsv1.DaemonSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ds); err != nil {
				t.Fatal(err)
			}
			for i := range nodes {
				if shouldRun, _ := daemon.NodeShouldRunDaemonPod(logr.Discard(), &nodes[i], &ds); !shouldRun {
					continue
				}
				pod := daemonPod(&ds, nodes[i].Name)
				pods = append(pods, pod)
				made = append(made, &MadePod{Workload: id, Daemon: true, Chose: chose, Name: pod.Name, Node: nodes[i].Name})
			}
			continue
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(kind) + "-" + obj.GetName(), Namespace: ns,
			Labels: tpl.Labels, Annotations: tpl.Annotations}, Spec: tpl.Spec}
		if kind == "StatefulSet" {
			// The StatefulSet controller adds a volume per claim template, bound to a PVC it creates. No
			// provisioner runs here, and storage is not what this test places by: an emptyDir stands in.
			claims, _, _ := unstructured.NestedSlice(obj.Object, "spec", "volumeClaimTemplates")
			for _, c := range claims {
				name, _, _ := unstructured.NestedString(c.(map[string]any), "metadata", "name")
				pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			}
		}
		pods = append(pods, pod)
		made = append(made, &MadePod{Workload: id, Chose: chose, Name: pod.Name})
	}
	for _, pod := range pods {
		if err := cl.C.Create(ctx, pod); err != nil {
			t.Fatalf("pod %s/%s rejected: %v", ns, pod.Name, err)
		}
	}
	cl.waitForScheduler(t, ns, made)
	return made
}

// osChoice is the operating system obj's pod spec chooses ("linux", "windows", or "its OS" when its
// choice is another signal policy.OSSignal knows), "" when it chooses none.
func osChoice(t *testing.T, pol *policy.Policy, obj *unstructured.Unstructured) string {
	t.Helper()
	m, _, err := unstructured.NestedMap(obj.Object, PodSpecPath(obj.GetKind())...)
	if err != nil {
		t.Fatal(err)
	}
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec); err != nil {
		t.Fatal(err)
	}
	if pol.OSSignal(&spec, nil) == "" {
		return ""
	}
	for _, l := range []string{corev1.LabelOSStable, "beta.kubernetes.io/os"} {
		if v, ok := spec.NodeSelector[l]; ok {
			return v
		}
	}
	if spec.Affinity != nil && spec.Affinity.NodeAffinity != nil && spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				if e.Key == corev1.LabelOSStable && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
					return e.Values[0]
				}
			}
		}
	}
	return "its OS"
}

// daemonPod is the pod the DaemonSet controller makes for node: its template with the controller's
// tolerations, bound to the node by node affinity, owned by the DaemonSet.
func daemonPod(ds *appsv1.DaemonSet, node string) *corev1.Pod {
	tpl := daemonutil.CreatePodTemplate(ds.Spec.Template, nil, "")
	pod := &corev1.Pod{ObjectMeta: tpl.ObjectMeta, Spec: tpl.Spec}
	pod.Name, pod.Namespace = ds.Name+"-"+node, ds.Namespace
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	pod.Spec.Affinity = daemonutil.ReplaceDaemonSetPodNodeNameNodeAffinity(pod.Spec.Affinity, node)
	return pod
}

// waitForScheduler waits until every made pod is bound or found unschedulable, and records where.
func (cl *Cluster) waitForScheduler(t *testing.T, ns string, made []*MadePod) {
	t.Helper()
	start := time.Now()
	for {
		var list corev1.PodList
		if err := cl.C.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		byName := map[string]*corev1.Pod{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		undecided := 0
		for _, m := range made {
			p := byName[m.Name]
			if p == nil {
				t.Fatalf("pod %s/%s is gone", ns, m.Name)
			}
			if p.Spec.NodeName != "" {
				m.Node = p.Spec.NodeName
			}
			m.pending = Unschedulable(p)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					m.Why = c.Message
				}
			}
			if p.Spec.NodeName == "" && !m.pending {
				undecided++
			}
		}
		if undecided == 0 {
			return
		}
		if time.Since(start) > 90*time.Second {
			t.Errorf("the scheduler had not decided on %d pods of %s after %v", undecided, ns, time.Since(start).Round(time.Second))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// PlaceWindowsPods creates n Windows chart pods in the opted-in namespace and waits for the scheduler.
func (cl *Cluster) PlaceWindowsPods(t *testing.T, n int) []*corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var made []*MadePod
	for i := range n {
		pod := WindowsChartPod(NSWindows, fmt.Sprintf("iis-%d", i), "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "iis", "log-monitor")
		if err := cl.C.Create(ctx, pod); err != nil {
			t.Fatalf("Windows pod %s rejected: %v", pod.Name, err)
		}
		made = append(made, &MadePod{Workload: "Pod/" + pod.Name, Name: pod.Name})
	}
	cl.waitForScheduler(t, NSWindows, made)
	var list corev1.PodList
	if err := cl.C.List(ctx, &list, client.InNamespace(NSWindows)); err != nil {
		t.Fatal(err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

// CheckMixedAudit: the audit reports the unpinned workloads of the plain namespace that can reach
// Windows nodes, nothing of the pinned namespace, and the team's taint no Windows pod tolerates.
func (cl *Cluster) CheckMixedAudit(t *testing.T, style TaintStyle) {
	t.Helper()
	rep, err := audit.Run(context.Background(), cl.C, audit.Options{Namespaces: []string{NSLinux, NSPlain, NSWindows}})
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]string{}
	for _, f := range rep.Findings {
		byKind[f.Kind] = append(byKind[f.Kind], f.Namespace+"/"+f.Object)
		if f.Namespace == NSLinux && (f.Kind == audit.NoOSPin || f.Kind == audit.DaemonSetOnWindows) {
			t.Errorf("%s: audit finds %s in the pinned namespace: %s %s", style.Name, f.Kind, f.Object, f.Detail)
		}
	}
	// log-shipper tolerates everything: it reaches Windows nodes whatever their taints.
	if !slices.Contains(byKind[audit.DaemonSetOnWindows], NSPlain+"/DaemonSet/log-shipper") {
		t.Errorf("%s: audit does not report DaemonSet log-shipper in %s: %v", style.Name, NSPlain, byKind)
	}
	if style.Taints == nil && !slices.Contains(byKind[audit.NoOSPin], NSPlain+"/Deployment/zoned") {
		t.Errorf("%s: audit does not report Deployment zoned in %s: %v", style.Name, NSPlain, byKind)
	}
	if style.Taints != nil && slices.Contains(byKind[audit.NoOSPin], NSPlain+"/Deployment/zoned") {
		t.Errorf("%s: audit reports Deployment zoned, whose pods cannot reach the tainted Windows nodes", style.Name)
	}
	if !slices.Contains(byKind[audit.WindowsTaintUntolerated], "/Node/"+TeamNode) {
		t.Errorf("%s: audit does not report the team's taint on %s: %v", style.Name, TeamNode, byKind)
	}
	t.Logf("%s: audit findings: %d no-os-pin, %d daemonset-on-windows, %d windows-taint-untolerated", style.Name,
		len(byKind[audit.NoOSPin]), len(byKind[audit.DaemonSetOnWindows]), len(byKind[audit.WindowsTaintUntolerated]))
}

// CheckLinuxWhileDown: with every wincompat replica gone, Linux workloads in a default-os=linux
// namespace are still created (failurePolicy Ignore), unpinned as without wincompat, and the audit
// says so.
func (cl *Cluster) CheckLinuxWhileDown(t *testing.T) {
	t.Helper()
	cl.StopServing()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "while-down", Namespace: NSLinux},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "ghcr.io/example/app:1.0"}}}}
	if err := cl.C.Create(ctx, pod); err != nil {
		t.Fatalf("an unpinned Linux pod is refused while wincompat is down: %v", err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "while-down", Namespace: NSLinux}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "while-down"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "while-down"}}, Spec: pod.Spec}}}
	if err := cl.C.Create(ctx, dep); err != nil {
		t.Fatalf("an unpinned Deployment is refused while wincompat is down: %v", err)
	}
	if pod.Spec.NodeSelector != nil || dep.Spec.Template.Spec.NodeSelector != nil {
		t.Errorf("objects admitted while wincompat is down carry a nodeSelector: %v, %v", pod.Spec.NodeSelector, dep.Spec.Template.Spec.NodeSelector)
	}
	rep, err := audit.Run(ctx, cl.C, audit.Options{Namespaces: []string{NSLinux}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Findings, func(f audit.Finding) bool { return f.Kind == audit.NoOSPin && f.Object == "Deployment/while-down" }) {
		t.Errorf("audit does not report the Deployment admitted while wincompat was down: %+v", rep.Findings)
	}
	t.Logf("wincompat down: an unpinned pod and Deployment in %s were admitted (failurePolicy Ignore) and the audit reports the Deployment", NSLinux)
}
