package auditing

// Issue 41: the audit where Windows is large too. BenchmarkAudit100kPods is mostly Linux pods on one
// Windows node; this one is the largest cluster Kubernetes supports at its usual proportions, with 30%
// of the pods Windows as wincompat leaves them, on 2,000 Windows nodes:
//
//	cd test && go test -run '^$' -bench BenchmarkAuditWindowsScale -benchtime 1x ./e2e/auditing/
//
// WINCOMPAT_AUDIT_BASELINE=/path/to/an/older/wincompat audits the same cluster with that binary too,
// so that a change is measured before and after on one cluster and one machine.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/webhook/audit"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// The shape: 200 namespaces of 300 pods, each namespace ten Deployments (each with its ReplicaSet) of
// 30 pods, three of them Windows (30%); one node per 30 pods on the Linux side, and 2,000 Windows nodes
// in four pools with the taints AKS and GKE pools carry.
const (
	scaleNamespaces  = 200
	scaleDeployments = 10 // per namespace
	scaleWindowsDeps = 3  // the first three of each namespace
	scaleReplicas    = 30
	scaleLinuxNodes  = 1_400 // 42,000 Linux pods, 30 per node
	scaleRuns        = 3
	scaleTemplateRev = "7d9f8b6c5d"
)

// scalePool is a pool of Windows nodes: how many, their build and the taints beyond os=windows.
type scalePool struct {
	name  string
	nodes int
	build string
	extra []corev1.Taint
}

