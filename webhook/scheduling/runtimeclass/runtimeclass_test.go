package runtimeclass

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

func TestDesired(t *testing.T) {
	p := policy.Default()
	all := Desired(p, nil)
	if len(all) != 3 {
		t.Fatalf("catalog mode: %d classes, want one per catalog build", len(all))
	}
	rc := all[1]
	if rc.Name != "windows-2022" || rc.Handler != "runhcs-wcow-process" || rc.Labels[ManagedByLabel] != ManagedByValue {
		t.Errorf("class: %+v", rc)
	}
	want := map[string]string{corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: "10.0.20348"}
	if len(rc.Scheduling.NodeSelector) != 2 || rc.Scheduling.NodeSelector[corev1.LabelWindowsBuild] != want[corev1.LabelWindowsBuild] {
		t.Errorf("nodeSelector: %v", rc.Scheduling.NodeSelector)
	}
	if len(rc.Scheduling.Tolerations) != 1 || rc.Scheduling.Tolerations[0].Key != "os" || rc.Scheduling.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("tolerations: %v", rc.Scheduling.Tolerations)
	}

	arm, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: arm64\nruntimeClassesFor: present\nruntimeClassHandler: runhcs-wcow-hypervisor\n"))
	if err != nil {
		t.Fatal(err)
	}
	present := Desired(arm, []string{"10.0.26100", "10.0.99999"})
	if len(present) != 1 || present[0].Name != "windows-2025" || present[0].Handler != "runhcs-wcow-hypervisor" ||
		present[0].Scheduling.NodeSelector[corev1.LabelArchStable] != "arm64" {
		t.Errorf("present mode: %+v", present)
	}
}
