package policy

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// HyperVHandler is the CRI runtime handler with which containerd runs Windows containers in Hyper-V
// isolation: containerd's default Windows configuration names it next to runhcs-wcow-process
// (containerd internal/cri/config/config_windows.go, SandboxIsolation 1), and hcsshim's CRI tests and AKS
// add build-pinned variants, HyperVHandler-<build> (runhcs-wcow-hypervisor-17763), whose utility VM
// and sandbox are of that build.
const HyperVHandler = "runhcs-wcow-hypervisor"

// HyperVRuns is Hyper-V isolation's own rule: a host runs, in a utility VM, an image of its own build or
// of any older one (Microsoft's "Windows container version compatibility", the Hyper-V isolation column;
// windows-containers-in-kubernetes-docs-v1.17-1.20.txt, "Hyper-V isolation": backward compatibility
// without rebuilding the containers). An entry without os.version runs anywhere.
func HyperVRuns(host string, pl Platform) bool {
	if pl.OSVersion == "" {
		return true
	}
	h, okH := buildNumberOf(host)
	i, okI := buildNumberOf(pl.OSVersion)
	return okH && okI && majorMinor(host) == majorMinor(pl.OSVersion) && i <= h
}

// hyperVClass is a RuntimeClass of the cluster whose handler runs Hyper-V isolated containers.
type hyperVClass struct {
	name string
	rc   RuntimeClass
	// guest is the build a build-pinned handler runs (10.0.17763), "" for the plain handler.
	guest string
}

// HyperVGuest reports whether handler runs Hyper-V isolated Windows containers, and the build its
// utility VM is pinned to ("" for any build).
func HyperVGuest(handler string) (guest string, ok bool) {
	if handler == HyperVHandler {
		return "", true
	}
	suffix, found := strings.CutPrefix(handler, HyperVHandler+"-")
	if !found || len(suffix) != 5 || strings.Trim(suffix, "0123456789") != "" {
		return "", false
	}
	return "10.0." + suffix, true
}

// hyperVClasses are the cluster's Hyper-V RuntimeClasses, by name, so that the choice is stable.
func hyperVClasses(c *Cluster) []hyperVClass {
	var out []hyperVClass
	for _, name := range sortedKeys(c.RuntimeClasses) {
		rc := c.RuntimeClasses[name]
		if guest, ok := HyperVGuest(rc.Handler); ok {
			out = append(out, hyperVClass{name: name, rc: rc, guest: guest})
		}
	}
	return out
}

// runsAll reports whether class k on a node of build host runs every image that limits where the
// pod runs: Hyper-V's rule (HyperVRuns) for some entry of each, of the class's guest build if it has one.
func (k hyperVClass) runsAll(images []containerImage, host string) bool {
	return !slices.ContainsFunc(images, func(ci containerImage) bool {
		return ci.constrains() && !slices.ContainsFunc(ci.entries, func(pl Platform) bool {
			return HyperVRuns(host, pl) && (k.guest == "" || buildOf(pl.OSVersion) == k.guest || pl.OSVersion == "")
		})
	})
}

// hosts are the builds of builds (within pins, unless nil) that the class's nodeSelector allows and on
// which it runs images.
func (k hyperVClass) hosts(images []containerImage, builds, pins []string) []string {
	return keep(builds, func(host string) bool {
		if pins != nil && !slices.Contains(pins, host) {
			return false
		}
		if v, set := k.rc.NodeSelector[corev1.LabelWindowsBuild]; set && v != host {
			return false
		}
		return k.runsAll(images, host)
	})
}

// hyperVPlacement finds, when no ready node can run the pod's images in process isolation, the first
// Hyper-V RuntimeClass that can, and the ready builds it would run them on: builds not older than the
// images', that its nodeSelector allows, with nothing in the pod's nodeSelector contradicting the class.
func (p *Policy) hyperVPlacement(q *buildQuery) (hyperVClass, []string, bool) {
	c := q.facts.Cluster
	spec := &q.pod.Spec
	for _, k := range hyperVClasses(c) {
		if contradicts(spec.NodeSelector, k.rc.NodeSelector) {
			continue
		}
		if hosts := k.hosts(q.images, c.Builds, nil); len(hosts) > 0 {
			return k, hosts, true
		}
	}
	return hyperVClass{}, nil, false
}

