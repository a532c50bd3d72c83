package policy

import (
	"strings"
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
	if got := d.WouldWarnings(); len(got) != 1 || got[0] != "wincompat (warn mode): action needed: would have refused it: "+reason {
		t.Errorf("WouldWarnings = %q", got)
	}
	if got := d.WouldMessages(); len(got) != 1 || got[0] != (Message{SeverityWarning, "wincompat (warn mode) would have refused it: " + reason}) {
		t.Errorf("WouldMessages = %q", got)
	}
	if (Decision{}).DeniedMessage() != "" {
		t.Error("a decision that refuses nothing has a refusal message")
	}
}

// RecordedLinuxOnly reads back, through the one function that words it, the warning decidePod records
// for an image with no Windows entry, even after that function is reworded.
func TestRecordedLinuxOnlyFollowsTheWriter(t *testing.T) {
	const image = "example.com/agent:1"
	decide := func(t *testing.T) []Change {
		t.Helper()
		var pod corev1.Pod
		pod.Spec = corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "agent", Image: image}, {Name: "other", Image: "example.com/other:2"}}}
		images := map[string]Image{
			image:                 {Platforms: []Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}},
			"example.com/other:2": {Platforms: []Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.2227"}}},
		}
		_, err := Default().Decide(&pod, Facts{Operation: Create, Namespace: Namespace{Name: "shop", Labels: map[string]string{LabelEnabled: "true"}}, Images: images})
		if err != nil {
			t.Fatal(err)
		}
		recorded, err := DecodeChanges(pod.Annotations[AnnotationChanges])
		if err != nil {
			t.Fatal(err)
		}
		return recorded
	}
	check := func(t *testing.T) {
		t.Helper()
		recorded := decide(t)
		got, ok := RecordedLinuxOnly(recorded, "spec.containers[agent]", image)
		if want := image + " (linux/amd64, linux/arm64) has no Windows entry"; !ok || got != want {
			t.Errorf("RecordedLinuxOnly = %q, %v; want %q", got, ok, want)
		}
		for _, miss := range []struct{ path, image string }{
			{"spec.containers[other]", "example.com/other:2"}, // a Windows image: no such warning
			{"spec.containers[agent]", "example.com/agent:2"}, // the image changed after admission
			{"spec.initContainers[agent]", image},             // another container
		} {
			if got, ok := RecordedLinuxOnly(recorded, miss.path, miss.image); ok {
				t.Errorf("RecordedLinuxOnly(%s, %s) = %q; want nothing", miss.path, miss.image, got)
			}
		}
	}
	t.Run("as worded", check)
	t.Run("reworded", func(t *testing.T) {
		defer func(f func(string, string) string) { linuxOnlyImageReason = f }(linuxOnlyImageReason)
		linuxOnlyImageReason = func(image, platforms string) string {
			return "no Windows entry in " + image + ", only [" + platforms + "]; it runs on no Windows node"
		}
		if recorded := decide(t); !strings.Contains(EncodeChanges(recorded), "no Windows entry in "+image) {
			t.Fatalf("the writer was not reworded: %s", EncodeChanges(recorded))
		}
		check(t)
	})
}
