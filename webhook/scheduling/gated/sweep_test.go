package gated

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/wincompat/wincompat/policy"
)

// TestSweepFindsGatedPodsWithoutTheLabel: a pod that keeps wincompat's gate without the label the cache
// selects (removed, or changed) is found by the sweep and handled; other pods are not asked about.
func TestSweepFindsGatedPodsWithoutTheLabel(t *testing.T) {
	removed := gatedPod("label-removed", optedIn, policy.SchedulingGate)
	delete(removed.Labels, policy.LabelGated)
	changed := gatedPod("label-changed", optedIn, policy.SchedulingGate)
	changed.Labels[policy.LabelGated] = "false"
	labelled := gatedPod("labelled", optedIn, policy.SchedulingGate)
	theirs := gatedPod("theirs", optedIn, otherGate)
	delete(theirs.Labels, policy.LabelGated)
	bound := gatedPod("bound", optedIn, policy.SchedulingGate)
	delete(bound.Labels, policy.LabelGated)
	bound.Spec.NodeName = "win-1"

	h := newHarness(t, answered(), created.Add(2*time.Second), nil)
	// The API server: the pods, listed by spec.nodeName as kube-apiserver indexes them.
	h.c.Live = fake.NewClientBuilder().WithScheme(h.client.Scheme()).WithObjects(removed, changed, labelled, theirs, bound).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		Build()
	h.c.sweeps = make(chan event.GenericEvent, 10)
	if err := h.c.sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(h.c.sweeps)
	var asked []string
	for e := range h.c.sweeps {
		asked = append(asked, e.Object.GetName())
	}
	slices.Sort(asked)
	if want := []string{"label-changed", "label-removed"}; !slices.Equal(asked, want) {
		t.Errorf("the sweep asked about %q, want %q", asked, want)
	}
}
