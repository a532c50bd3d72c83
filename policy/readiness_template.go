package policy

import corev1 "k8s.io/api/core/v1"

// Reasons of the template warnings about what pod creation will rewrite. A template keeps these fields
// (rewrites happen when each pod is created, DESIGN §2), so `helm install` and the post-renderer would
// otherwise say nothing of them.
const (
	reasonTemplateMemoryEmptyDir = "Windows has no memory-backed emptyDir: each pod gets node disk instead when it is created"
	reasonTemplateDNSPolicy      = "ClusterFirstWithHostNet is not supported on Windows: each pod gets ClusterFirst when it is created"
)

// checkTemplate warns on a workload's pod template about what its pods will meet: the rewrites and
// warnings of pod creation (hostNetwork, volumeDevices, memory-backed emptyDir, dnsPolicy), then the
// readiness checks on the spec each pod will have once the pod-creation rewrites ran (in a Pod Security
// restricted namespace, or with the policy's narrowing rewrites on, a Windows user and memory limits are
// set then, so a template is not warned about them).
//
// The Linux-only image check uses only what facts.Images holds: the webhook gives a template the answers
// its resolver had cached, never waiting on a registry for workload admission, so an image read before
// (by an earlier pod or template) is warned about at install time, and any other when each pod is
// created. A template is warned, never refused: imagesWithoutWindows: deny refuses its pods.
func (p *Policy) checkTemplate(tpl *corev1.PodTemplateSpec, facts Facts, rec *recorder) {
	spec, ns := &tpl.Spec, facts.Namespace
	if facts.Images != nil {
		for _, ci := range p.containerImages(spec, facts) {
			if ci.linuxOnly() {
				rec.add(Change{Action: Warn, Path: ci.path + ".image", Reason: linuxOnlyImageReason(ci.image, ci.platformsDescribed()), Rule: RuleLinuxOnlyImage})
			}
		}
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory {
			rec.add(Change{Action: Warn, Path: "spec.volumes[" + v.Name + "].emptyDir.medium", From: jsonValue(corev1.StorageMediumMemory),
				Reason: reasonTemplateMemoryEmptyDir, Rule: RuleMemoryEmptyDir})
		}
	}
	if spec.DNSPolicy == corev1.DNSClusterFirstWithHostNet {
		rec.add(Change{Action: Warn, Path: "spec.dnsPolicy", From: jsonValue(corev1.DNSClusterFirstWithHostNet),
			Reason: reasonTemplateDNSPolicy, Rule: RuleDNSPolicy})
	}
	forEachContainer(spec, func(path string, c *corev1.Container) {
		if len(c.VolumeDevices) > 0 {
			rec.add(Change{Action: Warn, Path: path + ".volumeDevices", Reason: reasonVolumeDevices, Rule: RuleVolumeDevices})
		}
	})
	if spec.HostNetwork && !HostProcess(spec) {
		rec.add(Change{Action: Warn, Path: "spec.hostNetwork", Reason: reasonHostNetwork, Rule: RuleHostNetwork})
	}
	// A copy, linear in the template's size: the template itself keeps what its pods will have rewritten.
	pod := &corev1.Pod{ObjectMeta: *tpl.ObjectMeta.DeepCopy(), Spec: *spec.DeepCopy()}
	discarded := &recorder{}
	rewriteForWindows(pod, discarded)
	p.satisfyRestricted(&pod.Spec, ns, discarded)
	p.nameUserForRunAsNonRoot(&pod.Spec, discarded)
	p.limitMemory(&pod.Spec, discarded)
	checkReadiness(&pod.Spec, rec)
}
