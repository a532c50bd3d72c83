package policy

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Deprecated annotations that the API server still accepts but that mean nothing on Windows.
const (
	annotationSeccompPod             = "seccomp.security.alpha.kubernetes.io/pod"
	annotationSeccompContainerPrefix = "container.seccomp.security.alpha.kubernetes.io/"
	annotationAppArmorPrefix         = "container.apparmor.security.beta.kubernetes.io/"
)

// DeprecatedLinuxAnnotations are those annotations: the exact key, and the key prefixes.
func DeprecatedLinuxAnnotations() (key string, prefixes []string) {
	return annotationSeccompPod, []string{annotationSeccompContainerPrefix, annotationAppArmorPrefix}
}

// keepNonRootIntent turns a non-zero runAsUser, which is about to be stripped, into a Windows non-admin
// user when the pod names none, so that "do not run as root" survives the strip. It runs before
// stripLinuxOnly because it reads the values the strip removes. HostProcess pods choose their own
// (system) account and are left alone.
func (p *Policy) keepNonRootIntent(spec *corev1.PodSpec, rec *recorder) {
	if p.NonRootUserName == "" || HostProcess(spec) {
		return
	}
	var podUser *string
	if sc := spec.SecurityContext; sc != nil {
		if sc.WindowsOptions != nil {
			podUser = sc.WindowsOptions.RunAsUserName
		}
		if podUser == nil && sc.RunAsUser != nil && *sc.RunAsUser != 0 {
			if sc.WindowsOptions == nil {
				sc.WindowsOptions = &corev1.WindowsSecurityContextOptions{}
			}
			sc.WindowsOptions.RunAsUserName = new(p.NonRootUserName)
			podUser = sc.WindowsOptions.RunAsUserName
			rec.add(Change{Action: Inject, Path: "spec.securityContext.windowsOptions.runAsUserName", To: jsonValue(p.NonRootUserName), Reason: ReasonNonRootIntent, Rule: RuleNonRootIntent})
		}
	}
	if podUser != nil {
		return // every container without its own user inherits the pod's
	}
	forEachContainer(spec, func(at containerAt, c *corev1.Container) {
		sc := c.SecurityContext
		if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			return
		}
		if sc.WindowsOptions != nil && sc.WindowsOptions.RunAsUserName != nil {
			return
		}
		if sc.WindowsOptions == nil {
			sc.WindowsOptions = &corev1.WindowsSecurityContextOptions{}
		}
		sc.WindowsOptions.RunAsUserName = new(p.NonRootUserName)
		rec.add(Change{Action: Inject, Path: at.path(".securityContext.windowsOptions.runAsUserName"), To: jsonValue(p.NonRootUserName), Reason: ReasonNonRootIntent, Rule: RuleNonRootIntent})
	})
}

// Reasons of the rewrites the admission policies render too (policy/admissionpolicy).
const (
	ReasonNonRootIntent        = "keeps the non-root intent of the removed runAsUser"
	ReasonRestrictedNonRoot    = "Pod Security restricted requires runAsNonRoot"
	ReasonRestrictedUser       = "a non-admin user so that runAsNonRoot holds at start"
	ReasonMemoryEmptyDir       = "Windows has no memory-backed emptyDir; it is node disk either way"
	ReasonDNSPolicy            = "ClusterFirstWithHostNet is not supported on Windows"
	ReasonHugePages            = "Windows has no huge pages"
	ReasonDeprecatedAnnotation = "deprecated Linux security annotation has no meaning on Windows"
)

// Reasons of the warnings about what rewriteForWindows leaves alone.
const (
	reasonVolumeDevices = "raw block volumes are not supported on Windows; left unchanged"
	reasonHostNetwork   = "hostNetwork without hostProcess containers is not supported on Windows; left unchanged"
)

// rewriteForWindows changes what validation accepts but Windows does not honour, and warns
// about what it leaves alone.
func rewriteForWindows(pod *corev1.Pod, rec *recorder) {
	spec := &pod.Spec
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory {
			v.EmptyDir.Medium = corev1.StorageMediumDefault
			rec.add(Change{Action: Rewrite, Path: volumePath(v.Name, ".emptyDir.medium"),
				From: jsonValue(corev1.StorageMediumMemory), To: jsonValue(corev1.StorageMediumDefault),
				Reason: ReasonMemoryEmptyDir, Rule: RuleMemoryEmptyDir})
		}
	}
	if spec.DNSPolicy == corev1.DNSClusterFirstWithHostNet {
		spec.DNSPolicy = corev1.DNSClusterFirst
		rec.add(Change{Action: Rewrite, Path: "spec.dnsPolicy", From: jsonValue(corev1.DNSClusterFirstWithHostNet),
			To: jsonValue(corev1.DNSClusterFirst), Reason: ReasonDNSPolicy, Rule: RuleDNSPolicy})
	}
	dropMountPropagation(spec, rec)
	dropStopSignal(spec, rec)
	forEachContainer(spec, func(at containerAt, c *corev1.Container) {
		for _, list := range []struct {
			name string
			rl   corev1.ResourceList
		}{{"limits", c.Resources.Limits}, {"requests", c.Resources.Requests}} {
			for _, name := range sortedKeys(list.rl) {
				if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
					rec.add(Change{Action: Rewrite, Path: at.path(".resources." + list.name + "[" + clipName(string(name)) + "]"),
						From: jsonValue(list.rl[name]), Reason: ReasonHugePages, Rule: RuleHugePages})
					delete(list.rl, name)
				}
			}
		}
		if len(c.VolumeDevices) > 0 {
			rec.add(Change{Action: Warn, Path: at.path(".volumeDevices"),
				Reason: reasonVolumeDevices, Rule: RuleVolumeDevices})
		}
	})
	if spec.HostNetwork && !HostProcess(spec) {
		rec.add(Change{Action: Warn, Path: "spec.hostNetwork",
			Reason: reasonHostNetwork, Rule: RuleHostNetwork})
	}
	for _, key := range sortedKeys(pod.Annotations) {
		if key == annotationSeccompPod || strings.HasPrefix(key, annotationSeccompContainerPrefix) || strings.HasPrefix(key, annotationAppArmorPrefix) {
			rec.add(Change{Action: Rewrite, Path: named("metadata.annotations", key), From: jsonValue(pod.Annotations[key]),
				Reason: ReasonDeprecatedAnnotation, Rule: RuleDeprecatedAnnotation})
			delete(pod.Annotations, key)
		}
	}
}

