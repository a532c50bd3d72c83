package inventory

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	got, err := (&Inventory{Reader: c}).Cluster(context.Background())
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
