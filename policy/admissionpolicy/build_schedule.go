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
