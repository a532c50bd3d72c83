package policy

import corev1 "k8s.io/api/core/v1"

// Rule names the rule behind a change: a row of the rules table. Every change is made with its rule
// (Change.Rule), so that what a change means is never worked out again from its path or its wording.
// The code is not part of the record: annotations keep the format audits already read.
type Rule string

// The rules of every change but the strip table's, whose rows are rules of their own
// (LinuxOnlyField.Rule).
const (
	RuleWindowsOS            Rule = "windows-os"            // spec.os.name inferred
	RuleNonRootIntent        Rule = "non-root-intent"       // a Windows user for a stripped non-zero runAsUser
	RuleRestrictedNonRoot    Rule = "restricted-non-root"   // runAsNonRoot for Pod Security restricted
	RuleRestrictedUser       Rule = "restricted-user"       // a non-admin user for Pod Security restricted
	RuleMemoryEmptyDir       Rule = "memory-emptydir"       // emptyDir medium Memory to node disk
	RuleDNSPolicy            Rule = "dns-policy"            // ClusterFirstWithHostNet to ClusterFirst
	RuleHugePages            Rule = "huge-pages"            // hugepages-* requests and limits removed
	RuleDeprecatedAnnotation Rule = "deprecated-annotation" // deprecated seccomp and AppArmor annotations removed
	RuleMountPropagation     Rule = "mount-propagation"     // volumeMounts[].mountPropagation removed
	RuleStopSignal           Rule = "stop-signal"           // a lifecycle.stopSignal Windows cannot send removed
	RuleVolumeDevices        Rule = "volume-devices"        // warning: raw block volumes
	RuleHostNetwork          Rule = "host-network"          // warning: hostNetwork without HostProcess
	RuleInjectorOptOuts      Rule = "injector-opt-outs"     // opt-outs of Linux-only sidecar injectors
	RuleWindowsTolerations   Rule = "windows-tolerations"   // tolerations of Windows node taints
	RuleWindowsNodeSelector  Rule = "windows-node-selector" // nodeSelector kubernetes.io/os=windows
	RuleArch                 Rule = "arch"                  // nodeSelector kubernetes.io/arch
	RuleBuild                Rule = "build"                 // the build pin, and warnings about the build chosen
	RuleRuntimeClass         Rule = "runtime-class"         // the build's RuntimeClass
	RuleLinuxByDefault       Rule = "linux-by-default"      // an object with no operating system pinned to Linux
	RuleLinuxOnlyImage       Rule = "linux-only-image"      // warning: an image with no Windows entry
	RuleImageNotOnBuild      Rule = "image-not-on-build"    // warning: a build the pod chose cannot run an image
	RuleImageUnread          Rule = "image-unread"          // warning: the registry did not answer for an image
	RuleImageMirror          Rule = "image-mirror"          // warning: a mirror answered for an image, not its registry
	RuleBuildRequestIgnored  Rule = "build-request-ignored" // warning: wincompat.io/build overridden by the pod's scheduling
	RuleUnknownBuild         Rule = "unknown-build"         // warning: wincompat.io/build names no build
	RuleAffinityAllowsNone   Rule = "affinity-allows-none"  // warning: required node affinity allows no build
	RuleHyperV               Rule = "hyper-v"               // a Hyper-V RuntimeClass for images no ready node runs in process isolation
	RuleImageNewerRevision   Rule = "image-newer-revision"  // warning: an image of a newer revision than the nodes of its build
	RuleBuildGate            Rule = "build-gate"            // the scheduling gate of a pod whose images were not answered at admission
	// The narrowing rewrites the policy opts into (rewrite_narrow.go).
	RuleRunAsNonRootUser       Rule = "run-as-non-root-user"      // a non-admin user where runAsNonRoot names none
	RuleMemoryLimitFromRequest Rule = "memory-limit-from-request" // a memory limit equal to the request
	RuleMemoryLimitDefault     Rule = "memory-limit-default"      // the policy's memory limit where there is no request
)

// The rules of the run-time readiness checks: what a Windows node cannot do with a pod the API server
// accepts. Each is a row of readinessChecks.
const (
	RuleMemoryNoLimit         Rule = "memory-no-limit"          // warning: a container without a memory limit
	RuleMemoryRequestNotLimit Rule = "memory-request-not-limit" // warning: a memory request other than the limit
	RuleNonRootNoUser         Rule = "non-root-no-user"         // warning: runAsNonRoot with no Windows user
	RuleNonRootAdminUser      Rule = "non-root-admin-user"      // warning: runAsNonRoot as ContainerAdministrator
	RuleSubPath               Rule = "subpath"                  // warning: subPath and subPathExpr mounts
	RuleVolumeFileMode        Rule = "volume-file-mode"         // warning: defaultMode and items' mode
	RuleSecretOnDisk          Rule = "secret-on-disk"           // warning: Secret volumes on the node's disk
	RuleUnmountableVolume     Rule = "unmountable-volume"       // warning: volume sources Windows nodes cannot mount
	// The heuristic rows: forms recognised by the tables of readiness_heuristics*.go.
	RuleLinuxCommand               Rule = "linux-command"                   // warning: a POSIX shell or tool as a program (likely)
	RuleLinuxScriptCommand         Rule = "linux-script-command"            // warning: a shell script as a program (certain)
	RuleLinuxHostPath              Rule = "linux-host-path"                 // warning: a hostPath of the Linux kernel or system (certain)
	RuleLinuxRuntimeHostPath       Rule = "linux-runtime-host-path"         // warning: a hostPath of a Linux daemon's state (likely)
	RuleHostPathBlockDevice        Rule = "host-path-block-device"          // warning: hostPath type BlockDevice (certain)
	RuleHostPathSocketOrCharDevice Rule = "host-path-socket-or-char-device" // warning: hostPath type Socket or CharDevice (likely)
	RulePartialServiceName         Rule = "partial-service-name"            // warning: a Service named <name>.<namespace>.svc
)

