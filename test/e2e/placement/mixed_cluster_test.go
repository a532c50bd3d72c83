package placement

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

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

var taintStyles = []e2eutil.TaintStyle{
	{Name: "untainted", Taints: nil},
	{Name: "gke", Taints: []corev1.Taint{{Key: "node.kubernetes.io/os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}},
	{Name: "os-windows", Taints: []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}},
}

// teamTaint is a taint no Windows pod may tolerate: it says nothing about the operating system.
var teamTaint = corev1.Taint{Key: "dedicated", Value: "team-a", Effect: corev1.TaintEffectNoSchedule}

// mixedNodes: four Linux nodes, two Windows nodes, and a third Windows node with a team's taint.
var mixedNodes = []e2eutil.TestNode{
	{Name: "linux-0", OS: "linux", Build: ""}, {Name: "linux-1", OS: "linux", Build: ""}, {Name: "linux-2", OS: "linux", Build: ""}, {Name: "linux-3", OS: "linux", Build: ""},
	{Name: "win-0", OS: "windows", Build: e2eutil.Build2022}, {Name: "win-1", OS: "windows", Build: e2eutil.Build2022}, {Name: e2eutil.TeamNode, OS: "windows", Build: e2eutil.Build2022},
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

func TestMixedClusterBothWays(t *testing.T) {
	workloads := e2eutil.Distinct(e2eutil.LoadCorpusAsRendered(t))
	for _, obj := range handWritten() {
		workloads = append(workloads, e2eutil.Workload{File: "hand-written", Obj: obj})
	}
	for _, style := range taintStyles {
		t.Run(style.Name, func(t *testing.T) { runMixedCluster(t, style, workloads) })
	}
}

func runMixedCluster(t *testing.T, style e2eutil.TaintStyle, workloads []e2eutil.Workload) {
	ctx := context.Background()
	// No taint configured: the Windows pods must tolerate what they find, and only that.
	noTaints, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaints: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl := e2eutil.StartClusterWith(t, []controlplane.Option{controlplane.WithScheduler()}, func(o *server.Options) { o.Policy = noTaints })
	nodes := map[string]e2eutil.TestNode{}
	for _, n := range mixedNodes {
		cl.AddNode(t, n)
		nodes[n.Name] = n
		if n.OS == "windows" {
			taints := slices.Clone(style.Taints)
			if n.Name == e2eutil.TeamNode {
				taints = append(taints, teamTaint)
			}
			setTaints(t, cl, n.Name, taints)
		}
	}
	e2eutil.SetUpNamespace(ctx, t, cl.C, e2eutil.NSLinux, map[string]string{policy.LabelDefaultOS: "linux"}, workloads)
	e2eutil.SetUpNamespace(ctx, t, cl.C, e2eutil.NSPlain, nil, workloads)
	cl.NewNamespace(t, e2eutil.NSWindows, map[string]string{policy.LabelEnabled: "true"})
	e2eutil.SetUpClusterWide(ctx, t, cl.C, workloads)
	cl.WaitForLinuxPin(t)
	cl.WaitForTaints(t, style)

	var nodeList corev1.NodeList
	if err := cl.C.List(ctx, &nodeList); err != nil {
		t.Fatal(err)
	}
	with := cl.DeployAndPlace(t, e2eutil.NSLinux, workloads, nodeList.Items)
	without := cl.DeployAndPlace(t, e2eutil.NSPlain, workloads, nodeList.Items)
	windowsPods := cl.PlaceWindowsPods(t, 20)

	table, onWindowsWith, _ := mixedTable(with, nodes)
	tableWithout, onWindowsWithout, daemonsWithout := mixedTable(without, nodes)
	t.Logf("%s: Linux workloads that choose no operating system (corpus charts and hand-written), WITH wincompat (%s labelled %s=linux):\n%s",
		style.Name, e2eutil.NSLinux, policy.LabelDefaultOS, table)
	t.Logf("%s: the same WITHOUT wincompat (%s):\n%s", style.Name, e2eutil.NSPlain, tableWithout)
	if onWindowsWith > 0 {
		t.Errorf("%s: %d pods of workloads that chose no operating system are bound to or targeted at Windows nodes with wincompat, want 0", style.Name, onWindowsWith)
	}
	for _, p := range with {
		if p.Chose == "" && !p.Daemon && (p.Node == "" || nodes[p.Node].OS != "linux") {
			t.Errorf("%s: %s pod %s is not on a Linux node (node %q, pending: %s)", style.Name, p.Workload, p.Name, p.Node, p.Why)
		}
	}
	if style.Taints == nil && daemonsWithout == 0 {
		t.Errorf("untainted Windows nodes, no wincompat: no DaemonSet pod targets a Windows node; the comparison shows nothing")
	}
	if style.Taints == nil && onWindowsWithout == 0 {
		t.Errorf("untainted Windows nodes, no wincompat: no pod lands on a Windows node; the comparison shows nothing")
	}
	if style.Taints != nil && daemonsWithout == 0 {
		t.Errorf("%s: no wincompat: the DaemonSet that tolerates every taint targets no Windows node; the taints are not what the test thinks", style.Name)
	}
	t.Logf("%s: without wincompat %d pods of unpinned workloads on or targeted at Windows nodes (%d of them DaemonSet pods); with it %d",
		style.Name, onWindowsWithout, daemonsWithout, onWindowsWith)

	checkWindowsPlacement(t, style, windowsPods)
	cl.CheckMixedAudit(t, style)
	if style.Taints == nil {
		cl.CheckLinuxWhileDown(t)
	}
	if style.Name == "gke" {
		cl.CheckJoiningNodeTaints(t) // last: its node would change what the checks above see
	}
}

func setTaints(t *testing.T, cl *e2eutil.Cluster, name string, taints []corev1.Taint) {
	t.Helper()
	var n corev1.Node
	if err := cl.C.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = taints
	if err := cl.C.Update(context.Background(), &n); err != nil {
		t.Fatalf("tainting %s: %v", name, err)
	}
}

// mixedTable counts, by kind of workload, where the pods of workloads that chose no operating system
// went; pods of workloads that chose one are counted apart. It returns the table, the pods of unpinned
// workloads on (or, for DaemonSets, targeted at) Windows nodes, and how many of those are DaemonSet pods.
func mixedTable(made []*e2eutil.MadePod, nodes map[string]e2eutil.TestNode) (string, int, int) {
	type row struct {
		workloads                     map[string]bool
		pods, linux, windows, pending int
	}
	rows := map[string]*row{}
	var order []string
	onWindows, daemons := 0, 0
	for _, m := range made {
		key := strings.SplitN(m.Workload, "/", 2)[0]
		if m.Daemon {
			key = "DaemonSet pods"
		}
		if m.Chose != "" {
			key = "chose " + m.Chose
		}
		r := rows[key]
		if r == nil {
			r = &row{workloads: map[string]bool{}}
			rows[key] = r
			order = append(order, key)
		}
		r.workloads[m.Workload] = true
		r.pods++
		switch {
		case m.Node != "" && nodes[m.Node].OS == "windows":
			r.windows++
			if m.Chose == "" {
				onWindows++
				if m.Daemon {
					daemons++
				}
			}
		case m.Node != "":
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

// checkWindowsPlacement: every Windows pod on a plain Windows node, none on the team's node, each
// tolerating the style's taints and never the team's.
func checkWindowsPlacement(t *testing.T, style e2eutil.TaintStyle, pods []*corev1.Pod) {
	t.Helper()
	placed := 0
	for _, p := range pods {
		if p.Spec.NodeName == "win-0" || p.Spec.NodeName == "win-1" {
			placed++
		} else {
			t.Errorf("%s: Windows pod %s on %q, want win-0 or win-1", style.Name, p.Name, p.Spec.NodeName)
		}
		if slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logr.Discard(), &teamTaint, false) }) {
			t.Errorf("%s: Windows pod %s tolerates the team's taint %s: %v", style.Name, p.Name, teamTaint.ToString(), p.Spec.Tolerations)
		}
		changes, err := policy.DecodeChanges(p.Annotations[policy.AnnotationChanges])
		if err != nil {
			t.Fatalf("%s: Windows pod %s: %v", style.Name, p.Name, err)
		}
		for _, taint := range style.Taints {
			if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logr.Discard(), &taint, false) }) {
				t.Errorf("%s: Windows pod %s does not tolerate %s", style.Name, p.Name, taint.ToString())
			}
			// The catalog's RuntimeClasses here tolerate os=windows themselves (as many clusters' do), so
			// the toleration alone proves nothing for that style: wincompat must have found the taint.
			if !slices.ContainsFunc(changes, func(c policy.Change) bool {
				return c.Path == "spec.tolerations" && strings.Contains(c.Reason, taint.ToString()+" found on Windows nodes")
			}) {
				t.Errorf("%s: Windows pod %s: no toleration of %s recorded as found on the nodes: %v", style.Name, p.Name, taint.ToString(), changes)
			}
		}
	}
	t.Logf("%s: %d of %d Windows pods placed on Windows nodes with no taint configured, none on %s (tainted %s)", style.Name, placed, len(pods), e2eutil.TeamNode, teamTaint.ToString())
}
