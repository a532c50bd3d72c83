package e2e

// Issue 14: mixed clusters both ways, through the real kube-apiserver and kube-scheduler. Linux
// workloads that choose no operating system (the corpus charts as rendered, and hand-written Pods,
// Deployments, hook Jobs, CronJobs and DaemonSets) go to a namespace labelled
// wincompat.io/default-os=linux and to one without the label (what a cluster without wincompat does).
// Their pods are made as the controllers would make them: a ReplicaSet's or Job's pod from the stored
// template, and a DaemonSet's pods for exactly the nodes the DaemonSet controller's own
// NodeShouldRunDaemonPod picks (k8s.io/kubernetes/pkg/controller/daemon), with the node affinity and
// tolerations it adds. Windows pods go to an opted-in namespace with a policy that configures no taint
// at all. Each run repeats in a cluster whose Windows nodes are untainted (AKS), tainted GKE-style, and
// tainted os=windows; one Windows node also carries a team's taint that no Windows pod may tolerate.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/controller/daemon"
	daemonutil "k8s.io/kubernetes/pkg/controller/daemon/util"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/audit"
	"github.com/wincompat/wincompat/webhook/server"
)

// taintStyle is how a platform taints its Windows nodes.
type taintStyle struct {
	name   string
	taints []corev1.Taint
}

var taintStyles = []taintStyle{
	{"untainted", nil},
	{"gke", []corev1.Taint{{Key: "node.kubernetes.io/os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}},
	{"os-windows", []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}},
}

// teamTaint is a taint no Windows pod may tolerate: it says nothing about the operating system.
var teamTaint = corev1.Taint{Key: "dedicated", Value: "team-a", Effect: corev1.TaintEffectNoSchedule}

const (
	nsLinux   = "linux-default" // labelled wincompat.io/default-os=linux
	nsPlain   = "linux-plain"   // no label: as without wincompat
	nsWindows = "windows-apps"  // opted in, for Windows pods
	teamNode  = "win-team"
)

// mixedNodes: four Linux nodes, two Windows nodes, and a third Windows node with a team's taint.
var mixedNodes = []testNode{
	{"linux-0", "linux", ""}, {"linux-1", "linux", ""}, {"linux-2", "linux", ""}, {"linux-3", "linux", ""},
	{"win-0", "windows", build2022}, {"win-1", "windows", build2022}, {teamNode, "windows", build2022},
}

// handWritten are the unpinned Linux workloads of the reports: a bare Pod, a Deployment with its own
// required affinity, a Helm hook Job, a CronJob, a node agent DaemonSet and one that tolerates every
// taint (operator Exists), as log shippers and CNI agents do.
func handWritten() []*unstructured.Unstructured {
	podSpec := func(name string) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "ghcr.io/example/" + name + ":1.0"}}}
	}
	tpl := func(name string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: podSpec(name)}
	}
	selector := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	}
	zoned := tpl("zoned")
	zoned.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}},
	}}}
	shipper := tpl("log-shipper")
	shipper.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	hook := tpl("migrate")
	hook.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	report := tpl("report")
	report.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	objs := []client.Object{
		&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: podSpec("bare")},
		&appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Name: "zoned"},
			Spec: appsv1.DeploymentSpec{Selector: selector("zoned"), Template: zoned}},
		&batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: "migrate", Annotations: map[string]string{"helm.sh/hook": "pre-install"}},
			Spec:       batchv1.JobSpec{Template: hook}},
		&batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}, ObjectMeta: metav1.ObjectMeta{Name: "report"},
			Spec: batchv1.CronJobSpec{Schedule: "0 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: report}}}},
		&appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: metav1.ObjectMeta{Name: "node-agent"},
			Spec: appsv1.DaemonSetSpec{Selector: selector("node-agent"), Template: tpl("node-agent")}},
		&appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: metav1.ObjectMeta{Name: "log-shipper"},
			Spec: appsv1.DaemonSetSpec{Selector: selector("log-shipper"), Template: shipper}},
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			panic(err) // typed objects always convert
		}
		out[i] = &unstructured.Unstructured{Object: m}
	}
	return out
}

// madePod is a pod the test made as a controller would, and where it went.
type madePod struct {
	workload string // Kind/name
	daemon   bool   // made by the DaemonSet logic for one node
	chose    string // the workload's own OS choice (policy.OSSignal), "" for none
	name     string
	node     string // bound node, "" while not
	pending  bool
	why      string // the scheduler's message when pending
}