// ruleRow is one row of the rules table: what a rule means.
type ruleRow struct {
	rule Rule
	// explain says where the rule comes from (a strip-table row, a policy key, a namespace label, the
	// build's source), for `wincompat mutate --explain`.
	explain func(Decision) string
	// fields are the Change.Field values of the rule's changes: together, the closed set of the changes
	// metric's field label (Change.MetricField).
	fields []string
	// reasons are the reasons the rule records that are always the same text; a rule whose reason names
	// images, builds or taints has none.
	reasons []string
}

// rulesTable is the one table of rules: the strip table's rows, then the rest.
var rulesTable = func() []ruleRow {
	var rows []ruleRow
	for _, f := range LinuxOnlyFields() {
		fields := []string{f.Path()}
		if f.Level == ContainerSecurityContextLevel {
			fields = inContainers(".securityContext." + f.Name)
		}
		rows = append(rows, ruleRow{f.Rule(), fixed("strip table: " + f.Path() + " (rejected on Windows when " + string(f.RejectedIf) + ")"), fields, []string{ReasonLinuxOnly}})
	}
	const affinityTerms = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
	pinReasons := []string{ReasonPinned, reasonPinConflict}
	return append(append(rows, []ruleRow{
		{RuleWindowsOS, fixed("policy inferOSFromNodeSelector, or namespace label " + LabelDefaultOS + "=windows"),
			[]string{"spec.os.name"}, []string{ReasonPinnedToWindows, ReasonDefaultOSWindows}},
		{RuleNonRootIntent, fixed("policy nonRootUserName"),
			append([]string{"spec.securityContext.windowsOptions.runAsUserName"}, inContainers(".securityContext.windowsOptions.runAsUserName")...), []string{ReasonNonRootIntent}},
		{RuleRestrictedNonRoot, fixed("policy podSecurityRestricted, namespace label " + LabelPodSecurityEnforce + "=restricted"),
			append([]string{"spec.securityContext.runAsNonRoot"}, inContainers(".securityContext.runAsNonRoot")...), []string{ReasonRestrictedNonRoot}},
		// The user named is the nonRootUserName knob's, in restricted namespaces only.
		{RuleRestrictedUser, fixed("policy nonRootUserName"),
			[]string{"spec.securityContext.windowsOptions.runAsUserName"}, []string{ReasonRestrictedUser}},
		{RuleMemoryEmptyDir, fixed("rewrite: memory-backed emptyDir"), []string{"spec.volumes[*].emptyDir.medium"}, []string{ReasonMemoryEmptyDir, reasonTemplateMemoryEmptyDir}},
		{RuleDNSPolicy, fixed("rewrite: dnsPolicy"), []string{"spec.dnsPolicy"}, []string{ReasonDNSPolicy, reasonTemplateDNSPolicy}},
		{RuleHugePages, fixed("rewrite: huge pages"),
			append(inContainers(".resources.requests[*]"), inContainers(".resources.limits[*]")...), []string{ReasonHugePages}},
		{RuleDeprecatedAnnotation, fixed("rewrite: deprecated Linux security annotations"), []string{"metadata.annotations[*]"}, []string{ReasonDeprecatedAnnotation}},
		{RuleMountPropagation, fixed("rewrite: mount propagation"), inContainers(".volumeMounts[*].mountPropagation"), []string{ReasonMountPropagation}},
		{RuleStopSignal, fixed("rewrite: stop signal"), inContainers(".lifecycle.stopSignal"), []string{ReasonStopSignal}},
		{RuleVolumeDevices, warning, inContainers(".volumeDevices"), []string{reasonVolumeDevices}},
		{RuleHostNetwork, warning, []string{"spec.hostNetwork"}, []string{reasonHostNetwork}},
		{RuleInjectorOptOuts, fixed("policy injectorOptOuts"), []string{"metadata.labels", "metadata.annotations"}, nil},
		{RuleWindowsTolerations, fixed("policy windowsNodeTaints, and the OS taints of ready Windows nodes"), []string{"spec.tolerations"}, nil},
		{RuleWindowsNodeSelector, fixed("Windows pods (always)"), []string{"spec.nodeSelector[" + corev1.LabelOSStable + "]"}, pinReasons},
		{RuleArch, fixed("policy arch"), []string{"spec.nodeSelector[" + corev1.LabelArchStable + "]"}, pinReasons},
		{RuleBuild, buildRule,
			[]string{"spec.nodeSelector[" + corev1.LabelWindowsBuild + "]", affinityTerms, affinityTerms + "[*].matchExpressions"}, pinReasons},
		{RuleRuntimeClass, func(d Decision) string {
			return "policy setRuntimeClassName and builds[].runtimeClassName; " + buildRule(d)
		},
			[]string{"spec.runtimeClassName"}, nil},
		{RuleLinuxByDefault, fixed("policy linuxByDefault, or namespace label " + LabelDefaultOS + "=linux"),
			[]string{"spec.nodeSelector[" + corev1.LabelOSStable + "]", affinityTerms, affinityTerms + "[*].matchExpressions"},
			[]string{linuxPinReason(reasonLinuxLabel), linuxPinReason(reasonLinuxPolicy)}},
		{RuleLinuxOnlyImage, warning, inPlacingContainers(".image"), nil},
		{RuleImageNotOnBuild, warning, inPlacingContainers(".image"), nil},
		{RuleImageUnread, warning, inPlacingContainers(".image"), nil},
		{RuleImageMirror, fixed("policy registryMirrors: a warning naming the mirror that answered for the image; nothing changed"), inPlacingContainers(".image"), nil},
		{RuleBuildRequestIgnored, warning, []string{"metadata.annotations[*]"}, nil},
		{RuleUnknownBuild, warning, []string{"metadata.annotations[*]", "namespace.annotations[*]"}, nil},
		{RuleAffinityAllowsNone, warning, []string{"spec.affinity.nodeAffinity"}, nil},
		{RuleHyperV, fixed("a RuntimeClass of the cluster whose handler is " + HyperVHandler + " (Hyper-V isolation): the image's build is older than every ready node's"),
			[]string{"spec.runtimeClassName", "spec.nodeSelector", "spec.tolerations", "spec.overhead"}, nil},
		{RuleImageNewerRevision, warning, inPlacingContainers(".image"), nil},
		{RuleBuildGate, fixed("the image resolver's mode (imageResolver.mode): a pod whose images the registry had not described at admission waits behind the gate"),
			[]string{gatePath, "spec.runtimeClassName", "spec.nodeSelector[*]", "spec.tolerations"}, []string{ReasonGated, reasonDecidedAfter}},
		{RuleRunAsNonRootUser, fixed("policy userForRunAsNonRoot, with nonRootUserName"),
			append([]string{"spec.securityContext.windowsOptions.runAsUserName"}, inPlacingContainers(".securityContext.windowsOptions.runAsUserName")...),
			[]string{ReasonRunAsNonRootUser}},
		{RuleMemoryLimitFromRequest, fixed("policy memoryLimits.fromRequests"), inPlacingContainers(".resources.limits[*]"), []string{ReasonMemoryLimitFromRequest}},
		{RuleMemoryLimitDefault, fixed("policy memoryLimits.default"), inPlacingContainers(".resources.limits[*]"), []string{ReasonMemoryLimitDefault}},
	}...), readinessRules()...)
}()

