package policy

import (
	"strconv"
	"strings"

	"github.com/containerd/platforms"
	specs "github.com/opencontainers/image-spec/specs-go/v1"
)

// Values of Policy.WindowsCompatibility.
const (
	// CompatibilityCompatible is containerd's rule (github.com/containerd/platforms,
	// platform_windows_compat.go, containerd ≥ 1.7.6 and hcsshim): a host older than Windows Server 2022
	// runs only its own build; a newer host runs images from the LTSC before its own generation up to its
	// own build, so a 2025 host (26100) runs 2022 (20348) images. The revision never matters to it.
	CompatibilityCompatible = "compatible"
	// CompatibilityExact requires the image's build to equal the node's: older containerd, or Hyper-V
	// isolation set up to need it.
	CompatibilityExact = "exact"
)

// HostRuns reports whether a Windows node of build host (a node.kubernetes.io/windows-build value such
// as 10.0.26100) can run an image entry whose os.version is imageVersion (10.0.20348.2031) and which
// names no os.features. An entry without os.version runs anywhere, as containerd treats it.
func (p *Policy) HostRuns(host, imageVersion string) bool {
	return p.HostRunsEntry(host, Platform{OS: windowsOS, OSVersion: imageVersion})
}

// HostRunsEntry reports whether a Windows node of build host can run the Windows image entry pl, by
// containerd's own matcher (platforms.NewMatcher): the os.version rule above, and os.features, which
// must be a subset of the host's once win32k is stripped (windowsStripFeaturesMatcher). The host's
// platform is what containerd's DefaultSpec gives on Windows: os, architecture and build, and no
// features, so an entry that requires any feature but win32k runs on no node.
func (p *Policy) HostRunsEntry(host string, pl Platform) bool { return p.hostRuns(host)(pl) }

// hostRuns is HostRunsEntry for one host, with containerd's matcher for it made once for all the entries
// asked about.
func (p *Policy) hostRuns(host string) func(Platform) bool {
	build := buildOf(host)
	exact := p.WindowsCompatibility == CompatibilityExact
	// The architecture is the same on both sides: only the version and the features are in question.
	m := platforms.NewMatcher(specs.Platform{OS: windowsOS, Architecture: "amd64", OSVersion: build})
	return func(pl Platform) bool {
		if exact && pl.OSVersion != "" && build != buildOf(pl.OSVersion) {
			return false
		}
		return m.Match(specs.Platform{OS: windowsOS, Architecture: "amd64", OSVersion: pl.OSVersion, OSFeatures: pl.OSFeatures})
	}
}

// runsAnywhere reports whether an entry runs on every Windows build: it names no os.version, and
// containerd's matcher for a host of no particular build accepts its features.
func runsAnywhere(pl Platform) bool {
	if pl.OSVersion != "" {
		return false
	}
	m := platforms.NewMatcher(specs.Platform{OS: windowsOS, Architecture: "amd64"})
	return m.Match(specs.Platform{OS: windowsOS, Architecture: "amd64", OSFeatures: pl.OSFeatures})
}

const windowsOS = "windows"

// buildOf cuts a Windows version to major.minor.build: 10.0.20348.2031 → 10.0.20348.
func buildOf(version string) string {
	parts := strings.SplitN(version, ".", 4)
	if len(parts) > 3 {
		parts = parts[:3]
	}
	return strings.Join(parts, ".")
}

// BuildOf is buildOf for the webhook and the audit: the build of a Windows version.
func BuildOf(version string) string { return buildOf(version) }

func majorMinor(version string) string {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[0] + "." + parts[1]
}

// buildNumberOf reads the third number of a Windows version.
func buildNumberOf(version string) (int, bool) {
	parts := strings.SplitN(version, ".", 4)
	if len(parts) < 3 {
		return 0, false
	}
	n, err := strconv.ParseUint(parts[2], 10, 16)
	return int(n), err == nil
}
