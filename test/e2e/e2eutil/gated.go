package e2eutil

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/wincompat/wincompat/policy"
)

// AdmittedGated says why pod, as admission answered its create, is not what a gated pod must be: our
// gate and label, and no build pinned in any form (a pin on a gated pod could never be corrected:
// nodeSelector only grows, runtimeClassName never changes). "" when it is.
func AdmittedGated(pod *corev1.Pod) string {
	switch {
	case !policy.Gated(pod):
		return fmt.Sprintf("no gate %s (gates %v)", policy.SchedulingGate, pod.Spec.SchedulingGates)
	case pod.Labels[policy.LabelGated] != "true":
		return fmt.Sprintf("no label %s=true (labels %v)", policy.LabelGated, pod.Labels)
	case pod.Spec.NodeSelector[corev1.LabelWindowsBuild] != "":
		return fmt.Sprintf("build pinned in nodeSelector %v", pod.Spec.NodeSelector)
	case pod.Spec.RuntimeClassName != nil:
		return fmt.Sprintf("runtimeClassName %s", *pod.Spec.RuntimeClassName)
	case pod.Annotations[policy.AnnotationBuild] != "" || pod.Annotations[policy.AnnotationBuildSource] != "":
		return fmt.Sprintf("build %q from %q", pod.Annotations[policy.AnnotationBuild], pod.Annotations[policy.AnnotationBuildSource])
	}
	return ""
}

// Ungated: wincompat's gate and label are gone.
func Ungated(pod *corev1.Pod) bool {
	_, labelled := pod.Labels[policy.LabelGated]
	return !policy.Gated(pod) && !labelled
}

// PodEvents are the Events about pod name in ns of reason, as `kubectl get events` lists them.
func (cl *Cluster) PodEvents(t *testing.T, ns, name, reason string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := cl.C.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(list.Items, func(e corev1.Event) bool { return e.Reason != reason || e.InvolvedObject.Name != name })
}

// InProcessCounter adds up the in-process server's counter family name, the series whose label is one
// of values (every series when label is "").
func InProcessCounter(t *testing.T, name, label string, values ...string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == label && slices.Contains(values, l.GetValue()) }) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// WaitForPodEvent waits until an Event of reason about pod name in ns is listed, and returns the Events
// of that reason about it: an Event is written after the change it reports.
func (cl *Cluster) WaitForPodEvent(t *testing.T, ns, name, reason string) []corev1.Event {
	t.Helper()
	var evs []corev1.Event
	WaitUntil(t, 15*time.Second, fmt.Sprintf("an Event %s about %s/%s", reason, ns, name), func() bool {
		evs = cl.PodEvents(t, ns, name, reason)
		return len(evs) > 0
	})
	return evs
}
