package policy

import (
	"testing"

	"github.com/containerd/platforms"
	specs "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
)

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

// TestDecisionsFollowContainerd holds wincompat's answer to "can a node of this build run this image?"
// (CheckBuilds, the question admission and the audit ask) to containerd's own matcher for a grid of
// host builds, image versions and os.features, so that a new containerd/platforms release that changes
// the rule changes wincompat with it, and wincompat never drifts from it on its own.
func TestDecisionsFollowContainerd(t *testing.T) {
	p := Default()
	hosts := []string{"10.0.17763", "10.0.19041", "10.0.20348", "10.0.22621", "10.0.25398", "10.0.26100", "10.0.26200", "10.0.30000"}
	versions := []string{"", "10.0.14393.1", "10.0.17763.5830", "10.0.20348.2762", "10.0.22621.1", "10.0.25398.1", "10.0.26100.1742", "10.0.26200.1", "6.3.9600.1"}
	features := [][]string{nil, {"win32k"}, {"win32k", "win32k"}, {"other"}, {"other", "win32k"}}
	containerdRuns := func(host string, pl Platform) bool {
		m := platforms.NewMatcher(specs.Platform{OS: "windows", Architecture: "amd64", OSVersion: host})
		return m.Match(specs.Platform{OS: "windows", Architecture: "amd64", OSVersion: pl.OSVersion, OSFeatures: pl.OSFeatures})
	}
	for _, host := range hosts {
		for _, v := range versions {
			for _, f := range features {
				pl := Platform{OS: "windows", Architecture: "amd64", OSVersion: v, OSFeatures: f}
				images := map[string]Image{"app:1": {Platforms: []Platform{pl}}}
				spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}
				got := len(p.CheckBuilds(spec, images, []string{host}).Runnable) == 1
				if want := containerdRuns(host, pl); got != want {
					t.Errorf("host %s, image %s: wincompat runs it %v, containerd %v", host, pl, got, want)
				}
			}
		}
	}
	// What the grid must contain, whatever containerd's release: the rows the README states.
	for _, c := range []struct {
		host string
		pl   Platform
		want bool
	}{
		{"10.0.26100", Platform{OSVersion: "10.0.20348.2762"}, true},                                 // 2025 runs 2022
		{"10.0.20348", Platform{OSVersion: "10.0.20348.2762", OSFeatures: []string{"win32k"}}, true}, // win32k stripped
		{"10.0.20348", Platform{OSVersion: "10.0.20348.2762", OSFeatures: []string{"other"}}, false}, // not offered
		{"10.0.20348", Platform{OSFeatures: []string{"other"}}, false},                               // even without os.version
		{"10.0.20348", Platform{OSVersion: "10.0.17763.5830"}, false},
	} {
		c.pl.OS, c.pl.Architecture = "windows", "amd64"
		if got := p.HostRunsEntry(c.host, c.pl); got != c.want {
			t.Errorf("host %s, image %s: %v, want %v", c.host, c.pl, got, c.want)
		}
	}
}