var scalePools = []scalePool{
	{"win22", 1_200, e2eutil.Build2022, nil},
	// Windows Deployment 1 of each namespace tolerates the GPU pool's taint and runs there.
	{"win22gpu", 400, e2eutil.Build2022, []corev1.Taint{{Key: "sku", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}},
	{"win25", 300, e2eutil.Build2025, nil},
	// No pod tolerates the legacy pool's taint: one windows-taint-untolerated finding per node.
	{"win19", 100, e2eutil.Build2019, []corev1.Taint{{Key: "dedicated", Value: "legacy", Effect: corev1.TaintEffectNoExecute}}},
}

var scaleOSTaint = corev1.Taint{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}

func scaleWindowsNodes() int {
	n := 0
	for _, p := range scalePools {
		n += p.nodes
	}
	return n
}

// scaleNode is a node as a cloud's kubelet registers it: the well-known labels, the pool's, and for
// Windows the kernel version the audit reads revisions from.
func scaleNode(name, pool, os, build string, zone int, taints []corev1.Taint) *corev1.Node {
	labels := map[string]string{
		corev1.LabelOSStable: os, corev1.LabelArchStable: "amd64", corev1.LabelHostname: name,
		"agentpool": pool, "kubernetes.azure.com/agentpool": pool, "kubernetes.azure.com/cluster": "MC_bench_bench_westeurope",
		corev1.LabelTopologyZone: fmt.Sprintf("westeurope-%d", zone+1), corev1.LabelTopologyRegion: "westeurope",
		corev1.LabelInstanceTypeStable: "Standard_D8s_v5", "kubernetes.azure.com/mode": "user",
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	kernel := "6.8.0-1021-azure"
	if os == string(corev1.Windows) {
		labels[corev1.LabelWindowsBuild] = build
		kernel = build + ".2227"
	}
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status = corev1.NodeStatus{
		Capacity: room, Allocatable: room.DeepCopy(),
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		NodeInfo: corev1.NodeSystemInfo{KernelVersion: kernel, OperatingSystem: os, Architecture: "amd64", KubeletVersion: "v1.36.0"},
	}
	return node
}

// createScaleNodes creates every node Ready and without the not-ready taint the API server adds.
func createScaleNodes(b *testing.B, cs kubernetes.Interface) {
	b.Helper()
	var nodes []*corev1.Node
	for _, p := range scalePools {
		for i := range p.nodes {
			taints := append([]corev1.Taint{scaleOSTaint}, p.extra...)
			nodes = append(nodes, scaleNode(fmt.Sprintf("aks%s-%06d", p.name, i), p.name, "windows", p.build, i%3, taints))
		}
	}
	for i := range scaleLinuxNodes {
		nodes = append(nodes, scaleNode(fmt.Sprintf("aks-linux-%06d", i), "linux", "linux", "", i%3, nil))
	}
	parallel(b, len(nodes), func(i int) error {
		want := nodes[i]
		n, err := cs.CoreV1().Nodes().Create(context.Background(), want, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		n.Status = want.Status
		if n, err = cs.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		n.Spec.Taints = want.Spec.Taints
		_, err = cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
}

// parallel runs do(0..n-1) on 64 goroutines and fails the benchmark with the first error.
func parallel(b *testing.B, n int, do func(i int) error) {
	b.Helper()
	jobs := make(chan int, 1024)
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range jobs {
				if err := do(i); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d creations failed; the first: %v", f, n, firstErr.Load())
	}
}

// scaleFacts are what the webhook would have known when it admitted the Windows objects.
func scaleFacts(ns string) policy.Facts {
	return policy.Facts{
		Operation: policy.Create, Version: "bench",
		Namespace: policy.Namespace{Name: ns, Labels: map[string]string{policy.LabelEnabled: "true"}},
		Cluster: &policy.Cluster{
			Builds:        []string{e2eutil.Build2019, e2eutil.Build2022, e2eutil.Build2025},
			WindowsTaints: []corev1.Taint{scalePools[3].extra[0], scaleOSTaint, scalePools[1].extra[0]},
		},
	}
}

// scaleTemplate is the chart's pod template of Deployment d of namespace ns as the chart writes it,
// and as wincompat leaves it (a Windows one with template-changes recorded): Deployment 1 tolerates the GPU pool, Deployment 2 runs a
// 2025 image, and in every twentieth namespace the last (Linux) Deployment tolerates every taint and
// pins no operating system (a no-os-pin finding).
func scaleTemplate(b *testing.B, ns string, d int) (written, admitted corev1.PodTemplateSpec) {
	b.Helper()
	windows := d < scaleWindowsDeps
	image := "registry.example/web:1.4.2"
	switch d {
	case 0, 1:
		image = e2eutil.Images2022[2]
	case 2:
		image = e2eutil.Images2025[0]
	}
	pod, err := perf.TypedPod(perf.WindowsChartPod(ns, image))
	if !windows {
		pod, err = perf.TypedPod(perf.ChartPod(1, ns, false))
	}
	if err != nil {
		b.Fatal(err)
	}
	labels := map[string]string{"app.kubernetes.io/name": fmt.Sprintf("web-%d", d), "app.kubernetes.io/instance": fmt.Sprintf("web-%d", d)}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: pod.Annotations}, Spec: pod.Spec}
	switch {
	case d == 1:
		tpl.Spec.Tolerations = append(tpl.Spec.Tolerations, corev1.Toleration{Key: "sku", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
	case d == scaleDeployments-1 && scaleNamespaceIndex(ns)%20 == 0:
		tpl.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	if !windows {
		return tpl, tpl
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}, Spec: appsv1.DeploymentSpec{Template: *tpl.DeepCopy()}}
	if _, err := policy.Default().Decide(dep, scaleFacts(ns)); err != nil {
		b.Fatal(err)
	}
	return tpl, dep.Spec.Template
}

func scaleNamespace(n int) string { return fmt.Sprintf("team-%03d", n) }

func scaleNamespaceIndex(ns string) int {
	var n int
	_, _ = fmt.Sscanf(ns, "team-%d", &n)
	return n
}

// scaleWindowsNode is the node Windows pod r of Deployment d in namespace n is bound to: one of its
// build's pool (the GPU pool for Deployment 1).
func scaleWindowsNode(n, d, r int) string {
	p := scalePools[d] // win22, win22gpu, win25
	return fmt.Sprintf("aks%s-%06d", p.name, (n*scaleReplicas+r)%p.nodes)
}

// createScaleObjects creates the namespaces, Deployments, ReplicaSets and pods; Windows pods are
// decided by the policy as the webhook would have (every annotation it leaves), from the template as
// the chart wrote it (the largest record: a template created before wincompat was installed), then
// bound to a node of their build, Linux pods to a Linux node.
func createScaleObjects(b *testing.B, cs kubernetes.Interface) {
	b.Helper()
	ctx := context.Background()
	type owner struct {
		ns  string
		d   int
		uid types.UID
		// written is the template as the chart wrote it, tpl as wincompat left it.
		written, tpl corev1.PodTemplateSpec
	}
	owners := make([]owner, scaleNamespaces*scaleDeployments)
	parallel(b, scaleNamespaces, func(n int) error {
		ns := scaleNamespace(n)
		labels := map[string]string{policy.LabelEnabled: "true", "kubernetes.io/metadata.name": ns, "team": ns}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}, metav1.CreateOptions{})
		return err
	})
	for i := range owners {
		ns := scaleNamespace(i / scaleDeployments)
		written, tpl := scaleTemplate(b, ns, i%scaleDeployments)
		owners[i] = owner{ns: ns, d: i % scaleDeployments, written: written, tpl: tpl}
	}
	parallel(b, len(owners), func(i int) error {
		o := &owners[i]
		name := fmt.Sprintf("web-%d", o.d)
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}}
		dep, err := cs.AppsV1().Deployments(o.ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.ns},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](scaleReplicas), Selector: sel, Template: o.tpl}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		rsTpl := *o.tpl.DeepCopy()
		rsTpl.Labels["pod-template-hash"] = scaleTemplateRev
		rs, err := cs.AppsV1().ReplicaSets(o.ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + scaleTemplateRev, Namespace: o.ns, Labels: rsTpl.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: dep.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](scaleReplicas), Selector: sel, Template: rsTpl},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		o.uid, o.tpl = rs.UID, rsTpl
		return nil
	})
	parallel(b, len(owners)*scaleReplicas, func(i int) error {
		o, r := &owners[i/scaleReplicas], i%scaleReplicas
		n := scaleNamespaceIndex(o.ns)
		rsName := fmt.Sprintf("web-%d-%s", o.d, scaleTemplateRev)
		pod := &corev1.Pod{ObjectMeta: *o.written.ObjectMeta.DeepCopy(), Spec: *o.written.Spec.DeepCopy()}
		pod.Labels["pod-template-hash"] = scaleTemplateRev
		pod.Name, pod.GenerateName, pod.Namespace = fmt.Sprintf("%s-%05d", rsName, r), rsName+"-", o.ns
		pod.Annotations = map[string]string{"checksum/config": "3f1c2b5e9a7d"}
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rsName, UID: o.uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		pod.Spec.AutomountServiceAccountToken = ptr.To(false)
		pod.Spec.ServiceAccountName = ""
		if o.d < scaleWindowsDeps {
			if _, err := policy.Default().Decide(pod, scaleFacts(o.ns)); err != nil {
				return err
			}
			pod.Spec.NodeName = scaleWindowsNode(n, o.d, r)
		} else {
			pod.Spec.NodeName = fmt.Sprintf("aks-linux-%06d", (n*scaleDeployments*scaleReplicas+o.d*scaleReplicas+r)%scaleLinuxNodes)
		}
		_, err := cs.CoreV1().Pods(o.ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
}

// BenchmarkAuditWindowsScale: `wincompat audit -o json` over 60,000 pods, 18,000 of them Windows, on
// 2,000 Windows and 1,400 Linux nodes, scaleRuns times; the medians are reported.
func BenchmarkAuditWindowsScale(b *testing.B) {
	began := time.Now()
	cp, cs := benchControlPlane(b)
	createScaleNodes(b, cs)
	b.Logf("%d nodes created in %v", scaleWindowsNodes()+scaleLinuxNodes, time.Since(began).Round(time.Millisecond))
	created := time.Now()
	createScaleObjects(b, cs)
	pods := scaleNamespaces * scaleDeployments * scaleReplicas
	b.Logf("%d pods, %d Deployments and their ReplicaSets created in %v", pods, scaleNamespaces*scaleDeployments, time.Since(created).Round(time.Millisecond))
	bin := e2eutil.BuildWincompat(b)
	kubeconfig := filepath.Join(b.TempDir(), "admin.kubeconfig")
	if err := cp.WriteKubeConfig(kubeconfig, "bench-admin", "system:masters"); err != nil {
		b.Fatal(err)
	}
	bins := []struct{ name, path string }{{"", bin}}
	if base := os.Getenv("WINCOMPAT_AUDIT_BASELINE"); base != "" {
		bins = append(bins, struct{ name, path string }{"-baseline", base})
	}
	b.ResetTimer()
	for range b.N {
		for _, w := range bins {
			var elapsed, rss []float64
			for range scaleRuns {
				r := runWincompat(b, w.path, nil, "audit", "--kubeconfig", kubeconfig, "-o", "json")
				checkScaleReport(b, r)
				elapsed, rss = append(elapsed, r.elapsed.Seconds()), append(rss, float64(r.maxRSS)/(1<<20))
				b.Logf("%s: %v, peak RSS %.1f MiB", w.path, r.elapsed.Round(time.Millisecond), float64(r.maxRSS)/(1<<20))
			}
			b.ReportMetric(median(elapsed), "audit-s"+w.name)
			b.ReportMetric(median(rss), "peak-RSS-MiB"+w.name)
		}
	}
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// checkScaleReport checks that the audit read every Windows pod and template and found what the shape
// holds: the legacy pool's untolerated taint on each of its nodes, the no-os-pin Deployments, and no
// build finding for pods bound to nodes of their build.
func checkScaleReport(b *testing.B, r cliRun) {
	b.Helper()
	if r.code != 0 {
		b.Fatalf("wincompat audit: exit %d\n%s", r.code, r.stderr)
	}
	var rep audit.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		b.Fatalf("the report is not JSON: %v", err)
	}
	windowsPods := scaleWindowsDeps * scaleReplicas
	if len(rep.Namespaces) != scaleNamespaces {
		b.Errorf("%d namespace rows, want %d", len(rep.Namespaces), scaleNamespaces)
	}
	for _, n := range rep.Namespaces {
		if n.WindowsPods != windowsPods || n.Covered != windowsPods || n.Workloads != 2*scaleWindowsDeps {
			b.Errorf("namespace %+v: want %d Windows pods, all covered, %d workloads", n, windowsPods, 2*scaleWindowsDeps)
		}
	}
	if got, want := len(rep.Objects), scaleNamespaces*scaleWindowsDeps*(scaleReplicas+2); got != want {
		b.Errorf("%d object rows, want %d", got, want)
	}
	kinds := map[string]int{}
	for _, f := range rep.Findings {
		kinds[f.Kind]++
	}
	if got, want := kinds[audit.WindowsTaintUntolerated], scalePools[3].nodes; got != want {
		b.Errorf("%d %s findings, want %d (the legacy pool's nodes)", got, audit.WindowsTaintUntolerated, want)
	}
	if got, want := kinds[audit.NoOSPin], scaleNamespaces/20; got != want {
		b.Errorf("%d %s findings, want %d", got, audit.NoOSPin, want)
	}
	for _, kind := range []string{audit.BuildMismatch, audit.PendingNoBuild, audit.NotCovered} {
		if kinds[kind] > 0 {
			b.Errorf("%d %s findings, want none", kinds[kind], kind)
		}
	}
}
