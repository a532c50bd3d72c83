package policy

import "testing"

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
