package policy

import (
	"strings"

	"github.com/containerd/platforms"
	specs "github.com/opencontainers/image-spec/specs-go/v1"
)

// Values of Policy.WindowsCompatibility.
const (
	// CompatibilityCompatible is containerd's rule (github.com/containerd/platforms,
	// platform_windows_compat.go, containerd ≥ 1.7.6 and hcsshim): a host older than Windows Server 2022
	// runs only its own build; a newer host runs images from the LTSC before its own generation up to its
	// own build, so a 2025 host (26100) runs 2022 (20348) images. The revision never matters.
	CompatibilityCompatible = "compatible"
	// CompatibilityExact requires the image's build to equal the node's: older containerd, or Hyper-V
	// isolation set up to need it.
	CompatibilityExact = "exact"
)

// HostRuns reports whether a Windows node of build host (a node.kubernetes.io/windows-build value such
// as 10.0.26100) can run an image entry whose os.version is imageVersion (10.0.20348.2031). An entry
// without os.version runs anywhere, as containerd treats it.
func (p *Policy) HostRuns(host, imageVersion string) bool {
	if imageVersion == "" {
		return true
	}
	if p.WindowsCompatibility == CompatibilityExact {
		return buildOf(host) == buildOf(imageVersion)
	}
	// containerd's matcher carries the rule on every OS; the architecture is the same on both sides
	// because only the version is in question here.
	host = buildOf(host)
	m := platforms.NewMatcher(specs.Platform{OS: "windows", Architecture: "amd64", OSVersion: host})
	return m.Match(specs.Platform{OS: "windows", Architecture: "amd64", OSVersion: imageVersion})
}

// buildOf cuts a Windows version to major.minor.build: 10.0.20348.2031 → 10.0.20348.
func buildOf(version string) string {
	parts := strings.SplitN(version, ".", 4)
	if len(parts) > 3 {
		parts = parts[:3]
	}
	return strings.Join(parts, ".")
}
