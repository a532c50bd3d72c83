package policy

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Rule says where the rule behind a change comes from: a row of the strip table, a policy key, a
// rewrite, a namespace label or the source of the build. It is worked out from the change and the
// decision rather than stored in the record, so the record keeps the format audits already read
// (`wincompat mutate --explain` shows it).
func (d Decision) Rule(c Change) string {
	field := c.Field()
	if c.Action == Strip {
		lower := strings.ToLower(field)
		for _, f := range LinuxOnlyFields() {
			// Containers, initContainers and ephemeralContainers share the container rows.
			if lower == strings.ToLower(f.Path()) || f.Scope == ContainerSecurityContextScope && strings.HasSuffix(lower, strings.ToLower(f.Path())) {
				return "strip table: " + f.Path() + " (rejected on Windows when " + string(f.RejectedIf) + ")"
			}
		}
	}
	for _, r := range rules {
		if (r.action == "" || r.action == c.Action) && r.matches(field, c.Reason) {
			return r.rule(d)
		}
	}
	return ""
}

// rules are the sources of every change but the strip table's, first match wins. They follow the
// decisions in this package; webhook's TestGolden checks that every change of every case has one.
var rules = []struct {
	action  Action
	matches func(field, reason string) bool
	rule    func(Decision) string
}{
	{Inject, is("spec.os.name"), fixed("policy inferOSFromNodeSelector, or namespace label " + LabelDefaultOS + "=windows")},
	{"", suffix("securityContext.windowsOptions.runAsUserName"), fixed("policy nonRootUserName")},
	{"", suffix("securityContext.runAsNonRoot"), fixed("policy podSecurityRestricted, namespace label " + LabelPodSecurityEnforce + "=restricted")},
	{Rewrite, suffix("emptyDir.medium"), fixed("rewrite: memory-backed emptyDir")},
	{Rewrite, is("spec.dnsPolicy"), fixed("rewrite: dnsPolicy")},
	{Rewrite, reason(ReasonHugePages), fixed("rewrite: huge pages")},
	{Rewrite, reason(ReasonDeprecatedAnnotation), fixed("rewrite: deprecated Linux security annotations")},
	{Rewrite, suffix("mountPropagation"), fixed("rewrite: mount propagation")},
	{Inject, func(f, r string) bool { return strings.HasPrefix(r, "opts out of Linux-only sidecar injectors") }, fixed("policy injectorOptOuts")},
	{Inject, is("spec.tolerations"), fixed("policy windowsNodeTaints, and the OS taints of ready Windows nodes")},
	{"", is("spec.nodeSelector[kubernetes.io/os]"), func(d Decision) string {
		if d.Linux {
			return "policy linuxByDefault, or namespace label " + LabelDefaultOS + "=linux"
		}
		return "Windows pods (always)"
	}},
	{Inject, func(f, _ string) bool {
		return strings.HasPrefix(f, "spec.affinity.nodeAffinity.requiredDuringScheduling")
	}, func(d Decision) string {
		if d.Linux {
			return "policy linuxByDefault, or namespace label " + LabelDefaultOS + "=linux"
		}
		return buildRule(d)
	}},
	{"", is("spec.nodeSelector[" + corev1.LabelWindowsBuild + "]"), buildRule},
	{"", is("spec.runtimeClassName"), func(d Decision) string {
		return "policy setRuntimeClassName and builds[].runtimeClassName; " + buildRule(d)
	}},
	{"", is("spec.nodeSelector[kubernetes.io/arch]"), fixed("policy arch")},
	{Warn, always, fixed("a warning: nothing changed")},
}

func buildRule(d Decision) string {
	if d.BuildSource == "" {
		return "the Windows build"
	}
	return "the Windows build " + d.Build + ", from " + d.BuildSource
}

func is(field string) func(string, string) bool {
	return func(f, _ string) bool { return f == field }
}

func suffix(s string) func(string, string) bool {
	return func(f, _ string) bool { return strings.HasSuffix(f, s) }
}

func reason(r string) func(string, string) bool {
	return func(_, got string) bool { return got == r }
}

func always(string, string) bool { return true }

func fixed(s string) func(Decision) string { return func(Decision) string { return s } }
