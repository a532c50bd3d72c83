package admissionpolicy

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/wincompat/wincompat/policy"
)

// The rewrites that narrow a pod where the policy opts in (policy/rewrite_narrow.go: userForRunAsNonRoot,
// memoryLimits), as CEL. They need no cluster state, so the admission policies make them too and a pod
// admitted while the webhook is down gets them all the same. Rendered only when the policy turns them
// on (params' userForRunAsNonRoot, memoryLimitsFromRequests, memoryLimitsDefault).

// narrowVariables are the variables the narrowing parts read, to come before the record.
func narrowVariables(s shape) []admissionregistrationv1.Variable {
	return []admissionregistrationv1.Variable{{Name: "nonRootUserAt", Expression: nonRootUserAt(s)}}
}

// userForRunAsNonRoot is true when the policy turns the rule on, and names the user it needs.
const userForRunAsNonRoot = "(params.data." + paramUserForRunAsNonRoot + " == 'true' && " + userSet + ")"

// nonRootUserAt says where the user for runAsNonRoot goes, as policy's nameUserForRunAsNonRoot decides
// after the non-root intent and Pod Security restricted rules (which the same patch applies, so it reads
// their effect from the object before it): "pod", "containers" (those that ask), or "" (nowhere). One
// variable, so that each container's condition does not loop over the containers again. "" too where
// the policy turns the rule off.
func nonRootUserAt(s shape) string {
	spec := optional(s.spec)
	sc := spec + ".?securityContext"
	enforced := nsRestricted(s)
	var allNamed, needs []string
	for _, l := range containerLists {
		allNamed = append(allNamed, fmt.Sprintf("%s.?%s.orValue([]).all(c, c.?securityContext.hasValue() && %s)", spec, l, containerUser("c")))
	}
	for _, l := range startedLists {
		needs = append(needs, fmt.Sprintf("%s.?%s.orValue([]).exists(c, !%s && (%s || c.?securityContext.?runAsNonRoot.orValue(true)))", spec, l, containerUser("c"), enforced))
	}
	// The pod's user once the earlier rules ran: its own, the non-root intent's from its runAsUser, or
	// Pod Security restricted's where some container names none.
	podUser := fmt.Sprintf("%[1]s.?windowsOptions.?runAsUserName.hasValue() || %[1]s.?runAsUser.orValue(0) != 0 || (%[2]s && !(%[3]s))", sc, enforced, strings.Join(allNamed, " && "))
	return fmt.Sprintf("!%s || variables.hostProcess || %s ? '' :\n  (%s || %s.?runAsNonRoot.orValue(false)) ? ((%s) ? 'pod' : '') :\n  'containers'",
		userForRunAsNonRoot, podUser, enforced, sc, strings.Join(needs, " || "))
}

// containerUser: container c names a Windows user once the non-root intent rule ran: its own, or the
// one the rule gives it from its runAsUser.
func containerUser(c string) string {
	return fmt.Sprintf("(%[1]s.?securityContext.?windowsOptions.?runAsUserName.hasValue() || %[1]s.?securityContext.?runAsUser.orValue(0) != 0)", c)
}

// runAsNonRootUser names the policy's user where runAsNonRoot: true has none (variables.nonRootUserAt).
// At pod level the pod's securityContext exists (its runAsNonRoot is true); per container, the
// container's does (its own runAsNonRoot is true).
func runAsNonRootUser(s shape) part {
	const user = userCEL
	sc := optional(s.spec) + ".?securityContext"
	pod := change("variables.nonRootUserAt == 'pod'", policy.Inject, policy.RuleRunAsNonRootUser, text("spec.securityContext.windowsOptions.runAsUserName"), none, userJSON(), policy.ReasonRunAsNonRootUser,
		fmt.Sprintf(`(%s.?windowsOptions.hasValue() ? [JSONPatch{op: "add", path: %s, value: %s}] : [JSONPatch{op: "add", path: %s, value: {"runAsUserName": %s}}])`,
			sc, quote(s.specPtr+"/securityContext/windowsOptions/runAsUserName"), user, quote(s.specPtr+"/securityContext/windowsOptions"), user))
	containers := eachStarted(s, func(c, ptr string, path jsonText) part {
		cond := fmt.Sprintf("variables.nonRootUserAt == 'containers' && !%s && %s.?securityContext.?runAsNonRoot.orValue(false)", containerUser(c), c)
		ops := fmt.Sprintf(`(%[1]s.?securityContext.?windowsOptions.hasValue() ? [JSONPatch{op: "add", path: %[2]s + '/securityContext/windowsOptions/runAsUserName', value: %[3]s}] : [JSONPatch{op: "add", path: %[2]s + '/securityContext/windowsOptions', value: {"runAsUserName": %[3]s}}])`,
			c, ptr, user)
		return change(cond, policy.Inject, policy.RuleRunAsNonRootUser, concat(path, text(".securityContext.windowsOptions.runAsUserName")), none, userJSON(), policy.ReasonRunAsNonRootUser, ops)
	})
	return join(pod, containers)
}

// memoryLimits gives each container and init container without a memory limit one, as policy's
// limitMemory does: its request (above zero) with fromRequests, the default where it has no request.
// The object's quantities are in the API server's canonical form, as the webhook reads them, so both
// engines record the same text.
func memoryLimits(s shape) part {
	def := param(paramDefaultMemoryLimit)
	return eachStarted(s, func(c, ptr string, path jsonText) part {
		limited := c + ".?resources.?limits[?'memory'].hasValue()"
		request := c + ".?resources.?requests[?'memory']"
		at := concat(path, text(".resources.limits[memory]"))
		return join(
			change(fmt.Sprintf("%s && !variables.hostProcess && !%s && %s.orValue('0') != '0'", paramOn(paramMemoryFromRequests), limited, request), policy.Inject, policy.RuleMemoryLimitFromRequest, at, none,
				escaped(request+".value()").str(), policy.ReasonMemoryLimitFromRequest, addMemoryLimit(c, ptr, request+".value()")),
			change(fmt.Sprintf("%s != '' && !variables.hostProcess && !%s && !%s.hasValue()", def, limited, request), policy.Inject, policy.RuleMemoryLimitDefault, at, none,
				escaped(def).str(), policy.ReasonMemoryLimitDefault, addMemoryLimit(c, ptr, def)))
	})
}

// addMemoryLimit adds limits.memory = q (a CEL string) to the container at ptr, making what is missing
// on the way.
func addMemoryLimit(c, ptr, q string) string {
	return fmt.Sprintf(`(%[1]s.?resources.?limits.hasValue() ? [JSONPatch{op: "add", path: %[2]s + '/resources/limits/memory', value: %[3]s}] :
    %[1]s.?resources.hasValue() ? [JSONPatch{op: "add", path: %[2]s + '/resources/limits', value: {"memory": %[3]s}}] :
    [JSONPatch{op: "add", path: %[2]s + '/resources', value: {"limits": {"memory": %[3]s}}}])`, c, ptr, q)
}
