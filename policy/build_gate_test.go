package policy

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gateTestPod is a Windows pod of one image in an opted-in namespace, as admission sees it.
func gateTestPod(edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: corev1.PodSpec{
		OS:         &corev1.PodOS{Name: corev1.Windows},
		Containers: []corev1.Container{{Name: "app", Image: "example.com/app:ltsc2019"}},
	}}
	if edit != nil {
		edit(p)
	}
	return p
}

var gateTestNamespace = Namespace{Name: "shop", Labels: map[string]string{LabelEnabled: "true"}}

func gateTestFacts(img Image) Facts {
	return Facts{Operation: Create, Namespace: gateTestNamespace, Version: "v1", Gate: true,
		Cluster: &Cluster{Builds: []string{"10.0.17763", "10.0.26100"}},
		Images:  map[string]Image{"example.com/app:ltsc2019": img}}
}

var (
	pendingImage = Image{Err: "example.com: unreachable", Pending: true}
	image2022    = Image{Platforms: []Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.2227"}}}
)

func TestGateAtAdmission(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		facts func(Facts) Facts
		gated bool
	}{
		{"a pending image gates", gateTestPod(nil), nil, true},
		{"wincompat's own bounds gate too", gateTestPod(nil), func(f Facts) Facts {
			f.Images["example.com/app:ltsc2019"] = Image{Err: "busy", Busy: true, Pending: true}
			return f
		}, true},
		{"an answered image does not", gateTestPod(nil), func(f Facts) Facts {
			f.Images["example.com/app:ltsc2019"] = image2022
			return f
		}, false},
		{"a definitive failure does not: the leader would get the same answer", gateTestPod(nil), func(f Facts) Facts {
			f.Images["example.com/app:ltsc2019"] = Image{Err: "unauthorized"}
			return f
		}, false},
		{"gating off (fallback mode, offline)", gateTestPod(nil), func(f Facts) Facts { f.Gate = false; return f }, false},
		{"a pod naming its node", gateTestPod(func(p *corev1.Pod) { p.Spec.NodeName = "win-0" }), nil, false},
		{"a DaemonSet's pod", gateTestPod(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: &yes}}
		}), nil, false},
		{"a HostProcess pod", gateTestPod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: &yes}}
			p.Spec.HostNetwork = true
		}), nil, false},
		{"a build pinned by nodeSelector", gateTestPod(func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{corev1.LabelWindowsBuild: "10.0.26100"}
		}), nil, false},
		{"a build requested by annotation", gateTestPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnnotationBuild: "ltsc2025"}
		}), nil, false},
		{"an unknown build requested still waits for the registry", gateTestPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnnotationBuild: "ltsc2099"}
		}), nil, true},
		{"a RuntimeClass named", gateTestPod(func(p *corev1.Pod) { p.Spec.RuntimeClassName = new("windows-2025") }), nil, false},
		{"required affinity limiting the build", gateTestPod(func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{"10.0.26100"}}}}}}}}
		}), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			facts := gateTestFacts(pendingImage)
			if tc.facts != nil {
				facts = tc.facts(facts)
			}
			d, err := Default().Decide(tc.pod, facts)
			if err != nil {
				t.Fatal(err)
			}
			if d.Gated != tc.gated || Gated(tc.pod) != tc.gated || (tc.pod.Labels[LabelGated] == "true") != tc.gated {
				t.Fatalf("Gated %v, gate %v, label %q; want gated %v", d.Gated, tc.pod.Spec.SchedulingGates, tc.pod.Labels[LabelGated], tc.gated)
			}
			if !tc.gated {
				return
			}
			// A pin written now could never be corrected once the pod is stored.
			if _, pinned := tc.pod.Spec.NodeSelector[corev1.LabelWindowsBuild]; pinned || tc.pod.Spec.RuntimeClassName != nil || tc.pod.Annotations[AnnotationBuildSource] != "" {
				t.Errorf("a gated pod carries a build decision: %v %v %v", tc.pod.Spec.NodeSelector, tc.pod.Spec.RuntimeClassName, tc.pod.Annotations)
			}
			if !slices.ContainsFunc(d.Changes, func(c Change) bool { return c.Rule == RuleBuildGate && c.Action == Inject }) {
				t.Errorf("the gate is not recorded: %v", d.Changes)
			}
		})
	}
}

