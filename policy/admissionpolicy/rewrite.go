package admissionpolicy

import (
	"fmt"
	"strings"

	"github.com/wincompat/wincompat/policy"
)

// The rewrites for Windows as CEL (policy/rewrite.go: keepNonRootIntent, rewriteForWindows,
// dropMountPropagation, dropStopSignal, satisfyRestricted).

// nonRootIntent keeps a non-zero runAsUser's intent as windowsOptions.runAsUserName before the strip
// table removes runAsUser: at pod level when the pod names no Windows user, else per container without
// its own. HostProcess pods are left alone.
func nonRootIntent(s shape) []part {
	const reason = policy.ReasonNonRootIntent
	sc := optional(s.spec) + ".?securityContext"
	// An empty nonRootUserName turns the rule off.
	const applies = userSet + " && !variables.hostProcess"
	user := userCEL
	podUser := sc + ".?windowsOptions.?runAsUserName.hasValue()"
	to := userJSON()
	pod := change(fmt.Sprintf("%s && !%s && %s.?runAsUser.orValue(0) != 0", applies, podUser, sc),
		policy.Inject, policy.RuleNonRootIntent, text("spec.securityContext.windowsOptions.runAsUserName"), none, to, reason,
		fmt.Sprintf(`(%s.?windowsOptions.hasValue() ? [JSONPatch{op: "add", path: %s, value: %s}] : [JSONPatch{op: "add", path: %s, value: {"runAsUserName": %s}}])`,
			sc, quote(s.specPtr+"/securityContext/windowsOptions/runAsUserName"), user, quote(s.specPtr+"/securityContext/windowsOptions"), user))
	// A pod-level user, given or just set, covers every container without its own.
	podCovers := fmt.Sprintf("(%s || %s.?runAsUser.orValue(0) != 0)", podUser, sc)
	containers := eachContainer(s, func(c, ptr string, path jsonText) part {
		cond := fmt.Sprintf("%s && !%s && !%s.?securityContext.?windowsOptions.?runAsUserName.hasValue() && %s.?securityContext.?runAsUser.orValue(0) != 0",
			applies, podCovers, c, c)
		ops := fmt.Sprintf(`(%s.?securityContext.?windowsOptions.hasValue() ? [JSONPatch{op: "add", path: %s + '/securityContext/windowsOptions/runAsUserName', value: %s}] : [JSONPatch{op: "add", path: %s + '/securityContext/windowsOptions', value: {"runAsUserName": %s}}])`,
			c, ptr, user, ptr, user)
		return change(cond, policy.Inject, policy.RuleNonRootIntent, concat(path, text(".securityContext.windowsOptions.runAsUserName")), none, to, reason, ops)
	})
	return []part{pod, containers}
}

// memoryVolumes are the emptyDir volumes with medium Memory, which Windows backs with node disk anyway:
// their medium goes (policy.ReasonMemoryEmptyDir).
func memoryVolumes(s shape) listVar {
	if !s.pod {
		return nothingListed("memoryVolumes")
	}
	const cond = "v.?emptyDir.?medium.orValue('') == 'Memory'"
	entry := entry(policy.Rewrite, policy.RuleMemoryEmptyDir, concat(text("spec.volumes["), escaped("v.name"), text("].emptyDir.medium")), value("Memory"), value(""),
		fixed(policy.RuleMemoryEmptyDir, policy.ReasonMemoryEmptyDir, nil))
	return listVar{name: "memoryVolumes", list: fmt.Sprintf(`%s.?volumes.orValue([]).transformList(i, v, %s ? [{"ptr": %s + '/volumes/' + string(i) + '/emptyDir/medium', "record": %s}] : []).flatten()`,
		optional(s.spec), cond, quote(s.specPtr), entry),
		any: fmt.Sprintf("%s.?volumes.orValue([]).exists(v, %s)", optional(s.spec), cond)}
}

// dnsPolicy rewrites ClusterFirstWithHostNet, which Windows does not support, to ClusterFirst.
func dnsPolicy(s shape) part {
	return change(fmt.Sprintf("%s.?dnsPolicy.orValue('') == 'ClusterFirstWithHostNet'", optional(s.spec)), policy.Rewrite, policy.RuleDNSPolicy, text("spec.dnsPolicy"),
		value("ClusterFirstWithHostNet"), value("ClusterFirst"), policy.ReasonDNSPolicy,
		fmt.Sprintf(`[JSONPatch{op: "replace", path: %s, value: "ClusterFirst"}]`, quote(s.specPtr+"/dnsPolicy")))
}

