package gated

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// CacheOptions keep in the leader's memory the pods labelled policy.LabelGated=true alone (the API
// server filters the watch by label: no field selector finds gated pods), and of each only what the
// controller and its gauges read: its name, namespace, UID, version, creation time, wincompat's label
// and wincompat's gate. The API server bounds each of those strings (names, label values, a gate is a
// qualified name); other gates, whoever adds them and however many, are not kept.
func CacheOptions() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}: {
			Label: labels.SelectorFromSet(labels.Set{policy.LabelGated: "true"}),
			Transform: func(obj any) (any, error) {
				if p, ok := obj.(*corev1.Pod); ok {
					return keptPod(p), nil
				}
				return obj, nil
			}},
	}
}

func keptPod(p *corev1.Pod) *corev1.Pod {
	kept := &corev1.Pod{}
	kept.Name, kept.Namespace, kept.UID, kept.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	kept.CreationTimestamp, kept.DeletionTimestamp = p.CreationTimestamp, p.DeletionTimestamp
	if v, ok := p.Labels[policy.LabelGated]; ok {
		kept.Labels = map[string]string{policy.LabelGated: v}
	}
	if policy.Gated(p) {
		kept.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: policy.SchedulingGate}}
	}
	return kept
}