func TestMixedClusterBothWays(t *testing.T) {
	workloads := distinct(loadCorpusAsRendered(t))
	for _, obj := range handWritten() {
		workloads = append(workloads, workload{file: "hand-written", obj: obj})
	}
	for _, style := range taintStyles {
		t.Run(style.name, func(t *testing.T) { runMixedCluster(t, style, workloads) })
	}
}

func runMixedCluster(t *testing.T, style taintStyle, workloads []workload) {
	ctx := context.Background()
	// No taint configured: the Windows pods must tolerate what they find, and only that.
	noTaints, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaints: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl := startClusterWith(t, []controlplane.Option{controlplane.WithScheduler()}, func(o *server.Options) { o.Policy = noTaints })
	nodes := map[string]testNode{}
	for _, n := range mixedNodes {
		cl.addNode(t, n)
		nodes[n.name] = n
		if n.os == "windows" {
			taints := slices.Clone(style.taints)
			if n.name == teamNode {
				taints = append(taints, teamTaint)
			}
			setTaints(t, cl, n.name, taints)
		}
	}
	setUpNamespace(ctx, t, cl.c, nsLinux, map[string]string{policy.LabelDefaultOS: "linux"}, workloads)
	setUpNamespace(ctx, t, cl.c, nsPlain, nil, workloads)
	cl.newNamespace(t, nsWindows, map[string]string{policy.LabelEnabled: "true"})
	setUpClusterWide(ctx, t, cl.c, workloads)
	cl.waitForLinuxPin(t)
	cl.waitForTaints(t, style)

	var nodeList corev1.NodeList
	if err := cl.c.List(ctx, &nodeList); err != nil {
		t.Fatal(err)
	}
	with := cl.deployAndPlace(t, nsLinux, workloads, nodeList.Items)
	without := cl.deployAndPlace(t, nsPlain, workloads, nodeList.Items)
	windowsPods := cl.placeWindowsPods(t, 20)

	table, onWindowsWith, _ := mixedTable(with, nodes)
	tableWithout, onWindowsWithout, daemonsWithout := mixedTable(without, nodes)
	t.Logf("%s: Linux workloads that choose no operating system (corpus charts and hand-written), WITH wincompat (%s labelled %s=linux):\n%s",
		style.name, nsLinux, policy.LabelDefaultOS, table)
	t.Logf("%s: the same WITHOUT wincompat (%s):\n%s", style.name, nsPlain, tableWithout)
	if onWindowsWith > 0 {
		t.Errorf("%s: %d pods of workloads that chose no operating system are bound to or targeted at Windows nodes with wincompat, want 0", style.name, onWindowsWith)
	}
	for _, p := range with {
		if p.chose == "" && !p.daemon && (p.node == "" || nodes[p.node].os != "linux") {
			t.Errorf("%s: %s pod %s is not on a Linux node (node %q, pending: %s)", style.name, p.workload, p.name, p.node, p.why)
		}
	}
	if style.taints == nil && daemonsWithout == 0 {
		t.Errorf("untainted Windows nodes, no wincompat: no DaemonSet pod targets a Windows node; the comparison shows nothing")
	}
	if style.taints == nil && onWindowsWithout == 0 {
		t.Errorf("untainted Windows nodes, no wincompat: no pod lands on a Windows node; the comparison shows nothing")
	}
	if style.taints != nil && daemonsWithout == 0 {
		t.Errorf("%s: no wincompat: the DaemonSet that tolerates every taint targets no Windows node; the taints are not what the test thinks", style.name)
	}
	t.Logf("%s: without wincompat %d pods of unpinned workloads on or targeted at Windows nodes (%d of them DaemonSet pods); with it %d",
		style.name, onWindowsWithout, daemonsWithout, onWindowsWith)

	checkWindowsPlacement(t, style, windowsPods)
	cl.checkMixedAudit(t, style)
	if style.taints == nil {
		cl.checkLinuxWhileDown(t)
	}
	if style.name == "gke" {
		cl.checkJoiningNodeTaints(t) // last: its node would change what the checks above see
	}
}