// propagation lists the containers' mount propagation, to go too: Bidirectional is valid only for
// privileged containers, which the strip table just ended, and Windows has none of it.
func propagation(s shape) listVar {
	const cond = "m.?mountPropagation.hasValue()"
	list := strings.Join(perContainer(s, func(ptr string, path jsonText) string {
		entry := entry(policy.Rewrite, policy.RuleMountPropagation, concat(path, text(".volumeMounts["), escaped("m.mountPath"), text("].mountPropagation")),
			escaped("m.mountPropagation").str(), none, fixed(policy.RuleMountPropagation, policy.ReasonMountPropagation, nil))
		return fmt.Sprintf(`c.?volumeMounts.orValue([]).transformList(j, m, %s ? [{"ptr": %s + '/volumeMounts/' + string(j) + '/mountPropagation', "record": %s}] : []).flatten()`, cond, ptr, entry)
	}), " +\n")
	return listVar{name: "propagation", list: list, any: anyContainer(s, containerLists, func(c string) string {
		return fmt.Sprintf("%s.?volumeMounts.orValue([]).exists(m, %s)", c, cond)
	})}
}

// stopSignals lists the containers' stop signals Windows cannot send (policy.RuleStopSignal), to go.
func stopSignals(s shape) listVar {
	var windows []string
	for _, sig := range policy.WindowsStopSignals() {
		windows = append(windows, quote(string(sig)))
	}
	refused := func(c string) string {
		return fmt.Sprintf("%[1]s.?lifecycle.?stopSignal.hasValue() && !(%[1]s.lifecycle.stopSignal in [%[2]s])", c, strings.Join(windows, ", "))
	}
	list := strings.Join(perContainer(s, func(ptr string, path jsonText) string {
		entry := entry(policy.Rewrite, policy.RuleStopSignal, concat(path, text(".lifecycle.stopSignal")),
			escaped("c.lifecycle.stopSignal").str(), none, fixed(policy.RuleStopSignal, policy.ReasonStopSignal, nil))
		return fmt.Sprintf(`(%s ? [{"ptr": %s + '/lifecycle/stopSignal', "record": %s}] : [])`, refused("c"), ptr, entry)
	}), " +\n")
	return listVar{name: "stopSignals", list: list, any: anyContainer(s, containerLists, refused)}
}

// hugePages lists the containers' huge page limits and requests, which Windows has none of, in the Go
// decision's order: per container, limits then requests, each by resource name.
func hugePages(s shape) listVar {
	if !s.pod {
		return nothingListed("hugePages")
	}
	const isHugePages = "k.startsWith('hugepages-')"
	list := strings.Join(perContainer(s, func(ptr string, path jsonText) string {
		var lists []string
		for _, l := range []string{"limits", "requests"} {
			entry := entry(policy.Rewrite, policy.RuleHugePages, concat(path, text(".resources."+l+"["), escaped("k"), text("]")),
				escaped("string(c.resources."+l+"[k])").str(), none, fixed(policy.RuleHugePages, policy.ReasonHugePages, nil))
			lists = append(lists, fmt.Sprintf(`c.?resources.?%[1]s.orValue({}).filter(k, %[5]s).sort().map(k, {"ptr": %[2]s + '/resources/%[1]s/' + %[4]s, "record": %[3]s})`,
				l, ptr, entry, pointerEscaped("k"), isHugePages))
		}
		return strings.Join(lists, " + ")
	}), " +\n")
	return listVar{name: "hugePages", list: list, any: anyContainer(s, containerLists, func(c string) string {
		return fmt.Sprintf("%[1]s.?resources.?limits.orValue({}).exists(k, %[2]s) || %[1]s.?resources.?requests.orValue({}).exists(k, %[2]s)", c, isHugePages)
	})}
}

// deprecatedAnnotations lists the pod's deprecated seccomp and AppArmor annotations, by key.
func deprecatedAnnotations(s shape) listVar {
	if !s.pod {
		return nothingListed("deprecatedAnnotations")
	}
	key, prefixes := policy.DeprecatedLinuxAnnotations()
	match := "k == " + quote(key)
	for _, p := range prefixes {
		match += " || k.startsWith(" + quote(p) + ")"
	}
	meta := optional(s.meta)
	entry := entry(policy.Rewrite, policy.RuleDeprecatedAnnotation, concat(text("metadata.annotations["), escaped("k"), text("]")),
		escaped(meta+".?annotations.orValue({})[k]").str(), none, fixed(policy.RuleDeprecatedAnnotation, policy.ReasonDeprecatedAnnotation, nil))
	return listVar{name: "deprecatedAnnotations", list: fmt.Sprintf(`%s.?annotations.orValue({}).filter(k, %s).sort().map(k, {"ptr": %s + '/annotations/' + %s, "record": %s})`,
		meta, match, quote(s.metaPtr), pointerEscaped("k"), entry),
		any: fmt.Sprintf("%s.?annotations.orValue({}).exists(k, %s)", meta, match)}
}

