package admissionpolicy

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// The webhooks' matchConditions (deploy/webhook and the Helm chart) are generated here from the same
// tables as the admission policies, so that a new OS label is one edit in policy. They are a superset
// of the policy's own decision: they only keep objects away from the webhooks (Linux pods from the
// Windows webhooks, pinned objects from the Linux ones), and the policy decides exactly.

// Names of the webhooks' matchConditions, as the configurations name them.
const (
	ConditionWindowsPod       = "windows-pod"
	ConditionNotLinuxPod      = "not-linux-pod"
	ConditionWindowsTemplate  = "windows-template"
	ConditionNotLinuxTemplate = "not-linux-template"
	ConditionUnpinnedPod      = "unpinned-pod"
	ConditionUnpinnedTemplate = "unpinned-template"
	ConditionPolicyConfigMap  = "policy-configmap"
)

// WebhookConditions are the matchConditions of the mutating webhooks, one each, in the order the
// configuration lists the webhooks.
func WebhookConditions() []admissionregistrationv1.MatchCondition {
	const pod = "object.spec"
	// The pod spec of a workload's template; the webhooks see every workload kind on one path, so the
	// kind chooses where it sits (the admission policies split them into shapes instead).
	templates := "[object.kind == 'CronJob' ? object.spec.?jobTemplate.?spec.?template.?spec : " +
		"object.kind == 'PodTemplate' ? object.?template.?spec : object.spec.?template.?spec]"
	const template = "o.value()"
	eachTemplate := func(cond string) string {
		return fmt.Sprintf("%s.exists(o, o.hasValue() && %s)", templates, cond)
	}
	return []admissionregistrationv1.MatchCondition{
		{Name: ConditionWindowsPod, Expression: windowsPinned(pod)},
		{Name: ConditionNotLinuxPod, Expression: notLinuxPinned(pod)},
		{Name: ConditionWindowsTemplate, Expression: eachTemplate("(" + windowsPinned(template) + ")")},
		{Name: ConditionNotLinuxTemplate, Expression: eachTemplate("(" + notLinuxPinned(template) + ")")},
		// A DaemonSet's pod has its node chosen by the DaemonSet controller, whose own rule pins it.
		{Name: ConditionUnpinnedPod, Expression: unpinned(pod) + " && !object.metadata.?ownerReferences.orValue([]).exists(r, r.kind == 'DaemonSet' && r.?controller.orValue(false))"},
		{Name: ConditionUnpinnedTemplate, Expression: eachTemplate(unpinned(template))},
	}
}

// PolicyConfigMapCondition is the matchCondition of the policy check: the policy ConfigMap named name.
func PolicyConfigMapCondition(name string) admissionregistrationv1.MatchCondition {
	return admissionregistrationv1.MatchCondition{Name: ConditionPolicyConfigMap, Expression: "object.metadata.name == " + quote(name)}
}

// windowsPinned: the pod spec at spec declares Windows, or declares no OS and either pins Windows by
// an OS label of its nodeSelector or names an OS label in its required node affinity.
func windowsPinned(spec string) string {
	var pins []string
	for _, l := range policy.NodeOSLabels() {
		pins = append(pins, fmt.Sprintf("%s.?nodeSelector[?%s].orValue('') == %s", spec, quote(l), quote(string(corev1.Windows))))
	}
	return declaredWindows(spec) + strings.Join(append(pins, osLabelInAffinity(spec)), " || ")
}

// notLinuxPinned: the pod spec declares Windows, or declares no OS and pins no OS label of its
// nodeSelector to Linux.
func notLinuxPinned(spec string) string {
	var pins []string
	for _, l := range policy.NodeOSLabels() {
		pins = append(pins, fmt.Sprintf("%s.?nodeSelector[?%s].orValue('') != %s", spec, quote(l), quote(string(corev1.Linux))))
	}
	return declaredWindows(spec) + strings.Join(pins, " && ")
}

// unpinned: the pod spec chooses no operating system at all: no spec.os, no OS label in its
// nodeSelector or required node affinity; a pod spec (not a template) also has no node yet.
func unpinned(spec string) string {
	conds := []string{fmt.Sprintf("!has(%s.os)", spec)}
	if spec == "object.spec" {
		conds = append(conds, "!has(object.spec.nodeName)")
	}
	for _, l := range policy.NodeOSLabels() {
		conds = append(conds, fmt.Sprintf("!%s.?nodeSelector[?%s].hasValue()", spec, quote(l)))
	}
	return strings.Join(append(conds, "!"+osLabelInAffinity(spec)), " && ")
}

func declaredWindows(spec string) string {
	return fmt.Sprintf("has(%[1]s.os) ? %[1]s.os.name == %[2]s : ", spec, quote(string(corev1.Windows)))
}

// osLabelInAffinity: some term of the required node affinity has an expression on an OS label.
func osLabelInAffinity(spec string) string {
	var keys []string
	for _, l := range policy.NodeOSLabels() {
		keys = append(keys, "e.key == "+quote(l))
	}
	return fmt.Sprintf("%s.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).exists(t, t.?matchExpressions.orValue([]).exists(e, %s))",
		spec, strings.Join(keys, " || "))
}
