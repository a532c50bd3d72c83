package perf

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestCheckStoredChartPod: the check that proves an engine did the rewrite must refuse a pod stored
// without any one part of it, and accept one with all of them.
func TestCheckStoredChartPod(t *testing.T) {
	rewritten := func() *corev1.Pod {
		pod, err := TypedPod(ChartPod(2, "ns", true))
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
		pod.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "windows"}
		pod.Spec.Tolerations = []corev1.Toleration{{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule}}
		return pod
	}
	if err := CheckStoredChartPod(rewritten()); err != nil {
		t.Fatalf("a rewritten pod: %v", err)
	}
	for name, spoil := range map[string]func(*corev1.Pod){
		"no nodeSelector":            func(p *corev1.Pod) { p.Spec.NodeSelector = nil },
		"a Linux nodeSelector":       func(p *corev1.Pod) { p.Spec.NodeSelector[corev1.LabelOSStable] = "linux" },
		"no toleration":              func(p *corev1.Pod) { p.Spec.Tolerations = nil },
		"a toleration for NoExecute": func(p *corev1.Pod) { p.Spec.Tolerations[0].Effect = corev1.TaintEffectNoExecute },
		"runAsUser kept":             func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsUser = ptr.To[int64](1001) },
		"fsGroup kept":               func(p *corev1.Pod) { p.Spec.SecurityContext.FSGroup = ptr.To[int64](1001) },
		"seccompProfile kept": func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		},
	} {
		pod := rewritten()
		spoil(pod)
		if err := CheckStoredChartPod(pod); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
