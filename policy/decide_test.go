package policy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Decision.Denied is the reason alone; the mark "wincompat: " is added where it is shown.
func TestDeniedCarriesNoPrefix(t *testing.T) {
	p := Default()
	p.ImagesWithoutWindows = ImagesWithoutWindowsDeny
	var pod corev1.Pod
	pod.Spec = corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}
	d, err := p.Decide(&pod, Facts{Operation: Create, Namespace: Namespace{Name: "shop", Labels: map[string]string{LabelEnabled: "true"}},
		Images: map[string]Image{"example.com/app:1": {Platforms: []Platform{{OS: "linux", Architecture: "amd64"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	const reason = "containers[app]: image example.com/app:1 (linux/amd64) has no Windows entry and can never run on a Windows node; use a Windows image, or set imagesWithoutWindows: warn in the policy"
	if d.Denied != reason {
		t.Errorf("Denied = %q, want %q", d.Denied, reason)
	}
	if got := d.DeniedMessage(); got != "wincompat: "+reason {
		t.Errorf("DeniedMessage = %q", got)
	}
	if got := d.WouldWarnings(); len(got) != 1 || got[0] != "wincompat (warn mode) would have refused it: "+reason {
		t.Errorf("WouldWarnings = %q", got)
	}
	if (Decision{}).DeniedMessage() != "" {
		t.Error("a decision that refuses nothing has a refusal message")
	}
}