// checkJoiningNodeTaints: a Windows node that has joined but is not Ready yet (a pool scaling up) already
// carries its OS taint, and the pods created for it meanwhile must tolerate that taint, never its
// not-ready one.
func (cl *cluster) checkJoiningNodeTaints(t *testing.T) {
	t.Helper()
	joiningTaint := corev1.Taint{Key: corev1.LabelOSStable, Value: "Windows", Effect: corev1.TaintEffectNoSchedule}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	create(context.Background(), t, cl.c, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-joining", Labels: map[string]string{
		corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: build2022,
	}}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{joiningTaint, notReady}}})
	tolerates := func(p *corev1.Pod, taint corev1.Taint) bool {
		return slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logr.Discard(), &taint, false) })
	}
	var last *corev1.Pod
	cl.waitForAdmission(t, nsWindows, windowsPod(nsWindows, "joining"), "the joining node's OS taint", func(p *corev1.Pod, _ []string) bool {
		last = p
		return tolerates(p, joiningTaint)
	})
	if tolerates(last, notReady) {
		t.Errorf("a Windows pod tolerates the joining node's %s: %v", notReady.ToString(), last.Spec.Tolerations)
	}
}

func setTaints(t *testing.T, cl *cluster, name string, taints []corev1.Taint) {
	t.Helper()
	var n corev1.Node
	if err := cl.c.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = taints
	if err := cl.c.Update(context.Background(), &n); err != nil {
		t.Fatalf("tainting %s: %v", name, err)
	}
}

// waitForLinuxPin waits until wincompat's namespace cache has the default-os label: a dry-run unpinned
// pod comes back pinned to Linux.
func (cl *cluster) waitForLinuxPin(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: nsLinux},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "ghcr.io/example/probe:1.0"}}}}
		err := cl.c.Create(context.Background(), pod, client.DryRunAll)
		if err == nil && pod.Spec.NodeSelector[corev1.LabelOSStable] == "linux" {
			cl.warnings.Take()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("wincompat does not pin unpinned pods in %s to Linux: %v", nsLinux, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForTaints waits until wincompat's inventory holds the Windows nodes: a dry-run Windows pod is
// admitted with no "no ready node" warning and tolerating the style's taints.
func (cl *cluster) waitForTaints(t *testing.T, style taintStyle) {
	t.Helper()
	waited := cl.waitForAdmission(t, nsWindows, windowsPod(nsWindows, "probe"), "the Windows nodes and their taints", func(p *corev1.Pod, w []string) bool {
		for _, taint := range style.taints {
			if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logr.Discard(), &taint, false) }) {
				return false
			}
		}
		return !hasWarning(w, noReadyNode(build2022))
	})
	t.Logf("nodes and taints reached wincompat's admission after %v", waited.Round(time.Millisecond))
}

