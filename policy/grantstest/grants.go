// Package grantstest states wincompat's security invariant for tests: a mutation never widens what a pod
// may do. The policy's fuzz test checks it on decisions, the webhook's on patches served over HTTP; both
// use this one definition so that they cannot drift apart. Only tests import it.
package grantstest

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Widened lists every way after grants more than before, one line each, or nothing. Containers are
// compared by kind and index: a mutation may change a container but never add, drop or reorder one, so
// a container the input lacks counts as all new.
//
// Granting is: hostNetwork, hostPID, hostIPC, a hostProcess container or pod, privileged,
// allowPrivilegeEscalation, an added capability, a procMount other than Default, a Windows user or GMSA
// credential spec other than the one the container ran with, and losing an effective runAsNonRoot=true
// (a container's own value, else the pod's). Losing the pod's own runAsNonRoot=true counts even when
// every container keeps its value: ephemeral containers added later inherit the pod's.
func Widened(before, after *corev1.PodSpec) []string {
	var out []string
	in := grantsOf(before)
	for _, g := range grantsOf(after) {
		if !slices.Contains(in, g) {
			out = append(out, "grants "+g)
		}
	}
	bc, ac := containersOf(before), containersOf(after)
	for _, a := range ac {
		id := a.id()
		b, found := findContainer(bc, id)
		if !found {
			continue // already reported through its grants; nothing to weaken
		}
		if b.runAsNonRoot && !a.runAsNonRoot {
			out = append(out, id+" lost runAsNonRoot=true")
		}
		if b.userName != nil && !equalPtr(b.userName, a.userName) {
			out = append(out, fmt.Sprintf("%s runs as %s instead of %s", id, str(a.userName), *b.userName))
		}
		if !equalPtr(b.gmsa, a.gmsa) || !equalPtr(b.gmsaName, a.gmsaName) {
			out = append(out, fmt.Sprintf("%s has a different GMSA credential spec", id))
		}
	}
	if podNonRoot(before) && !podNonRoot(after) {
		out = append(out, "pod lost runAsNonRoot=true")
	}
	return out
}

func grantsOf(spec *corev1.PodSpec) []string {
	var g []string
	if spec.HostNetwork {
		g = append(g, "hostNetwork")
	}
	if spec.HostPID {
		g = append(g, "hostPID")
	}
	if spec.HostIPC {
		g = append(g, "hostIPC")
	}
	if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil && isTrue(sc.WindowsOptions.HostProcess) {
		g = append(g, "pod hostProcess")
	}
	for _, c := range containersOf(spec) {
		sc := c.sc
		if sc == nil {
			continue
		}
		id := c.id()
		if isTrue(sc.Privileged) {
			g = append(g, id+" privileged")
		}
		if isTrue(sc.AllowPrivilegeEscalation) {
			g = append(g, id+" allowPrivilegeEscalation")
		}
		if sc.Capabilities != nil {
			for _, cap := range sc.Capabilities.Add {
				g = append(g, id+" capability "+string(cap))
			}
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			g = append(g, id+" procMount "+string(*sc.ProcMount))
		}
		if sc.WindowsOptions != nil && isTrue(sc.WindowsOptions.HostProcess) {
			g = append(g, id+" hostProcess")
		}
	}
	return g
}

// container is what Widened needs of one container: its own security context and the settings it
// inherits from the pod.
type container struct {
	kind         string
	index        int
	sc           *corev1.SecurityContext
	runAsNonRoot bool
	userName     *string
	gmsa         *string
	gmsaName     *string
}

func (c container) id() string { return fmt.Sprintf("%s[%d]", c.kind, c.index) }

func containersOf(spec *corev1.PodSpec) []container {
	var out []container
	add := func(kind string, i int, sc *corev1.SecurityContext) {
		c := container{kind: kind, index: i, sc: sc, runAsNonRoot: podNonRoot(spec)}
		if psc := spec.SecurityContext; psc != nil && psc.WindowsOptions != nil {
			c.userName, c.gmsa, c.gmsaName = psc.WindowsOptions.RunAsUserName, psc.WindowsOptions.GMSACredentialSpec, psc.WindowsOptions.GMSACredentialSpecName
		}
		if sc != nil {
			if sc.RunAsNonRoot != nil {
				c.runAsNonRoot = *sc.RunAsNonRoot
			}
			if wo := sc.WindowsOptions; wo != nil {
				c.userName = cmpOr(wo.RunAsUserName, c.userName)
				c.gmsa = cmpOr(wo.GMSACredentialSpec, c.gmsa)
				c.gmsaName = cmpOr(wo.GMSACredentialSpecName, c.gmsaName)
			}
		}
		out = append(out, c)
	}
	for i := range spec.InitContainers {
		add("initContainers", i, spec.InitContainers[i].SecurityContext)
	}
	for i := range spec.Containers {
		add("containers", i, spec.Containers[i].SecurityContext)
	}
	for i := range spec.EphemeralContainers {
		add("ephemeralContainers", i, spec.EphemeralContainers[i].SecurityContext)
	}
	return out
}

func findContainer(list []container, id string) (container, bool) {
	for _, c := range list {
		if c.id() == id {
			return c, true
		}
	}
	return container{}, false
}

func podNonRoot(spec *corev1.PodSpec) bool {
	return spec.SecurityContext != nil && isTrue(spec.SecurityContext.RunAsNonRoot)
}

func isTrue(b *bool) bool { return b != nil && *b }

// cmpOr is the container's own setting when it has one, else the pod's, as the kubelet resolves it.
func cmpOr(own, pod *string) *string {
	if own != nil {
		return own
	}
	return pod
}

func equalPtr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func str(s *string) string {
	if s == nil {
		return "the image's default user"
	}
	return *s
}
