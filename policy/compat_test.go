package policy

import "testing"

// TestHostRuns pins the rule of github.com/containerd/platforms v1.0.0-rc.5, platform_windows_compat.go
// (checkWindowsHostAndContainerCompat: exact below ltsc2022; from ltsc2022 on, from the LTSC before the
// host's generation up to the host's build; major and minor must match) and Microsoft's "Windows container
// version compatibility" table (Windows Server 2025 hosts run 2022 containers with process isolation).
func TestHostRuns(t *testing.T) {
	compatible, exact := Default(), Default()
	exact.WindowsCompatibility = CompatibilityExact
	for _, c := range []struct {
		host, image       string
		compatible, exact bool
	}{
		{"10.0.17763", "10.0.17763.5830", true, true}, // revision ignored
		{"10.0.17763", "10.0.20348.2227", false, false},
		{"10.0.20348", "10.0.17763.5830", false, false}, // a 2022 host does not run 2019 images
		{"10.0.20348", "10.0.20348.2227", true, true},
		{"10.0.20348", "10.0.26100.1742", false, false}, // newer image than host
		{"10.0.26100", "10.0.20348.2227", true, false},  // 2025 runs 2022
		{"10.0.26100", "10.0.26100.1742", true, true},
		{"10.0.26100", "10.0.17763.5830", false, false}, // but not 2019
		{"10.0.26100", "10.0.25398.1", true, false},     // 23H2 lies between 2022 and 2025
		{"10.0.25398", "10.0.20348.1", true, false},     // an annual-channel host runs from 2022 up
		{"10.0.26200", "10.0.20348.1", true, false},     // past the newest LTSC: still from 2022
		{"10.0.26200", "10.0.26100.1", true, false},
		{"10.0.26100", "", true, true},           // no os.version: any build
		{"10.0.17763", "6.3.9600", false, false}, // another major.minor
	} {
		if got := compatible.HostRuns(c.host, c.image); got != c.compatible {
			t.Errorf("compatible: host %s image %s = %v, want %v", c.host, c.image, got, c.compatible)
		}
		if got := exact.HostRuns(c.host, c.image); got != c.exact {
			t.Errorf("exact: host %s image %s = %v, want %v", c.host, c.image, got, c.exact)
		}
	}
}
