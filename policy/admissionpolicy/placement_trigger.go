package admissionpolicy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// The Windows test and spec.os as CEL (policy/placement_trigger.go: windowsReason, allowedOS,
// setWindowsOS, HostProcess).

// trigger is the Windows test, as policy's windowsReason makes it: spec.os.name=windows, or no spec.os
// and node constraints that admit only Windows (with inferOSFromNodeSelector), or, in a default-os=windows
// namespace, constraints that admit Windows at all.
func trigger(s shape, defaultWindows bool) string {
	spec := optional(s.spec)
	declared := fmt.Sprintf("%s.?os.?name.orValue('') == 'windows'", spec)
	if defaultWindows {
		return fmt.Sprintf("%s || (!%s.?os.hasValue() && %s)", declared, spec, osAllowed(s, corev1.Windows))
	}
	return fmt.Sprintf("%s || (%s && !%s.?os.hasValue() && %s && !%s)", declared, paramOn(paramInferOS), spec, osAllowed(s, corev1.Windows), osAllowed(s, corev1.Linux))
}

// inferred is the reason recorded with the spec.os a pod without one gets (the matchCondition made it a
// Windows pod), escaped for JSON (jsonText), or "" when it has spec.os already.
func inferred(s shape, defaultWindows bool) string {
	spec := optional(s.spec)
	if !defaultWindows {
		return fmt.Sprintf("%s.?os.hasValue() ? '' : %s", spec, text(policy.ReasonPinnedToWindows))
	}
	return fmt.Sprintf("%s.?os.hasValue() ? '' : %s && %s && !%s ? %s : %s", spec, paramOn(paramInferOS), osAllowed(s, corev1.Windows), osAllowed(s, corev1.Linux),
		text(policy.ReasonPinnedToWindows), text(policy.ReasonDefaultOSWindows))
}

// osAllowed is true when the nodeSelector and the required node affinity admit nodes of os, as policy's
// allowedOS reads them: every OS label of the nodeSelector names it, and (when there are terms) some
// term's OS expressions all admit it.
func osAllowed(s shape, os corev1.OSName) string {
	spec := optional(s.spec)
	labels := celList(policy.NodeOSLabels())
	name := quote(string(os))
	return fmt.Sprintf(`(%[1]s.all(l, %[2]s.?nodeSelector[?l].orValue(%[3]s) == %[3]s) &&
  (size(%[2]s.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([])) == 0 ||
   %[2]s.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).exists(t,
     t.?matchExpressions.orValue([]).all(e, !(e.key in %[1]s) ||
       (e.operator == 'In' ? %[3]s in e.?values.orValue([]) : e.operator == 'NotIn' ? !(%[3]s in e.?values.orValue([])) : e.operator != 'DoesNotExist')))))`,
		labels, spec, name)
}

// inferOS sets spec.os for a pod that is a Windows pod by its node constraints or its namespace.
func inferOS(s shape) part {
	derived := policy.Change{Rule: policy.RuleWindowsOS, Reason: policy.ReasonPinnedToWindows}
	omitted := "false"
	if !policy.ReasonWritten(derived) {
		omitted = "variables.inferred == " + quote(derived.Reason)
	}
	entry := entry(policy.Inject, policy.RuleWindowsOS, text("spec.os.name"), none, value("windows"), reason{escapedBefore("variables.inferred"), omitted})
	return part{records: fmt.Sprintf("(variables.inferred != '' ? [%s] : [])", entry), any: "variables.inferred != ''",
		ops: fmt.Sprintf(`(variables.inferred != '' ? [JSONPatch{op: "add", path: %s, value: {"name": "windows"}}] : [])`, quote(s.specPtr+"/os"))}
}

// hostProcessExpr: the pod or any container runs as a Windows HostProcess container (policy.HostProcess).
func hostProcessExpr(s shape) string {
	spec := optional(s.spec)
	expr := spec + ".?securityContext.?windowsOptions.?hostProcess.orValue(false)"
	for _, l := range containerLists {
		expr += fmt.Sprintf(" ||\n  %s.?%s.orValue([]).exists(c, c.?securityContext.?windowsOptions.?hostProcess.orValue(false))", spec, l)
	}
	return expr
}
