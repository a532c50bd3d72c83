package server

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
)

// TestPoliciesOnlyWhileTheirBindingsExist: with the bindings installed (the chart's), the keeper writes a
// policy only while its binding exists, owned by it, so that the garbage collector deletes the policies
// with the bindings (TestChartLifecycle shows it on a real API server), reports the others missing so
// that it looks again soon, and sees a binding that appears or is replaced.
func TestPoliciesOnlyWhileTheirBindingsExist(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	pol := policy.Default()
	k := &policyKeeper{client: c, bindings: c, policy: func() *policy.Policy { return pol }, log: logr.Discard(), policiesOnly: true,
		opts: admissionpolicy.Options{Version: "test"}}
	_, bindings := admissionpolicy.Render(pol, k.opts)

	missing, err := k.apply(ctx)
	if err != nil || missing != len(bindings) {
		t.Fatalf("no binding installed: %d missing, %v; want all %d missing", missing, err, len(bindings))
	}
	var maps admissionregistrationv1.MutatingAdmissionPolicyList
	if err := c.List(ctx, &maps); err != nil || len(maps.Items) != 0 {
		t.Fatalf("policies written with no binding: %d, %v", len(maps.Items), err)
	}

	installed := bindings[0]
	installed.UID = types.UID("uid-" + installed.Name)
	if err := c.Create(ctx, &installed); err != nil {
		t.Fatal(err)
	}
	if missing, err = k.apply(ctx); err != nil || missing != len(bindings)-1 {
		t.Fatalf("one binding installed: %d missing, %v", missing, err)
	}
	if err := c.List(ctx, &maps); err != nil || len(maps.Items) != 1 {
		t.Fatalf("policies written: %d, %v; want the one with a binding", len(maps.Items), err)
	}
	want := metav1.OwnerReference{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingAdmissionPolicyBinding", Name: installed.Name, UID: installed.UID}
	if got := maps.Items[0]; got.Name != installed.Name || len(got.OwnerReferences) != 1 || got.OwnerReferences[0] != want {
		t.Errorf("policy %s owned by %+v, want %+v", got.Name, got.OwnerReferences, want)
	}
	var b admissionregistrationv1.MutatingAdmissionPolicyBinding
	if err := c.Get(ctx, client.ObjectKey{Name: bindings[1].Name}, &b); err == nil {
		t.Errorf("the keeper wrote binding %s, which the chart installs", b.Name)
	}

	// The checks between passes: nothing moved while the others stay missing; a binding replaced
	// (deleted and created again, so its policy went with the old one) is seen, and its policy written
	// again, owned by the new one.
	if moved, missing := k.bindingsMoved(ctx); moved || !missing {
		t.Errorf("nothing changed: moved %v, missing %v; want false, true", moved, missing)
	}
	if err := c.Delete(ctx, &installed); err != nil {
		t.Fatal(err)
	}
	installed.ResourceVersion, installed.UID = "", "uid-again"
	if err := c.Create(ctx, &installed); err != nil {
		t.Fatal(err)
	}
	if moved, _ := k.bindingsMoved(ctx); !moved {
		t.Error("a replaced binding was not seen")
	}
	if _, err := k.apply(ctx); err != nil {
		t.Fatal(err)
	}
	var p admissionregistrationv1.MutatingAdmissionPolicy
	if err := c.Get(ctx, client.ObjectKey{Name: installed.Name}, &p); err != nil || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "uid-again" {
		t.Errorf("after the binding was replaced, policy owned by %+v (%v), want uid-again", p.OwnerReferences, err)
	}
	if moved, _ := k.bindingsMoved(ctx); moved {
		t.Error("moved again after the policy was written with the new binding")
	}
}
