package inventory

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/wincompat/wincompat/policy"
)

func windowsNode(name, build, kernel string, ready bool) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: build}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
			NodeInfo: corev1.NodeSystemInfo{KernelVersion: kernel}},
	}
}

// TestClusterRevisionsAndClasses: the highest revision of each build among ready nodes, read from the
// kernel version the kubelet reports, and every RuntimeClass with its handler and scheduling.
func TestClusterRevisionsAndClasses(t *testing.T) {
	hyperV := &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "isolated"},
		Handler:    policy.HyperVHandler,
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"hyperv": "true"},
			Tolerations: []corev1.Toleration{{Key: "hyperv", Operator: corev1.TolerationOpExists}}},
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
	}
	c := fake.NewClientBuilder().WithObjects(
		windowsNode("a", "10.0.20348", "10.0.20348.2762", true),
		windowsNode("b", "10.0.20348", "10.0.20348.2900", true),
		windowsNode("c", "10.0.20348", "10.0.20348.3000", false), // not ready: not where pods go now
		windowsNode("d", "10.0.26100", "10.0.17763.9999", true),  // another build than its label: not trusted
		windowsNode("e", "10.0.17763", "", true),
		hyperV,
	).Build()
	got, err := ClusterOf(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"10.0.20348": 2900}; !reflect.DeepEqual(got.Revisions, want) {
		t.Errorf("revisions %v, want %v", got.Revisions, want)
	}
	want := policy.RuntimeClass{Handler: policy.HyperVHandler, NodeSelector: hyperV.Scheduling.NodeSelector,
		Tolerations: hyperV.Scheduling.Tolerations, Overhead: hyperV.Overhead.PodFixed}
	if rc := got.RuntimeClasses["isolated"]; !reflect.DeepEqual(rc, want) {
		t.Errorf("RuntimeClass %+v, want %+v", rc, want)
	}
}

// TestCacheKeepsKernelVersion: the cache's transform drops node status but the conditions and the
// kernel version, which the revision is read from.
func TestCacheKeepsKernelVersion(t *testing.T) {
	n := windowsNode("a", "10.0.20348", "10.0.20348.2762", true)
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"big"}}}
	for obj, by := range CacheOptions() {
		if _, ok := obj.(*corev1.Node); !ok {
			continue
		}
		out, err := by.Transform(n)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*corev1.Node)
		if got.Status.NodeInfo.KernelVersion != "10.0.20348.2762" || len(got.Status.Images) != 0 || len(got.Status.Conditions) != 1 {
			t.Errorf("status after the transform: %+v", got.Status)
		}
	}
}

// TestInventoryReadsOnlyWhatChanged: the informers' events keep the facts current; an update that changes
// nothing a review reads (a heartbeat, a label or taint wincompat ignores) recomputes nothing, and a read
// after it allocates nothing, whatever the number of nodes.
func TestInventoryReadsOnlyWhatChanged(t *testing.T) {
	var inv Inventory
	inv.init()
	for i := range 2000 {
		n := windowsNode(fmt.Sprintf("n%d", i), "10.0.20348", "10.0.20348.2762", true)
		n.Spec.Taints = []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}
		inv.setNode(n)
	}
	before := inv.Snapshot()
	if len(before.ReadyBuilds) != 2000 || !reflect.DeepEqual(before.Cluster.Builds, []string{"10.0.20348"}) || len(before.Cluster.WindowsTaints) != 1 {
		t.Fatalf("snapshot of 2000 ready nodes: %d ready, builds %v, taints %v", len(before.ReadyBuilds), before.Cluster.Builds, before.Cluster.WindowsTaints)
	}
	heartbeat := windowsNode("n7", "10.0.20348", "10.0.20348.2762", true)
	heartbeat.Spec.Taints = []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule},
		{Key: "ToBeDeletedByClusterAutoscaler", Value: "1764340000", Effect: corev1.TaintEffectNoSchedule}}
	heartbeat.Labels["team"] = "a"
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	inv.setNode(heartbeat)
	if inv.Snapshot() != before {
		t.Error("a heartbeat, a label and a taint wincompat does not read made the facts be recomputed")
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = inv.Cluster(context.Background()) }); a != 0 {
		t.Errorf("a review's read of the facts allocates %v times; want 0 (no work per node)", a)
	}

	notReady := windowsNode("n7", "10.0.20348", "10.0.20348.2762", false)
	inv.setNode(notReady)
	after := inv.Snapshot()
	if after == before || len(after.ReadyBuilds) != 1999 || after.Builds["n7"] != "10.0.20348" {
		t.Errorf("a node that became NotReady: %d ready (want 1999), its build %q", len(after.ReadyBuilds), after.Builds["n7"])
	}
	linux := windowsNode("n8", "", "", true)
	linux.Labels[corev1.LabelOSStable] = "linux"
	inv.setNode(linux) // relabelled to Linux: no longer a Windows node
	inv.deleteNode(toolscache.DeletedFinalStateUnknown{Key: "n9", Obj: windowsNode("n9", "10.0.20348", "", true)})
	if s := inv.Snapshot(); len(s.Builds) != 1998 || s.Builds["n8"] != "" || s.Builds["n9"] != "" {
		t.Errorf("after a relabel and a lost deletion: %d nodes, n8 %q, n9 %q", len(s.Builds), s.Builds["n8"], s.Builds["n9"])
	}
}

// TestSnapshotAgreesWithClusterOf: the facts the informers keep are those a list reads.
func TestSnapshotAgreesWithClusterOf(t *testing.T) {
	nodes := []*corev1.Node{
		windowsNode("a", "10.0.20348", "10.0.20348.2762", true),
		windowsNode("b", "10.0.26100", "10.0.26100.1000", false),
		windowsNode("c", "10.0.17763", "10.0.17763.6054", true),
	}
	nodes[1].Spec.Taints = []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}
	nodes[2].Spec.Taints = []corev1.Taint{{Key: corev1.LabelOSStable, Value: "windows", Effect: corev1.TaintEffectNoExecute}}
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2022"}, Handler: "runhcs-wcow-process"}
	b := fake.NewClientBuilder().WithObjects(rc)
	var inv Inventory
	inv.init()
	for _, n := range nodes {
		b = b.WithObjects(n)
		inv.setNode(n)
	}
	inv.setClass(rc)
	listed, err := ClusterOf(context.Background(), b.Build())
	if err != nil {
		t.Fatal(err)
	}
	if kept := inv.Snapshot().Cluster; !reflect.DeepEqual(kept, listed) {
		t.Errorf("from events %+v\nlisted      %+v", kept, listed)
	}
}

// BenchmarkCluster is a review's read of the cluster facts at 100 and 2,000 Windows nodes: the same.
func BenchmarkCluster(b *testing.B) {
	for _, n := range []int{100, 2000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var inv Inventory
			inv.init()
			for i := range n {
				inv.setNode(windowsNode(fmt.Sprintf("n%d", i), "10.0.20348", "10.0.20348.2762", true))
			}
			inv.Snapshot() // computed when a node changes, not by the reviews measured
			ctx := context.Background()
			for b.Loop() {
				_, _ = inv.Cluster(ctx)
			}
		})
	}
}
