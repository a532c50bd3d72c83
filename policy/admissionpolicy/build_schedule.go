package admissionpolicy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// The OS nodeSelector as CEL (policy/build_schedule.go: schedule pins kubernetes.io/os=windows). The
// build, its nodeSelector and the RuntimeClass stay with the webhook.

// osNodeSelector pins kubernetes.io/os=windows, replacing another value.
func osNodeSelector(s shape) part {
	ns := optional(s.spec) + ".?nodeSelector"
	key := quote(corev1.LabelOSStable)
	add := change(fmt.Sprintf("!%s[?%s].hasValue()", ns, key), policy.Inject, policy.RuleWindowsNodeSelector, text("spec.nodeSelector["+corev1.LabelOSStable+"]"), none, value("windows"),
		policy.ReasonPinned,
		fmt.Sprintf(`(%s.hasValue() ? [JSONPatch{op: "add", path: %s + jsonpatch.escapeKey(%s), value: "windows"}] : [JSONPatch{op: "add", path: %s, value: {%s: "windows"}}])`,
			ns, quote(s.specPtr+"/nodeSelector/"), key, quote(s.specPtr+"/nodeSelector"), key))
	replace := change(fmt.Sprintf("%s[?%s].orValue('windows') != 'windows'", ns, key), policy.Rewrite, policy.RuleWindowsNodeSelector, text("spec.nodeSelector["+corev1.LabelOSStable+"]"),
		escaped(fmt.Sprintf("%s[?%s].value()", ns, key)).str(), value("windows"), "conflicted with a Windows pod",
		fmt.Sprintf(`[JSONPatch{op: "replace", path: %s + jsonpatch.escapeKey(%s), value: "windows"}]`, quote(s.specPtr+"/nodeSelector/"), key))
	return join(add, replace)
}

// The scheduling gate as CEL (policy/build_gate.go: mustGate, gate). The policies cannot read a
// registry, so they gate every Windows pod whose build nothing but its images could decide, where the Go
// decision gates only those whose images are pending. A webhook that answers after them decides such a
// pod's build in the same request and removes the gate (policy's schedule, removeGate); with none
// answering, the pod is stored gated and the leader decides it. Neither the gate nor its label is
// recorded, as the OS label is not: the webhook records the gate it keeps, the leader the one it
// removes.

// gateWanted is true for a pod the Go decision's mustGate would gate if its images were pending: gating
// on (params' gate), no wincompat.io/version (the webhook's marker: the policies run again after the
// webhook and must not add back a gate it removed), not bound to a node (the API server refuses a gate
// there), not made by a DaemonSet for its node, not HostProcess, and no build of the pod's own: a
// windows-build nodeSelector, a RuntimeClass, required node affinity that limits windows-build in every
// term, or a build annotation (the Go decision reads one it knows; any is enough here, as the policies
// do not have the catalog, and an earlier pass's record is one too). The pods policies match CREATE
// alone (their rules), the only operation the Go decision gates on. hostProcess is the CEL of whether
// the pod runs HostProcess containers.
func gateWanted(s shape, hostProcess string) string {
	spec, meta := optional(s.spec), optional(s.meta)
	build := quote(corev1.LabelWindowsBuild)
	terms := spec + ".?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([])"
	return fmt.Sprintf(`%[1]s &&
  !%[2]s.?annotations[?%[3]s].hasValue() && !%[2]s.?annotations[?%[4]s].hasValue() && !%[2]s.?annotations[?%[5]s].hasValue() &&
  %[6]s.?nodeName.orValue('') == '' && !%[6]s.?runtimeClassName.hasValue() && !%[6]s.?nodeSelector[?%[7]s].hasValue() &&
  !(size(%[8]s) > 0 && %[8]s.all(t, t.?matchExpressions.orValue([]).exists(e, e.key == %[7]s && e.operator == 'In'))) &&
  !%[2]s.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false) && r.kind == 'DaemonSet') &&
  !(%[9]s)`,
		paramOn(paramGate), meta, quote(policy.AnnotationVersion), quote(policy.AnnotationBuild), quote(policy.AnnotationBuildSource),
		spec, build, terms, hostProcess)
}

// gateMissing is true when the pod lacks the gate or its label: what gateOps would add.
func gateMissing(s shape) string {
	return fmt.Sprintf("(!%s.?schedulingGates.orValue([]).exists(g, g.name == %s) || %s.?labels[?%s].orValue('') != 'true')",
		optional(s.spec), quote(policy.SchedulingGate), optional(s.meta), quote(policy.LabelGated))
}

// gatePending is true when gateOps has something to add: the changes matchCondition's clause, after
// tooLarge, which bounds its loops over the containers as the record's. The pod's own gate and label come
// first, so that a pass on a pod already gated stops there.
func gatePending(s shape) string {
	return fmt.Sprintf("(%s && %s)", gateMissing(s), gateWanted(s, hostProcessExpr(s)))
}

// gateOps adds policy.SchedulingGate after the pod's own gates and the label policy.LabelGated=true,
// each where missing. They come after the OS label's operation, which made the labels.
func gateOps(s shape) string {
	spec, meta := optional(s.spec), optional(s.meta)
	gate := quote(policy.SchedulingGate)
	return fmt.Sprintf(`(%[1]s ?
    (%[2]s.?schedulingGates.orValue([]).exists(g, g.name == %[3]s) ? [] : %[2]s.?schedulingGates.hasValue() ?
      [JSONPatch{op: "add", path: %[4]s, value: {"name": %[3]s}}] :
      [JSONPatch{op: "add", path: %[5]s, value: [{"name": %[3]s}]}]) +
    (%[6]s.?labels[?%[7]s].orValue('') == 'true' ? [] : [JSONPatch{op: "add", path: %[8]s + jsonpatch.escapeKey(%[7]s), value: "true"}]) :
    [])`,
		gateWanted(s, "variables.hostProcess"), spec, gate, quote(s.specPtr+"/schedulingGates/-"), quote(s.specPtr+"/schedulingGates"),
		meta, quote(policy.LabelGated), quote(s.metaPtr+"/labels/"))
}
