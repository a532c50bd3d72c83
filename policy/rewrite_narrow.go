package policy

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The rewrites of this file narrow what a Windows pod may do, and only where the policy opts in
// (userForRunAsNonRoot, memoryLimits): each turns a pod the API server admits but the node runs badly
// into one the node runs as its author asked, at a cost the author should hear about, so each change is
// recorded and warned about like every other. They run on Pods at creation, never on templates (a
// workload's stored spec stays what its author wrote), and never on HostProcess pods, which run as a
// host account and are node agents whose memory the node's owner sizes. Ephemeral containers are left
// alone: they join a running pod, cannot set resources, and take the pod's user.

// Reasons of the narrowing rewrites. Sources: windows-containers-in-kubernetes-docs-v1.24.txt, "Field
// compatibility for container specifications" (runAsNonRoot keeps a container from running as
// ContainerAdministrator) and "Command line options for the kubelet" (no OOM eviction, no
// MemoryPressure); windows-containers-in-kubernetes-docs-v1.17-1.20.txt, "Resource Reservations",
// "Memory Reservations" (no OOM killer: memory is paged; set limits, or limits equal to requests, so the
// scheduler stops at a full node).
const (
	ReasonRunAsNonRootUser = "runAsNonRoot names no Windows user, and the kubelet refuses to start an image whose default user is ContainerAdministrator; " +
		"with this non-admin user an image that works only as an administrator fails to start instead"
	ReasonMemoryLimitFromRequest = "Windows has no OOM killer and no eviction: without a limit a container can take the node's memory; the limit is its request"
	ReasonMemoryLimitDefault     = "Windows has no OOM killer and no eviction: without a limit a container can take the node's memory; the limit is the policy's default, " +
		"and the API server sets the memory request to it, so the pod needs that much free on a node (and in the namespace's quota) to be scheduled"
)

// adminUserNames are user names that run as an administrator in a Windows container, compared as Windows
// compares user names (without case) on the part after any domain. A policy naming one would make every
// rule that names nonRootUserName widen instead of narrow, so Validate refuses them.
var adminUserNames = []struct{ name, why string }{
	// The one name the kubelet checks (pkg/kubelet/kuberuntime/security_context_windows.go,
	// verifyRunAsNonRoot, windowsRootUserName; case-insensitive, on the whole name). The domain form is
	// the same account, though the kubelet would let it through.
	{"ContainerAdministrator", "the kubelet treats it as root and refuses it under runAsNonRoot"},
	// Windows' built-in administrator and the system account (NT AUTHORITY\SYSTEM, a HostProcess
	// account) are administrators wherever they exist.
	{"Administrator", "Windows' built-in administrator"},
	{"SYSTEM", "the system account, more than an administrator"},
	{"LocalSystem", "the system account, more than an administrator"},
}

