package policy

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestHyperVHandlers: classes are found by handler: containerd's Hyper-V handler, and its build-pinned
// variants; nothing else, whatever the class is called.
func TestHyperVHandlers(t *testing.T) {
	for handler, want := range map[string]struct {
		guest string
		ok    bool
	}{
		"runhcs-wcow-hypervisor":       {"", true},
		"runhcs-wcow-hypervisor-17763": {"10.0.17763", true},
		"runhcs-wcow-hypervisor-1776":  {},
		"runhcs-wcow-hypervisor-abcde": {},
		"runhcs-wcow-process":          {},
		"hyperv":                       {},
		"":                             {},
	} {
		if guest, ok := HyperVGuest(handler); guest != want.guest || ok != want.ok {
			t.Errorf("HyperVGuest(%q) = %q, %v; want %q, %v", handler, guest, ok, want.guest, want.ok)
		}
	}
}

// TestHyperVRuns: Hyper-V isolation runs images of the host's build or older (Microsoft's version
// compatibility table, Hyper-V column), never newer, and never across major.minor.
func TestHyperVRuns(t *testing.T) {
	for _, c := range []struct {
		host, image string
		want        bool
	}{
		{"10.0.20348", "10.0.17763.5830", true},
		{"10.0.26100", "10.0.17763.5830", true},
		{"10.0.26100", "10.0.26100.1", true},
		{"10.0.20348", "10.0.26100.1", false},
		{"10.0.17763", "10.0.20348.1", false},
		{"10.0.20348", "6.3.9600.1", false},
		{"10.0.20348", "", true},
	} {
		if got := HyperVRuns(c.host, Platform{OS: "windows", OSVersion: c.image}); got != c.want {
			t.Errorf("HyperVRuns(%s, %s) = %v, want %v", c.host, c.image, got, c.want)
		}
	}
}

// TestHyperVBuilds: the audit's question, by the same rule admission places with.
func TestHyperVBuilds(t *testing.T) {
	p := Default()
	classes := map[string]RuntimeClass{
		"b-isolated":  {Handler: HyperVHandler},
		"a-process":   {Handler: "runhcs-wcow-process"},
		"c-2019-only": {Handler: HyperVHandler + "-17763", NodeSelector: map[string]string{corev1.LabelWindowsBuild: "10.0.26100"}},
	}
	img := func(v string) map[string]Image {
		return map[string]Image{"app:1": {Platforms: []Platform{{OS: "windows", Architecture: "amd64", OSVersion: v}}}}
	}
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}
	for _, c := range []struct {
		image  string
		builds []string
		class  string
		want   []string
	}{
		{"10.0.17763.5830", []string{"10.0.20348", "10.0.26100"}, "b-isolated", []string{"10.0.20348", "10.0.26100"}},
		{"10.0.26100.1", []string{"10.0.20348"}, "", nil}, // never an image newer than the host
	} {
		class, got := p.HyperVBuilds(spec, img(c.image), c.builds, classes)
		if class != c.class || !slices.Equal(got, c.want) {
			t.Errorf("%s on %v: %q %v, want %q %v", c.image, c.builds, class, got, c.class, c.want)
		}
	}
	// Only the build-pinned class: its guest build and its nodeSelector both count.
	only := map[string]RuntimeClass{"c-2019-only": classes["c-2019-only"]}
	if class, got := p.HyperVBuilds(spec, img("10.0.17763.5830"), []string{"10.0.20348", "10.0.26100"}, only); class != "c-2019-only" || !slices.Equal(got, []string{"10.0.26100"}) {
		t.Errorf("build-pinned class: %q %v", class, got)
	}
	if class, _ := p.HyperVBuilds(spec, img("10.0.20348.1"), []string{"10.0.26100"}, only); class != "" {
		t.Errorf("a 2019 utility VM ran a 2022 image: %q", class)
	}
}
