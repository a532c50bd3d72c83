package placement

// Issue 28, item 3: Hyper-V isolation through the real API server. A 2019 image in a cluster of 2022
// and 2025 nodes runs on no node in process isolation; the cluster's RuntimeClass whose handler is
// containerd's Hyper-V one (its name is the administrator's) is given to the pod with its scheduling and
// overhead, and the API server's RuntimeClass admission plugin accepts the pod as wincompat leaves it.

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

func TestHyperVPlacement(t *testing.T) {
	cl := e2eutil.StartCluster(t)
	ctx := context.Background()
	const hypervLabel = "example.com/hyperv"
	isolated := &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "isolated"},
		Handler:    "runhcs-wcow-hypervisor",
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{corev1.LabelOSStable: "windows", hypervLabel: "true"},
			Tolerations:  []corev1.Toleration{{Key: hypervLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
	}
	e2eutil.Create(ctx, t, cl.C, isolated)
	cl.AddNode(t, e2eutil.TestNode{Name: "win2022-0", OS: "windows", Build: e2eutil.Build2022})
	cl.AddNode(t, e2eutil.TestNode{Name: "win2025-0", OS: "windows", Build: e2eutil.Build2025})

	const ns = "hyperv"
	cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
	// wincompat reads nodes and classes from its informer cache: wait until it sees both.
	cl.WaitForAdmission(t, ns, e2eutil.ProbePod(e2eutil.Images2019[0]), "the Hyper-V class", func(p *corev1.Pod, _ []string) bool {
		return ptr.Deref(p.Spec.RuntimeClassName, "") == "isolated"
	})

	pod := e2eutil.WindowsPod(ns, "iis-2019")
	pod.Spec.Containers[0].Image = e2eutil.Images2019[0]
	cl.Warnings.Take()
	if err := cl.C.Create(ctx, pod); err != nil {
		t.Fatalf("the API server refused the Hyper-V placed pod: %v", err)
	}
	warned := cl.Warnings.Take()
	var got corev1.Pod
	if err := cl.C.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.RuntimeClassName, "") != "isolated" {
		t.Errorf("runtimeClassName %v, want isolated", got.Spec.RuntimeClassName)
	}
	checkMergedByPlugin(t, &got, *isolated)
	if q := got.Spec.Overhead[corev1.ResourceMemory]; q.Cmp(resource.MustParse("256Mi")) != 0 {
		t.Errorf("overhead %v, want the class's 256Mi", got.Spec.Overhead)
	}
	if b := got.Annotations[policy.AnnotationBuild]; b != e2eutil.Build2022+","+e2eutil.Build2025 {
		t.Errorf("%s = %q, want both ready builds (neither older than 2019)", policy.AnnotationBuild, b)
	}
	if !e2eutil.HasWarning(warned, "Hyper-V isolated (RuntimeClass isolated, handler runhcs-wcow-hypervisor)") {
		t.Errorf("no Hyper-V warning: %q", warned)
	}

	// A 2022 image runs in process isolation on both nodes: no Hyper-V class for it.
	cl.WaitForAdmission(t, ns, e2eutil.ProbePod(e2eutil.Images2022[0]), "process isolation for a 2022 image", func(p *corev1.Pod, _ []string) bool {
		return ptr.Deref(p.Spec.RuntimeClassName, "") != "isolated" && p.Annotations[policy.AnnotationBuild] == e2eutil.Build2022+","+e2eutil.Build2025
	})
}
