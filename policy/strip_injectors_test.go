package policy

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInjectorOptOuts(t *testing.T) {
	windowsPod := func(labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	}
	enabled := Facts{Operation: Create, Namespace: Namespace{Name: "apps", Labels: map[string]string{LabelEnabled: "true"}}}
	none, err := Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\ninjectorOptOuts: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                    string
		pol                     *Policy
		labels, annotations     map[string]string
		wantLabel, wantAnnot    map[string]string // keys that must hold these values afterwards
		absentLabel, absentAnno []string
	}{
		{name: "every opt-out, in the form each injector reads", pol: Default(),
			wantLabel: map[string]string{"sidecar.istio.io/inject": "false", "kuma.io/sidecar-injection": "disabled", "admission.datadoghq.com/enabled": "false", "instana-autotrace": "false"},
			wantAnnot: map[string]string{"linkerd.io/inject": "disabled", "appmesh.k8s.aws/sidecarInjectorWebhook": "disabled", "openservicemesh.io/sidecar-injection": "disabled",
				"consul.hashicorp.com/connect-inject": "false", "dynatrace.com/inject": "false"},
			absentAnno: []string{"sidecar.istio.io/inject"}, absentLabel: []string{"linkerd.io/inject"}},
		{name: "the user's word stands, in either form and whatever its value", pol: Default(),
			labels:      map[string]string{"linkerd.io/inject": "enabled"},
			annotations: map[string]string{"sidecar.istio.io/inject": "true"},
			wantLabel:   map[string]string{"linkerd.io/inject": "enabled"}, wantAnnot: map[string]string{"sidecar.istio.io/inject": "true"},
			absentLabel: []string{"sidecar.istio.io/inject"}, absentAnno: []string{"linkerd.io/inject"}},
		{name: "injectorOptOuts: [] adds none", pol: none,
			absentLabel: []string{"sidecar.istio.io/inject", "kuma.io/sidecar-injection"}, absentAnno: []string{"linkerd.io/inject"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := windowsPod(maps.Clone(c.labels), maps.Clone(c.annotations))
			d, err := c.pol.Decide(pod, enabled)
			if err != nil || !d.Windows {
				t.Fatalf("decision %+v, %v", d, err)
			}
			for k, v := range c.wantLabel {
				if pod.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
				}
			}
			for k, v := range c.wantAnnot {
				if pod.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, pod.Annotations[k], v)
				}
			}
			for _, k := range c.absentLabel {
				if _, ok := pod.Labels[k]; ok && c.labels[k] == "" {
					t.Errorf("label %s added", k)
				}
			}
			for _, k := range c.absentAnno {
				if _, ok := pod.Annotations[k]; ok && c.annotations[k] == "" {
					t.Errorf("annotation %s added", k)
				}
			}
			// A second pass adds nothing.
			again, _ := c.pol.Decide(pod, enabled)
			for _, ch := range again.Changes {
				if strings.HasPrefix(ch.Path, "metadata.labels") || strings.HasPrefix(ch.Path, "metadata.annotations") {
					t.Errorf("second pass: %+v", ch)
				}
			}
		})
	}
}

func TestInjectorOptOutsNotOnLinuxPods(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "api", Image: "api:1"}}}}
	d, err := Default().Decide(pod, Facts{Operation: Create, Namespace: Namespace{Name: "apps", Labels: map[string]string{LabelDefaultOS: "linux"}}})
	if err != nil || !d.Linux {
		t.Fatalf("decision %+v, %v", d, err)
	}
	if len(pod.Labels) > 0 || len(pod.Annotations) != 1 {
		t.Errorf("a Linux pod got labels %v, annotations %v", pod.Labels, pod.Annotations)
	}
}

func TestInjectorOptOutsValidated(t *testing.T) {
	_, err := Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\ninjectorOptOuts: [istio, sidecarz]\n"))
	if err == nil || !strings.Contains(err.Error(), `injectorOptOuts[1]: Invalid value: "sidecarz": not an injector wincompat knows: use some of istio, linkerd`) {
		t.Errorf("error %v", err)
	}
}