// dropMountPropagation removes mount propagation, which Windows does not support. Templates need it as
// much as pods: the API server allows Bidirectional only on privileged containers, and stripping
// privileged (CSI node plugins set both) would otherwise leave an invalid template.
// ReasonMountPropagation is recorded when mountPropagation is removed.
const ReasonMountPropagation = "mount propagation is not supported on Windows"

func dropMountPropagation(spec *corev1.PodSpec, rec *recorder) {
	forEachContainer(spec, func(at containerAt, c *corev1.Container) {
		for i := range c.VolumeMounts {
			m := &c.VolumeMounts[i]
			if m.MountPropagation != nil {
				rec.add(Change{Action: Rewrite, Path: at.path(".volumeMounts[" + clipName(m.MountPath) + "].mountPropagation"),
					From: jsonValue(*m.MountPropagation), Reason: ReasonMountPropagation, Rule: RuleMountPropagation})
				m.MountPropagation = nil
			}
		}
	})
}

// ReasonStopSignal is recorded when a container's stop signal is removed.
const ReasonStopSignal = "Windows containers stop only with SIGTERM or SIGKILL"

// windowsStopSignals are the stop signals the API server accepts on a Windows pod
// (pkg/apis/core/validation, validateStopSignal; behind the ContainerStopSignals gate, alpha since 1.33).
var windowsStopSignals = []corev1.Signal{corev1.SIGTERM, corev1.SIGKILL}

// WindowsStopSignals returns the stop signals a Windows pod may name, for the admission policies.
func WindowsStopSignals() []corev1.Signal { return slices.Clone(windowsStopSignals) }

// dropStopSignal removes a stop signal Windows cannot send (SIGQUIT for a graceful nginx, say): the
// container then stops as every Windows container does. Templates need it as much as pods: the API
// server validates the signal against the template's operating system.
func dropStopSignal(spec *corev1.PodSpec, rec *recorder) {
	forEachContainer(spec, func(at containerAt, c *corev1.Container) {
		if l := c.Lifecycle; l != nil && l.StopSignal != nil && !slices.Contains(windowsStopSignals, *l.StopSignal) {
			rec.add(Change{Action: Rewrite, Path: at.path(".lifecycle.stopSignal"),
				From: jsonValue(*l.StopSignal), Reason: ReasonStopSignal, Rule: RuleStopSignal})
			l.StopSignal = nil
		}
	})
}

// satisfyRestricted makes a Windows pod pass Pod Security "restricted", which still requires
// runAsNonRoot on Windows. Setting it only narrows what the pod may do; a non-admin user is named where
// none is, because most Windows images otherwise run as ContainerAdministrator and would fail the check
// at start.
func (p *Policy) satisfyRestricted(spec *corev1.PodSpec, ns Namespace, rec *recorder) {
	if !p.PodSecurityRestricted || ns.Labels[labelPodSecurityEnforce] != "restricted" || HostProcess(spec) {
		return
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	sc := spec.SecurityContext
	if sc.RunAsNonRoot == nil {
		sc.RunAsNonRoot = new(true)
		rec.add(Change{Action: Inject, Path: "spec.securityContext.runAsNonRoot", To: jsonValue(true), Reason: ReasonRestrictedNonRoot, Rule: RuleRestrictedNonRoot})
	} else if !*sc.RunAsNonRoot {
		sc.RunAsNonRoot = new(true)
		rec.add(Change{Action: Rewrite, Path: "spec.securityContext.runAsNonRoot", From: jsonValue(false), To: jsonValue(true), Reason: ReasonRestrictedNonRoot, Rule: RuleRestrictedNonRoot})
	}
	allNamed := true
	forEachContainer(spec, func(at containerAt, c *corev1.Container) {
		if c.SecurityContext == nil {
			allNamed = false
			return
		}
		if c.SecurityContext.RunAsNonRoot != nil && !*c.SecurityContext.RunAsNonRoot {
			c.SecurityContext.RunAsNonRoot = new(true)
			rec.add(Change{Action: Rewrite, Path: at.path(".securityContext.runAsNonRoot"), From: jsonValue(false), To: jsonValue(true), Reason: ReasonRestrictedNonRoot, Rule: RuleRestrictedNonRoot})
		}
		if wo := c.SecurityContext.WindowsOptions; wo == nil || wo.RunAsUserName == nil {
			allNamed = false
		}
	})
	if p.NonRootUserName == "" || allNamed || (sc.WindowsOptions != nil && sc.WindowsOptions.RunAsUserName != nil) {
		return
	}
	if sc.WindowsOptions == nil {
		sc.WindowsOptions = &corev1.WindowsSecurityContextOptions{}
	}
	sc.WindowsOptions.RunAsUserName = new(p.NonRootUserName)
	rec.add(Change{Action: Inject, Path: "spec.securityContext.windowsOptions.runAsUserName", To: jsonValue(p.NonRootUserName),
		Reason: ReasonRestrictedUser, Rule: RuleRestrictedUser})
}
