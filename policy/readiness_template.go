package policy

import corev1 "k8s.io/api/core/v1"

// Reasons of the template warnings about what pod creation will rewrite. A template keeps these fields
// (rewrites happen when each pod is created), so `helm install` and the post-renderer would
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
			if ci.linuxOnly() && rec.room(RuleLinuxOnlyImage) {
				rec.add(Change{Action: Warn, Path: ci.imagePath(), Reason: linuxOnlyImageReason(ci.shown(), ci.platformsDescribed()), Rule: RuleLinuxOnlyImage})
			}
		}
	}
	// A copy, linear in the template's size: the template itself keeps what its pods will have rewritten.
	pod := &corev1.Pod{ObjectMeta: *tpl.ObjectMeta.DeepCopy(), Spec: *spec.DeepCopy()}
	atCreation := &recorder{}
	rewriteForWindows(pod, atCreation)
	for _, c := range atCreation.changes {
		// What pod creation rewrites or warns about, told on the template, which keeps it. The rest of
		// pod creation's rewrites (huge pages, deprecated annotations) are told on the pods.
		switch c.Rule {
		case RuleMemoryEmptyDir:
			c.Action, c.To, c.Reason = Warn, nil, reasonTemplateMemoryEmptyDir
		case RuleDNSPolicy:
			c.Action, c.To, c.Reason = Warn, nil, reasonTemplateDNSPolicy
		case RuleVolumeDevices, RuleHostNetwork:
		default:
			continue
		}
		rec.add(c)
	}
	discarded := &recorder{}
	p.satisfyRestricted(&pod.Spec, ns, discarded)
	p.nameUserForRunAsNonRoot(&pod.Spec, discarded)
	p.limitMemory(&pod.Spec, discarded)
	checkReadiness(&pod.Spec, rec)
}