// contradicts reports whether a nodeSelector gives one of want's keys another value: the RuntimeClass
// admission plugin would then refuse the pod.
func contradicts(have, want map[string]string) bool {
	for key, v := range want {
		if got, set := have[key]; set && got != v {
			return true
		}
	}
	return false
}

// useHyperV names the Hyper-V class on the pod and gives it the class's scheduling and overhead, as the
// RuntimeClass admission plugin does: recorded, so the warning and the audit say where the pod may
// go, and right whether or not the plugin runs again after wincompat (the real API server's does, and
// finds them equal: test/e2e TestHyperVPlacement). The caller pinned the builds.
func (p *Policy) useHyperV(spec *corev1.PodSpec, k hyperVClass, hosts []string, images []containerImage, rec *recorder) {
	spec.RuntimeClassName = new(k.name)
	rec.add(Change{Action: Inject, Path: "spec.runtimeClassName", To: jsonValue(k.name),
		Reason: "Hyper-V isolated (RuntimeClass " + k.name + ", handler " + k.rc.Handler + "): no ready node's build runs " +
			hyperVImages(images) + " in process isolation; Windows build " + strings.Join(hosts, " or ") + " runs it in a utility VM", Rule: RuleHyperV})
	why := "scheduling of RuntimeClass " + k.name
	// One change for the class's keys, whatever they are named: a metric label takes no key of theirs.
	added := map[string]string{}
	for key, v := range k.rc.NodeSelector {
		if _, set := spec.NodeSelector[key]; set {
			continue // equal: contradicts() ruled the rest out
		}
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[key], added[key] = v, v
	}
	if len(added) > 0 {
		rec.add(Change{Action: Inject, Path: "spec.nodeSelector", To: jsonValue(added), Reason: why, Rule: RuleHyperV})
	}
	for _, t := range k.rc.Tolerations {
		if slices.ContainsFunc(spec.Tolerations, func(o corev1.Toleration) bool { return o.MatchToleration(&t) }) {
			continue
		}
		spec.Tolerations = append(spec.Tolerations, t)
		rec.add(Change{Action: Inject, Path: "spec.tolerations", To: jsonValue(t), Reason: why, Rule: RuleHyperV})
	}
	if len(k.rc.Overhead) > 0 && spec.Overhead == nil {
		spec.Overhead = k.rc.Overhead.DeepCopy()
		rec.add(Change{Action: Inject, Path: "spec.overhead", To: jsonValue(spec.Overhead), Reason: why, Rule: RuleHyperV})
	}
}

// hyperVImages names the images that decided the placement.
func hyperVImages(images []containerImage) string {
	var parts []string
	for _, ci := range images {
		if ci.constrains() {
			parts = append(parts, ci.describe())
		}
	}
	return strings.Join(parts, ", ")
}

// HyperVBuilds answers, for the audit, "on which of builds would Hyper-V isolation run this pod?": the
// builds its pins (nodeSelector, required node affinity) allow on which one of the Hyper-V RuntimeClasses
// of classes (by handler) runs every image that limits where it runs (images by the registry's answers,
// else by tags), within the class's nodeSelector. It returns the first such class by name, and its
// builds; "" and nil when none.
func (p *Policy) HyperVBuilds(spec *corev1.PodSpec, images map[string]Image, builds []string, classes map[string]RuntimeClass) (string, []string) {
	pins := PinnedBuilds(spec)
	cis := p.containerImages(spec, Facts{Images: images})
	if slices.ContainsFunc(cis, containerImage.linuxOnly) {
		return "", nil // no isolation runs an image with no Windows entry
	}
	for _, k := range hyperVClasses(&Cluster{RuntimeClasses: classes}) {
		if hosts := k.hosts(cis, builds, pins); len(hosts) > 0 {
			return k.name, hosts
		}
	}
	return "", nil
}