// adminUser says whether name is an administrator account, and why.
func adminUser(name string) (bool, string) {
	user := name[strings.LastIndex(name, `\`)+1:]
	for _, a := range adminUserNames {
		if strings.EqualFold(user, a.name) {
			return true, a.why
		}
	}
	return false, ""
}

// memoryLimit parses a memoryLimits.default; msg says what is wrong with it.
func memoryLimit(s string) (q resource.Quantity, msg string) {
	q, err := resource.ParseQuantity(s)
	switch {
	case err != nil:
		return q, "not a quantity: use bytes with a suffix such as 512Mi or 2Gi"
	case q.Sign() <= 0:
		return q, "a memory limit must be more than zero"
	case q.MilliValue()%1000 != 0:
		return q, "not a whole number of bytes: use a suffix such as Mi or Gi, not m"
	}
	return q, ""
}

// DefaultMemoryLimit is memoryLimits.default written as the API server writes a quantity (0.5Gi is
// 512Mi), as both engines set and record it; "" when there is none.
func (p *Policy) DefaultMemoryLimit() string {
	if p.MemoryLimits.Default == "" {
		return ""
	}
	q, _ := memoryLimit(p.MemoryLimits.Default) // Validate refused a bad one
	return q.String()
}

// nameUserForRunAsNonRoot names nonRootUserName where a container's runAsNonRoot (its own, else the
// pod's) is true and no Windows user is named for it: the kubelet then checks the image's default user
// and refuses ContainerAdministrator, the default of most Windows images. With a pod-level runAsNonRoot
// the user goes at pod level, which every container without its own inherits; otherwise on each
// container that asks. It runs after the other rules that name users, so it only fills what they left.
func (p *Policy) nameUserForRunAsNonRoot(spec *corev1.PodSpec, rec *recorder) {
	if !p.UserForRunAsNonRoot || p.NonRootUserName == "" || HostProcess(spec) {
		return
	}
	psc := spec.SecurityContext
	if psc != nil && psc.WindowsOptions != nil && psc.WindowsOptions.RunAsUserName != nil {
		return // every container has a user: its own or the pod's
	}
	podNonRoot := psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	needs := func(c *corev1.Container) bool {
		sc := c.SecurityContext
		if sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.RunAsUserName != nil {
			return false
		}
		if sc != nil && sc.RunAsNonRoot != nil {
			return *sc.RunAsNonRoot
		}
		return podNonRoot
	}
	if podNonRoot {
		found := false
		forEachPlacingContainer(spec, func(_ containerAt, c *corev1.Container) { found = found || needs(c) })
		if found {
			if psc.WindowsOptions == nil {
				psc.WindowsOptions = &corev1.WindowsSecurityContextOptions{}
			}
			psc.WindowsOptions.RunAsUserName = new(p.NonRootUserName)
			rec.add(Change{Action: Inject, Path: "spec.securityContext.windowsOptions.runAsUserName", To: jsonValue(p.NonRootUserName),
				Reason: ReasonRunAsNonRootUser, Rule: RuleRunAsNonRootUser})
		}
		return
	}
	forEachPlacingContainer(spec, func(at containerAt, c *corev1.Container) {
		if !needs(c) {
			return
		}
		if c.SecurityContext.WindowsOptions == nil { // needs is true only with the container's own runAsNonRoot
			c.SecurityContext.WindowsOptions = &corev1.WindowsSecurityContextOptions{}
		}
		c.SecurityContext.WindowsOptions.RunAsUserName = new(p.NonRootUserName)
		rec.add(Change{Action: Inject, Path: at.path(".securityContext.windowsOptions.runAsUserName"), To: jsonValue(p.NonRootUserName),
			Reason: ReasonRunAsNonRootUser, Rule: RuleRunAsNonRootUser})
	})
}

// limitMemory gives containers without a memory limit one, as memoryLimits says: their request
// (fromRequests), or the default where they have neither. A limit already there, whatever its value, and
// every request are left as they are; a request of zero gives no limit (a zero limit is no bound).
func (p *Policy) limitMemory(spec *corev1.PodSpec, rec *recorder) {
	m := p.MemoryLimits
	if (!m.FromRequests && m.Default == "") || HostProcess(spec) {
		return
	}
	def, _ := memoryLimit(p.DefaultMemoryLimit()) // used only when there is one
	forEachPlacingContainer(spec, func(at containerAt, c *corev1.Container) {
		if _, limited := c.Resources.Limits[corev1.ResourceMemory]; limited {
			return
		}
		request, requested := c.Resources.Requests[corev1.ResourceMemory]
		var limit resource.Quantity
		var reason string
		var rule Rule
		switch {
		case requested && m.FromRequests && request.Sign() > 0:
			limit, reason, rule = request.DeepCopy(), ReasonMemoryLimitFromRequest, RuleMemoryLimitFromRequest
		case !requested && m.Default != "":
			limit, reason, rule = def.DeepCopy(), ReasonMemoryLimitDefault, RuleMemoryLimitDefault
		default:
			return
		}
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		c.Resources.Limits[corev1.ResourceMemory] = limit
		rec.add(Change{Action: Inject, Path: at.path(".resources.limits[" + string(corev1.ResourceMemory) + "]"), To: jsonValue(limit),
			Reason: reason, Rule: rule})
	})
}