// The admission policies gate pods they cannot decide; the webhook, reached in the same request, takes
// their gate away when it decides, and keeps it (recording it once) when it cannot.
func TestGateOfTheAdmissionPolicies(t *testing.T) {
	byPolicies := func(p *corev1.Pod) {
		p.Labels = map[string]string{LabelGated: "true"}
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}, {Name: SchedulingGate}}
	}
	decided := gateTestPod(byPolicies)
	facts := gateTestFacts(image2022)
	if _, err := Default().Decide(decided, facts); err != nil {
		t.Fatal(err)
	}
	if Gated(decided) || decided.Labels[LabelGated] != "" || decided.Spec.NodeSelector[corev1.LabelWindowsBuild] != "10.0.26100" {
		t.Errorf("decided pod: gates %v, labels %v, nodeSelector %v", decided.Spec.SchedulingGates, decided.Labels, decided.Spec.NodeSelector)
	}
	if !slices.Equal(decided.Spec.SchedulingGates, []corev1.PodSchedulingGate{{Name: "example.com/quota"}}) {
		t.Errorf("another gate was touched: %v", decided.Spec.SchedulingGates)
	}

	kept := gateTestPod(byPolicies)
	d, _ := Default().Decide(kept, gateTestFacts(pendingImage))
	if len(kept.Spec.SchedulingGates) != 2 || !d.Gated {
		t.Errorf("gates %v, want both kept once", kept.Spec.SchedulingGates)
	}
	again, _ := Default().Decide(kept, gateTestFacts(pendingImage))
	if slices.ContainsFunc(again.Changes, func(c Change) bool { return c.Rule == RuleBuildGate }) {
		t.Errorf("a second pass records the gate again: %v", again.Changes)
	}
}

func TestUngate(t *testing.T) {
	stored := func() *corev1.Pod {
		p := gateTestPod(nil)
		if _, err := Default().Decide(p, gateTestFacts(pendingImage)); err != nil || !Gated(p) {
			t.Fatalf("not gated: %v", err)
		}
		return p
	}
	t.Run("decided from the answer", func(t *testing.T) {
		p := stored()
		facts := gateTestFacts(image2022)
		facts.Cluster.RuntimeClasses = map[string]RuntimeClass{"windows-2025": {
			NodeSelector: map[string]string{corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: "10.0.26100"},
			Tolerations:  []corev1.Toleration{{Key: "isolation", Operator: corev1.TolerationOpExists}},
		}}
		d := Default().Ungate(p, facts, "")
		if Gated(p) || d.Build != "10.0.26100" || d.BuildSource != SourceImageManifest || p.Spec.NodeSelector[corev1.LabelWindowsBuild] != "10.0.26100" {
			t.Fatalf("build %q from %q, gates %v, nodeSelector %v", d.Build, d.BuildSource, p.Spec.SchedulingGates, p.Spec.NodeSelector)
		}
		if p.Spec.RuntimeClassName != nil {
			t.Errorf("runtimeClassName set on a stored pod: Kubernetes refuses the update")
		}
		if !slices.ContainsFunc(p.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == "isolation" }) {
			t.Errorf("the RuntimeClass's toleration was not added instead: %v", p.Spec.Tolerations)
		}
	})
	t.Run("overdue falls back to the tag", func(t *testing.T) {
		p := stored()
		d := Default().Ungate(p, gateTestFacts(pendingImage), "no answer within 3m0s")
		if Gated(p) || d.BuildSource != SourceImage || d.Build != "10.0.17763" {
			t.Fatalf("build %q from %q", d.Build, d.BuildSource)
		}
		if !slices.ContainsFunc(d.Changes, func(c Change) bool {
			return c.Rule == RuleBuildGate && strings.Contains(c.Reason, "no answer within 3m0s")
		}) {
			t.Errorf("the record does not say why: %v", d.Changes)
		}
	})
	t.Run("out of scope is released", func(t *testing.T) {
		p := stored()
		facts := gateTestFacts(image2022)
		facts.Namespace.Labels = nil
		d := Default().Ungate(p, facts, "")
		if Gated(p) || d.Skipped == "" || d.Build != "" || p.Spec.NodeSelector[corev1.LabelWindowsBuild] != "" {
			t.Fatalf("skipped %q, build %q, gates %v", d.Skipped, d.Build, p.Spec.SchedulingGates)
		}
	})
	t.Run("a pod without our gate is left alone", func(t *testing.T) {
		p := gateTestPod(func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}} })
		before := p.DeepCopy()
		if d := Default().Ungate(p, gateTestFacts(image2022), ""); d.Skipped == "" || len(d.Changes) != 0 {
			t.Errorf("decided %+v", d)
		}
		if len(Release(p, "uninstalled")) != 0 || p.Spec.SchedulingGates[0].Name != before.Spec.SchedulingGates[0].Name || len(p.Annotations) != 0 {
			t.Errorf("touched: %v", p)
		}
	})
	t.Run("Hyper-V cannot be chosen after creation", func(t *testing.T) {
		p := stored()
		facts := gateTestFacts(Image{Platforms: []Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.17763.5830"}}})
		facts.Cluster.Builds = []string{"10.0.26100"}
		facts.Cluster.RuntimeClasses = map[string]RuntimeClass{"hyperv": {Handler: HyperVHandler}}
		d := Default().Ungate(p, facts, "")
		if p.Spec.RuntimeClassName != nil || p.Spec.Overhead != nil {
			t.Fatalf("runtimeClassName or overhead set on a stored pod")
		}
		if !slices.ContainsFunc(d.Changes, func(c Change) bool { return c.Rule == RuleHyperV && c.Action == Warn }) {
			t.Errorf("no warning that Hyper-V would run it: %v", d.Changes)
		}
	})
}