// readinessRules are the rules table's rows of the readiness checks, each built from its row of
// readinessChecks, so that its explanation, fields and reason are written once.
func readinessRules() []ruleRow {
	rows := make([]ruleRow, len(readinessChecks))
	for i, c := range readinessChecks {
		rows[i] = ruleRow{c.rule, fixed("readiness (a warning): " + c.source), c.fields, []string{c.reason}}
	}
	return rows
}

// rulesByCode finds a rule's row.
var rulesByCode = func() map[Rule]*ruleRow {
	m := make(map[Rule]*ruleRow, len(rulesTable))
	for i := range rulesTable {
		m[rulesTable[i].rule] = &rulesTable[i]
	}
	return m
}()

// RuleOf is the rule of a change: the one it was made with, or the one its record gave back (""
// for a change the record names no rule of).
func RuleOf(c Change) Rule { return c.Rule }

// Rule says where the rule behind a change comes from: a row of the strip table, a policy key, a
// rewrite, a namespace label or the source of the build (`wincompat mutate --explain` shows it). ""
// when the change has no rule the table knows.
func (d Decision) Rule(c Change) string {
	if r, ok := rulesByCode[RuleOf(c)]; ok {
		return r.explain(d)
	}
	return ""
}

// inContainers is a field of every kind of container, as Change.Field writes it.
func inContainers(field string) []string {
	return []string{"spec.containers[*]" + field, "spec.initContainers[*]" + field, "spec.ephemeralContainers[*]" + field}
}

// inPlacingContainers is a field of the containers whose images decide where a pod runs: ephemeral
// containers join a pod already placed.
func inPlacingContainers(field string) []string {
	return []string{"spec.containers[*]" + field, "spec.initContainers[*]" + field}
}

func buildRule(d Decision) string {
	if d.BuildSource == "" {
		return "the Windows build"
	}
	return "the Windows build " + d.Build + ", from " + d.BuildSource
}

func fixed(s string) func(Decision) string { return func(Decision) string { return s } }

func warning(Decision) string { return "a warning: nothing changed" }
