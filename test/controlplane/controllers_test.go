package controlplane

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// With the service account controller, a new namespace gets its "default" ServiceAccount and the API
// server's ServiceAccount admission then admits a pod that names none, as on a real cluster (without it:
// `serviceaccount "default" not found`); with the garbage collector in the same process, what a
// deleted owner owned goes. One control plane, both controllers, as the demo runs them.
func TestControllers(t *testing.T) {
	cp := LaunchBare(t, WithServiceAccounts(), WithGarbageCollector())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := cp.Client

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns.Name}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		Containers:                   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	// A pod created right after its namespace may still meet the refusal, as on any cluster, for as long
	// as the controller takes: well under a second here.
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err = c.Create(ctx, pod.DeepCopy()); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("a pod naming no ServiceAccount in a new namespace: %v", err)
	}
	sa := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, sa); err != nil {
		t.Fatalf("ServiceAccount default: %v", err)
	}

	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns.Name}}
	if err := c.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: ns.Name, OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	if err := c.Create(ctx, owned); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("ConfigMap owned still there after its owner was deleted: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
