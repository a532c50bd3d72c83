package runtimeclass

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TestDesiredClassesAdmitDecidedPods ties the classes the leader keeps to the pods the policy decides:
// a Windows pod pinned to a catalog build names that build's class, and the RuntimeClass admission plugin
// refuses a pod whose nodeSelector gives a key of its class's scheduling.nodeSelector another value. So
// every key of each class Desired makes must be absent from the decided pod or agree with it, offline
// (the catalog's classes assumed) and in server mode (the classes themselves read back).
func TestDesiredClassesAdmitDecidedPods(t *testing.T) {
	arm, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: arm64\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*policy.Policy{"default": policy.Default(), "arch arm64": arm} {
		classes := Desired(p, nil)
		cluster := &policy.Cluster{RuntimeClasses: map[string]policy.RuntimeClass{}}
		for _, rc := range classes {
			cluster.RuntimeClasses[rc.Name] = policy.RuntimeClass{NodeSelector: rc.Scheduling.NodeSelector}
		}
		for _, b := range p.Builds {
			cluster.Builds = append(cluster.Builds, b.Number)
		}
		for _, rc := range classes {
			b := p.Builds[slices.IndexFunc(p.Builds, func(b policy.Build) bool { return b.RuntimeClass == rc.Name })]
			if !maps.Equal(rc.Scheduling.NodeSelector, p.RuntimeClassNodeSelector(b)) {
				t.Errorf("%s: class %s selects %v, the policy's selector for build %s is %v", name, rc.Name, rc.Scheduling.NodeSelector, b.Number, p.RuntimeClassNodeSelector(b))
			}
			for mode, c := range map[string]*policy.Cluster{"offline": nil, "server": cluster} {
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Annotations: map[string]string{policy.AnnotationBuild: b.Number}},
					Spec: corev1.PodSpec{
						OS:         &corev1.PodOS{Name: corev1.Windows},
						Containers: []corev1.Container{{Name: "web", Image: "mcr.microsoft.com/windows/nanoserver:" + b.ImageTags[0]}},
					},
				}
				facts := policy.Facts{Operation: policy.Create, Cluster: c,
					Namespace: policy.Namespace{Name: "apps", Labels: map[string]string{policy.LabelEnabled: "true"}}}
				if _, err := p.Decide(pod, facts); err != nil {
					t.Fatal(err)
				}
				if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != rc.Name {
					t.Errorf("%s, %s: the pod of build %s names RuntimeClass %v, want %s", name, mode, b.Number, pod.Spec.RuntimeClassName, rc.Name)
					continue
				}
				for key, want := range rc.Scheduling.NodeSelector {
					if got, set := pod.Spec.NodeSelector[key]; set && got != want {
						t.Errorf("%s, %s: the pod selects %s=%s, its class %s %s=%s: the RuntimeClass admission plugin would refuse it",
							name, mode, key, got, rc.Name, key, want)
					}
				}
			}
		}
	}
}
