package audit

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// TestOptInMistakes: a namespace labelled to opt in, but not as wincompat reads it, is reported with
// the command that fixes it, Windows pods or not; a deliberate no, a right label and an excluded
// namespace are not.
func TestOptInMistakes(t *testing.T) {
	namespace := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "yes"}, Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "app", Image: img2022}}}}
	objs := []client.Object{
		namespace("yes", map[string]string{policy.LabelEnabled: "yes"}),
		namespace("key", map[string]string{"wincompat/enabled": "true"}),
		namespace("os-only", map[string]string{policy.LabelDefaultOS: "windows"}),
		namespace("off", map[string]string{policy.LabelEnabled: "false"}),
		namespace("on", map[string]string{policy.LabelEnabled: "true"}),
		namespace("kube-system", map[string]string{policy.LabelEnabled: "yes"}),
		pod,
	}
	var got []string
	for _, f := range run(t, Options{}, objs...).Findings {
		if f.Kind == NamespaceOptInMistake || f.Kind == NamespaceUnlabeled {
			got = append(got, f.Kind+" "+f.Namespace+": "+f.Detail)
		}
	}
	sameFindings(t, "opt-in mistakes", got, []string{
		"namespace-not-labelled yes: 1 Windows pods, but the namespace is not labelled wincompat.io/enabled=true",
		"namespace-opt-in-mistake key: label wincompat/enabled=true is not one wincompat reads: did you mean wincompat.io/enabled=true?: kubectl label namespace key wincompat/enabled- wincompat.io/enabled=true",
		"namespace-opt-in-mistake os-only: label wincompat.io/default-os=windows takes effect only in a namespace labelled wincompat.io/enabled=true; set it too: kubectl label namespace os-only wincompat.io/enabled=true",
		`namespace-opt-in-mistake yes: label wincompat.io/enabled=yes does not opt the namespace in: only the value "true" does; set wincompat.io/enabled=true: kubectl label namespace yes wincompat.io/enabled=true --overwrite`,
	})
}