// deployAndPlace creates every workload in ns through the API server (and so through wincompat), makes
// their pods as the controllers would from what was stored, and waits for the scheduler.
func (cl *cluster) deployAndPlace(t *testing.T, ns string, workloads []workload, nodes []corev1.Node) []*madePod {
	t.Helper()
	ctx := context.Background()
	pol := policy.Default()
	var made []*madePod
	var pods []*corev1.Pod
	for _, w := range workloads {
		// What the workload chose itself, before wincompat: the pods of those that chose nothing are
		// the ones that must land on Linux.
		chose := osChoice(t, pol, w.obj)
		obj := w.obj.DeepCopy()
		obj.SetNamespace(ns)
		if err := cl.c.Create(ctx, obj); err != nil {
			t.Fatalf("%v rejected in %s: %v", w, ns, err)
		}
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		kind, id := obj.GetKind(), obj.GetKind()+"/"+obj.GetName()
		if kind == "Pod" {
			var pod corev1.Pod
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pod); err != nil {
				t.Fatal(err)
			}
			made = append(made, &madePod{workload: id, chose: chose, name: pod.Name})
			continue
		}
		tplMap, _, err := unstructured.NestedMap(obj.Object, templatePaths[kind]...)
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
				made = append(made, &madePod{workload: id, daemon: true, chose: chose, name: pod.Name, node: nodes[i].Name})
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
		made = append(made, &madePod{workload: id, chose: chose, name: pod.Name})
	}
	for _, pod := range pods {
		if err := cl.c.Create(ctx, pod); err != nil {
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
	m, _, err := unstructured.NestedMap(obj.Object, podSpecPath(obj.GetKind())...)
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
func (cl *cluster) waitForScheduler(t *testing.T, ns string, made []*madePod) {
	t.Helper()
	start := time.Now()
	for {
		var list corev1.PodList
		if err := cl.c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		byName := map[string]*corev1.Pod{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		undecided := 0
		for _, m := range made {
			p := byName[m.name]
			if p == nil {
				t.Fatalf("pod %s/%s is gone", ns, m.name)
			}
			if p.Spec.NodeName != "" {
				m.node = p.Spec.NodeName
			}
			m.pending = unschedulable(p)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					m.why = c.Message
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

// mixedTable counts, by kind of workload, where the pods of workloads that chose no operating system
// went; pods of workloads that chose one are counted apart. It returns the table, the pods of unpinned
// workloads on (or, for DaemonSets, targeted at) Windows nodes, and how many of those are DaemonSet pods.
func mixedTable(made []*madePod, nodes map[string]testNode) (string, int, int) {
	type row struct {
		workloads                     map[string]bool
		pods, linux, windows, pending int
	}
	rows := map[string]*row{}
	var order []string
	onWindows, daemons := 0, 0
	for _, m := range made {
		key := strings.SplitN(m.workload, "/", 2)[0]
		if m.daemon {
			key = "DaemonSet pods"
		}
		if m.chose != "" {
			key = "chose " + m.chose
		}
		r := rows[key]
		if r == nil {
			r = &row{workloads: map[string]bool{}}
			rows[key] = r
			order = append(order, key)
		}
		r.workloads[m.workload] = true
		r.pods++
		switch {
		case m.node != "" && nodes[m.node].os == "windows":
			r.windows++
			if m.chose == "" {
				onWindows++
				if m.daemon {
					daemons++
				}
			}
		case m.node != "":
			r.linux++
		default:
			r.pending++
		}
	}
	slices.Sort(order)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workloads\tcount\tpods\ton Linux\ton Windows\tpending\t")
	for _, k := range order {
		r := rows[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", k, len(r.workloads), r.pods, r.linux, r.windows, r.pending)
	}
	tw.Flush()
	return b.String(), onWindows, daemons
}

// placeWindowsPods creates n Windows chart pods in the opted-in namespace and waits for the scheduler.
func (cl *cluster) placeWindowsPods(t *testing.T, n int) []*corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var made []*madePod
	for i := range n {
		pod := windowsChartPod(nsWindows, fmt.Sprintf("iis-%d", i), "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "iis", "log-monitor")
		if err := cl.c.Create(ctx, pod); err != nil {
			t.Fatalf("Windows pod %s rejected: %v", pod.Name, err)
		}
		made = append(made, &madePod{workload: "Pod/" + pod.Name, name: pod.Name})
	}
	cl.waitForScheduler(t, nsWindows, made)
	var list corev1.PodList
	if err := cl.c.List(ctx, &list, client.InNamespace(nsWindows)); err != nil {
		t.Fatal(err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

// checkWindowsPlacement: every Windows pod on a plain Windows node, none on the team's node, each
// tolerating the style's taints and never the team's.
func checkWindowsPlacement(t *testing.T, style taintStyle, pods []*corev1.Pod) {
	t.Helper()
	placed := 0
	for _, p := range pods {
		if p.Spec.NodeName == "win-0" || p.Spec.NodeName == "win-1" {
			placed++
		} else {
			t.Errorf("%s: Windows pod %s on %q, want win-0 or win-1", style.name, p.Name, p.Spec.NodeName)
		}
		if slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logr.Discard(), &teamTaint, false) }) {
			t.Errorf("%s: Windows pod %s tolerates the team's taint %s: %v", style.name, p.Name, teamTaint.ToString(), p.Spec.Tolerations)
		}
		changes, err := policy.DecodeChanges(p.Annotations[policy.AnnotationChanges])
		if err != nil {
			t.Fatalf("%s: Windows pod %s: %v", style.name, p.Name, err)
		}
		for _, taint := range style.taints {
			if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logr.Discard(), &taint, false) }) {
				t.Errorf("%s: Windows pod %s does not tolerate %s", style.name, p.Name, taint.ToString())
			}
			// The catalog's RuntimeClasses here tolerate os=windows themselves (as many clusters' do), so
			// the toleration alone proves nothing for that style: wincompat must have found the taint.
			if !slices.ContainsFunc(changes, func(c policy.Change) bool {
				return c.Path == "spec.tolerations" && strings.Contains(c.Reason, taint.ToString()+" found on Windows nodes")
			}) {
				t.Errorf("%s: Windows pod %s: no toleration of %s recorded as found on the nodes: %v", style.name, p.Name, taint.ToString(), changes)
			}
		}
	}
	t.Logf("%s: %d of %d Windows pods placed on Windows nodes with no taint configured, none on %s (tainted %s)", style.name, placed, len(pods), teamNode, teamTaint.ToString())
}

// checkMixedAudit: the audit reports the unpinned workloads of the plain namespace that can reach
// Windows nodes, nothing of the pinned namespace, and the team's taint no Windows pod tolerates.
func (cl *cluster) checkMixedAudit(t *testing.T, style taintStyle) {
	t.Helper()
	rep, err := audit.Run(context.Background(), cl.c, audit.Options{Namespaces: []string{nsLinux, nsPlain, nsWindows}})
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]string{}
	for _, f := range rep.Findings {
		byKind[f.Kind] = append(byKind[f.Kind], f.Namespace+"/"+f.Object)
		if f.Namespace == nsLinux && (f.Kind == audit.NoOSPin || f.Kind == audit.DaemonSetOnWindows) {
			t.Errorf("%s: audit finds %s in the pinned namespace: %s %s", style.name, f.Kind, f.Object, f.Detail)
		}
	}
	// log-shipper tolerates everything: it reaches Windows nodes whatever their taints.
	if !slices.Contains(byKind[audit.DaemonSetOnWindows], nsPlain+"/DaemonSet/log-shipper") {
		t.Errorf("%s: audit does not report DaemonSet log-shipper in %s: %v", style.name, nsPlain, byKind)
	}
	if style.taints == nil && !slices.Contains(byKind[audit.NoOSPin], nsPlain+"/Deployment/zoned") {
		t.Errorf("%s: audit does not report Deployment zoned in %s: %v", style.name, nsPlain, byKind)
	}
	if style.taints != nil && slices.Contains(byKind[audit.NoOSPin], nsPlain+"/Deployment/zoned") {
		t.Errorf("%s: audit reports Deployment zoned, whose pods cannot reach the tainted Windows nodes", style.name)
	}
	if !slices.Contains(byKind[audit.WindowsTaintUntolerated], "/Node/"+teamNode) {
		t.Errorf("%s: audit does not report the team's taint on %s: %v", style.name, teamNode, byKind)
	}
	t.Logf("%s: audit findings: %d no-os-pin, %d daemonset-on-windows, %d windows-taint-untolerated", style.name,
		len(byKind[audit.NoOSPin]), len(byKind[audit.DaemonSetOnWindows]), len(byKind[audit.WindowsTaintUntolerated]))
}

// checkLinuxWhileDown: with every wincompat replica gone, Linux workloads in a default-os=linux
// namespace are still created (failurePolicy Ignore), unpinned as without wincompat, and the audit
// says so.
func (cl *cluster) checkLinuxWhileDown(t *testing.T) {
	t.Helper()
	cl.stopServing()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "while-down", Namespace: nsLinux},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "ghcr.io/example/app:1.0"}}}}
	if err := cl.c.Create(ctx, pod); err != nil {
		t.Fatalf("an unpinned Linux pod is refused while wincompat is down: %v", err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "while-down", Namespace: nsLinux}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "while-down"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "while-down"}}, Spec: pod.Spec}}}
	if err := cl.c.Create(ctx, dep); err != nil {
		t.Fatalf("an unpinned Deployment is refused while wincompat is down: %v", err)
	}
	if pod.Spec.NodeSelector != nil || dep.Spec.Template.Spec.NodeSelector != nil {
		t.Errorf("objects admitted while wincompat is down carry a nodeSelector: %v, %v", pod.Spec.NodeSelector, dep.Spec.Template.Spec.NodeSelector)
	}
	rep, err := audit.Run(ctx, cl.c, audit.Options{Namespaces: []string{nsLinux}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Findings, func(f audit.Finding) bool { return f.Kind == audit.NoOSPin && f.Object == "Deployment/while-down" }) {
		t.Errorf("audit does not report the Deployment admitted while wincompat was down: %+v", rep.Findings)
	}
	t.Logf("wincompat down: an unpinned pod and Deployment in %s were admitted (failurePolicy Ignore) and the audit reports the Deployment", nsLinux)
}
