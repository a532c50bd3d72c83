package e2eutil

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kindGVKs are the kinds that carry a pod spec, as the API server serves them.
var kindGVKs = map[string]schema.GroupVersionKind{
	"Pod":                   {Version: "v1", Kind: "Pod"},
	"PodTemplate":           {Version: "v1", Kind: "PodTemplate"},
	"ReplicationController": {Version: "v1", Kind: "ReplicationController"},
	"Deployment":            {Group: "apps", Version: "v1", Kind: "Deployment"},
	"ReplicaSet":            {Group: "apps", Version: "v1", Kind: "ReplicaSet"},
	"StatefulSet":           {Group: "apps", Version: "v1", Kind: "StatefulSet"},
	"DaemonSet":             {Group: "apps", Version: "v1", Kind: "DaemonSet"},
	"Job":                   {Group: "batch", Version: "v1", Kind: "Job"},
	"CronJob":               {Group: "batch", Version: "v1", Kind: "CronJob"},
}

// GetStored reads the stored object of kind/ns/name as unstructured, so that podFromTemplate and the
// report see exactly what the API server keeps.
func (cl *Cluster) GetStored(t *testing.T, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	gvk, ok := kindGVKs[kind]
	if !ok {
		t.Fatalf("unknown kind %s", kind)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := cl.C.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("reading back %s %s/%s: %v", kind, ns, name, err)
	}
	return u
}

// CreatePodOf creates, for real, the Pod a controller would create from the stored workload u, and
// returns the stored Pod. A Pod is its own pod.
func (cl *Cluster) CreatePodOf(t *testing.T, u *unstructured.Unstructured) (*corev1.Pod, error) {
	t.Helper()
	if u.GetKind() == "Pod" {
		var pod corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
			t.Fatalf("decoding Pod %s: %v", u.GetName(), err)
		}
		return &pod, nil
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	podJSON, err := PodFromTemplate(u.GetKind(), raw)
	if err != nil {
		t.Fatalf("%s %s: building its pod: %v", u.GetKind(), u.GetName(), err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(podJSON); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := cl.CreateAndGet(t, obj, &pod); err != nil {
		return nil, err
	}
	return &pod, nil
}

// CreateWorkload creates a corpus workload for real and returns the stored object.
func (cl *Cluster) CreateWorkload(t *testing.T, w Workload) (*unstructured.Unstructured, error) {
	t.Helper()
	if err := cl.C.Create(context.Background(), w.Obj.DeepCopy()); err != nil {
		return nil, err
	}
	return cl.GetStored(t, w.Obj.GetKind(), w.Obj.GetNamespace(), w.Obj.GetName()), nil
}

// AddWindowsNode creates a Ready, tainted Windows node of the given build (see addNode). No kubelet
// runs: the node is only what wincompat's inventory reads.
func (cl *Cluster) AddWindowsNode(t *testing.T, name, build string) {
	t.Helper()
	cl.AddNode(t, TestNode{Name: name, OS: "windows", Build: build})
}

// WaitForRuntimeClass waits until wincompat gives a dry-run pod in ns, whose image names no build, the
// RuntimeClass name: by then its cache has both the node and the RuntimeClasses.
func (cl *Cluster) WaitForRuntimeClass(t *testing.T, ns, name string) {
	t.Helper()
	for i := 0; ; i++ {
		pod := WindowsPod(ns, "probe-runtimeclass")
		pod.Spec.Containers[0].Image = "registry.example/app:1.0"
		err := cl.C.Create(context.Background(), pod, client.DryRunAll)
		if err == nil && pod.Spec.RuntimeClassName != nil && *pod.Spec.RuntimeClassName == name {
			cl.Warnings.Take()
			return
		}
		if i == 300 {
			t.Fatalf("wincompat never set RuntimeClass %s: %v (runtimeClassName %v)", name, err, pod.Spec.RuntimeClassName)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
