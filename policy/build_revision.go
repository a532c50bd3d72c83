package policy

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The patch level. containerd's rule ignores the revision (the fourth number of os.version), but an
// image of a newer revision than its host's is reported failing to start in process isolation, with
// hcs 0xc0370106, until the host is updated (microsoft/Windows-Containers#591: ltsc2019 and ltsc2025
// images of a month's update on hosts that had not installed it; Hyper-V isolation ran them).

// Revision reads the revision (update build revision, the fourth number) of a Windows version:
// 10.0.20348.2762 → 2762. An image's os.version and a node's status.nodeInfo.kernelVersion both carry it;
// the kubelet writes the latter on Windows as major.minor.build.UBR from the registry (kubernetes
// pkg/kubelet/winstats, GetOSInfo and GetPatchVersion). false when there is none.
func Revision(version string) (int, bool) {
	parts := strings.Split(version, ".")
	if len(parts) != 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(parts[3], 10, 31)
	return int(n), err == nil
}

// checkRevisions warns, for each image and chosen build, when the entry a node of that build would run
// is of a newer revision than every ready node of the build reports.
func (p *Policy) checkRevisions(images []containerImage, chosen []string, c *Cluster, rec *recorder) {
	if c == nil || len(c.Revisions) == 0 {
		return
	}
	for _, ci := range images {
		if ci.source != SourceImageManifest {
			continue // a tag names a build, not a revision
		}
		for _, b := range chosen {
			node, known := c.Revisions[b]
			if !known {
				continue
			}
			if v, ahead := p.revisionAhead(ci.entries, b, node); ahead && rec.room(RuleImageNewerRevision) {
				rec.add(Change{Action: Warn, Path: ci.imagePath(), Reason: newerRevisionReason(ci.shown(), v, b, node), Rule: RuleImageNewerRevision})
			}
		}
	}
}

// revisionAhead reports whether the entry of entries that a node of build host runs is of host's own
// build and of a revision above revision, and returns its os.version. containerd on Windows pulls, of
// the entries the host runs, the first by windowsMatchComparer.Less (platform_windows_compat.go), which
// orders them by os.version compared as strings, greatest first: so does this.
func (p *Policy) revisionAhead(entries []Platform, host string, revision int) (string, bool) {
	best := ""
	for _, pl := range entries {
		if p.HostRunsEntry(host, pl) && pl.OSVersion > best {
			best = pl.OSVersion
		}
	}
	r, ok := Revision(best)
	return best, ok && buildOf(best) == host && r > revision
}

func newerRevisionReason(image, version, build string, node int) string {
	return image + " (Windows " + version + ") is of a newer revision than every ready node of build " + build +
		" (at most " + build + "." + strconv.Itoa(node) + "): such images are reported failing to start on hosts not yet updated; update those nodes or use an image of their revision"
}

// RevisionsAhead lists the images of spec (by what images says of them) whose entry a node of build
// host at revision would run is of a newer revision: the audit's question of a pod and its node.
func (p *Policy) RevisionsAhead(spec *corev1.PodSpec, images map[string]Image, host string, revision int) []string {
	var out []string
	for _, ci := range p.containerImages(spec, Facts{Images: images}) {
		if ci.source != SourceImageManifest {
			continue
		}
		if v, ahead := p.revisionAhead(ci.entries, host, revision); ahead {
			out = append(out, ci.owner()+": "+ci.shown()+" (Windows "+v+")")
		}
	}
	return out
}