// nsRestricted is the CEL of whether the restricted rules apply: the namespace enforces Pod Security
// restricted, as the binding of this policy selects it, and the policy's podSecurityRestricted is on.
func nsRestricted(s shape) string {
	if s.restricted {
		return paramOn(paramPodSecurityRestricted)
	}
	return "false"
}

// restricted makes a pod in a namespace that enforces Pod Security restricted pass it, as policy's
// satisfyRestricted does after the strip table and the non-root intent: runAsNonRoot true at pod level
// and in no container false, and (when no user is named everywhere) a non-admin user at pod level.
// HostProcess pods are left alone. The conditions read the object before this patch, so they account for
// what the non-root intent rule adds in the same patch.
func restricted(s shape) []part {
	spec := optional(s.spec)
	sc := spec + ".?securityContext"
	// Rendered only into the policy bound to namespaces that enforce restricted (variants), and acting
	// only where the policy's podSecurityRestricted is on.
	enforced := paramOn(paramPodSecurityRestricted) + " && !variables.hostProcess"
	nonRoot := sc + ".?runAsNonRoot"
	podNonRoot := join(
		change(fmt.Sprintf("%s && !%s.hasValue()", enforced, nonRoot), policy.Inject, policy.RuleRestrictedNonRoot, text("spec.securityContext.runAsNonRoot"), none, value(true), policy.ReasonRestrictedNonRoot,
			fmt.Sprintf(`(%s.hasValue() ? [JSONPatch{op: "add", path: %s, value: true}] : [JSONPatch{op: "add", path: %s, value: {"runAsNonRoot": true}}])`,
				sc, quote(s.specPtr+"/securityContext/runAsNonRoot"), quote(s.specPtr+"/securityContext"))),
		change(fmt.Sprintf("%s && %s.orValue(true) == false", enforced, nonRoot), policy.Rewrite, policy.RuleRestrictedNonRoot, text("spec.securityContext.runAsNonRoot"), value(false), value(true), policy.ReasonRestrictedNonRoot,
			fmt.Sprintf(`[JSONPatch{op: "replace", path: %s, value: true}]`, quote(s.specPtr+"/securityContext/runAsNonRoot"))))
	containers := eachContainer(s, func(c, ptr string, path jsonText) part {
		return change(fmt.Sprintf("%s && %s.?securityContext.?runAsNonRoot.orValue(true) == false", enforced, c), policy.Rewrite, policy.RuleRestrictedNonRoot, concat(path, text(".securityContext.runAsNonRoot")), value(false), value(true),
			policy.ReasonRestrictedNonRoot, fmt.Sprintf(`[JSONPatch{op: "replace", path: %s + '/securityContext/runAsNonRoot', value: true}]`, ptr))
	})
	parts := []part{podNonRoot, containers}
	// Named after the non-root intent rule: the pod's own user, or the one the rule sets from a pod
	// runAsUser; a container's own, or the one the rule sets from its runAsUser when the pod names none.
	podNamed := fmt.Sprintf("(%s.?windowsOptions.?runAsUserName.hasValue() || %s.?runAsUser.orValue(0) != 0)", sc, sc)
	var allNamed []string
	for _, l := range containerLists {
		allNamed = append(allNamed, fmt.Sprintf("%s.?%s.orValue([]).all(c, c.?securityContext.hasValue() && (c.?securityContext.?windowsOptions.?runAsUserName.hasValue() || c.?securityContext.?runAsUser.orValue(0) != 0))", spec, l))
	}
	// The pod's securityContext exists by now when it did not before: runAsNonRoot was added with it.
	parts = append(parts, change(fmt.Sprintf("%s && %s && !%s && !(%s)", userSet, enforced, podNamed, strings.Join(allNamed, " && ")), policy.Inject, policy.RuleRestrictedUser,
		text("spec.securityContext.windowsOptions.runAsUserName"), none, userJSON(), policy.ReasonRestrictedUser,
		fmt.Sprintf(`(%s.?windowsOptions.hasValue() ? [JSONPatch{op: "add", path: %s, value: %s}] : [JSONPatch{op: "add", path: %s, value: {"runAsUserName": %s}}])`,
			sc, quote(s.specPtr+"/securityContext/windowsOptions/runAsUserName"), userCEL, quote(s.specPtr+"/securityContext/windowsOptions"), userCEL)))
	return parts
}
