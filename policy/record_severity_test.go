package policy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kptr "k8s.io/utils/ptr"
)

// Every rule that only warns is a warning, and the table names no rule the rules table does not know:
// a new warning rule is decided, not defaulted.
func TestWarnSeverities(t *testing.T) {
	for _, r := range rulesTable {
		explained := r.explain(Decision{})
		if explained != warning(Decision{}) && !strings.HasPrefix(explained, "readiness (a warning)") {
			continue
		}
		if s, ok := warnSeverities[r.rule]; !ok || s != SeverityWarning {
			t.Errorf("rule %s only warns, but its Warn changes have severity %q", r.rule, s)
		}
	}
	for rule := range warnSeverities {
		if _, ok := rulesByCode[rule]; !ok {
			t.Errorf("severity table names %q, which is no rule", rule)
		}
	}
}

func TestChangeSeverity(t *testing.T) {
	for _, tc := range []struct {
		c    Change
		want Severity
	}{
		{Change{Action: Strip, Rule: LinuxOnlyFields()[0].Rule()}, SeverityInfo},
		{Change{Action: Rewrite, Rule: RuleDNSPolicy}, SeverityInfo},
		{Change{Action: Inject, Rule: RuleWindowsTolerations}, SeverityInfo},
		// A made change is info whatever its rule: the rule says why, the action what happened.
		{Change{Action: Inject, Rule: RuleBuild}, SeverityInfo},
		{Change{Action: Warn, Rule: RuleBuild}, SeverityWarning},
		{Change{Action: Warn, Rule: RuleMemoryNoLimit}, SeverityWarning},
		{Change{Action: Warn, Rule: RuleImageMirror}, SeverityInfo},
		{Change{Action: Warn, Rule: RuleDNSPolicy}, SeverityInfo}, // on a template: each pod gets it rewritten
		{Change{Action: Warn}, SeverityWarning},                   // a record naming no rule
		{Change{Action: Warn, Rule: "from-a-newer-version"}, SeverityWarning},
		{Change{Action: "unknown"}, SeverityWarning},
	} {
		if got := tc.c.Severity(); got != tc.want {
			t.Errorf("%s by %q: severity %q, want %q", tc.c.Action, tc.c.Rule, got, tc.want)
		}
	}
}

// The example Windows pod: the one warning to act on (no memory limit) comes first and is marked; the
// changes wincompat made as intended follow, unmarked. Warnings and Messages are the same groups.
func TestWarningsPutWhatNeedsActionFirst(t *testing.T) {
	var pod corev1.Pod
	pod.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/shell": "runtime/default"}
	pod.Spec = corev1.PodSpec{
		OS:              &corev1.PodOS{Name: corev1.Windows},
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: kptr.To(true), RunAsUser: kptr.To[int64](1000)},
		Containers: []corev1.Container{{Name: "shell", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022",
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: kptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
	}
	d, err := Default().Decide(&pod, Facts{Operation: Create, Namespace: Namespace{Name: "web", Labels: map[string]string{LabelEnabled: "true"}}})
	if err != nil {
		t.Fatal(err)
	}
	ms, ws := d.Messages(), d.Warnings()
	if len(ms) != len(ws) || len(ms) < 5 {
		t.Fatalf("%d messages, %d warnings: %q", len(ms), len(ws), ws)
	}
	warned := 0
	for i, m := range ms {
		if ws[i] != m.Admission() {
			t.Errorf("warning %d = %q, message %q", i, ws[i], m)
		}
		marked := strings.HasPrefix(ws[i], "wincompat: action needed: ")
		if m.Severity == SeverityWarning {
			warned++
			if !marked || i >= warned {
				t.Errorf("warning %d %q: not marked, or after a change made", i, ws[i])
			}
		} else if marked || strings.Contains(m.Text, "action needed") {
			t.Errorf("info %d %q is marked", i, ws[i])
		}
	}
	if warned != 1 || !strings.Contains(ws[0], "no memory limit") {
		t.Errorf("want the memory limit alone to need action, first; got %q", ws)
	}
	if w := d.WouldWarnings(); !strings.HasPrefix(w[0], "wincompat (warn mode): action needed: ") || strings.Contains(w[1], "action needed") {
		t.Errorf("warn mode marks differently: %q", w)
	}
}

func TestMessageAdmission(t *testing.T) {
	for text, want := range map[string]string{
		"wincompat: spec.hostNetwork in the pod: x":              "wincompat: action needed: spec.hostNetwork in the pod: x",
		"wincompat (warn mode): spec.hostNetwork in the pod: x":  "wincompat (warn mode): action needed: spec.hostNetwork in the pod: x",
		"wincompat (warn mode) would have refused it: an image":  "wincompat (warn mode): action needed: would have refused it: an image",
		"a text of no source":                                    "wincompat: action needed: a text of no source",
		"wincompat: namespace label wincompat.io/mode=\"x\" ...": "wincompat: action needed: namespace label wincompat.io/mode=\"x\" ...",
	} {
		if got := (Message{SeverityWarning, text}).Admission(); got != want {
			t.Errorf("%q: %q, want %q", text, got, want)
		}
		if got := (Message{SeverityInfo, text}).Admission(); got != text {
			t.Errorf("info %q rendered %q", text, got)
		}
	}
}
