package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// migration plans a change of the cluster's Windows builds (--builds): of every Windows pod and
// template, whether it could run if the Windows nodes ran only the builds asked about, and why not.
type migration struct {
	pol     *policy.Policy
	images  *imageFacts
	hyperV  *hyperV
	out     *sink
	summary *BuildsSummary // nil when --builds was not asked
	reasons map[string]*ReasonRow
}

func newMigration(pol *policy.Policy, images *imageFacts, isolation *hyperV, out *sink, builds []string) *migration {
	m := &migration{pol: pol, images: images, hyperV: isolation, out: out, reasons: map[string]*ReasonRow{}}
	if len(builds) > 0 {
		m.summary = &BuildsSummary{Builds: builds}
	}
	return m
}

// asked reports whether --builds asked the question at all.
func (m *migration) asked() bool { return m.summary != nil }

// BuildsSummary answers `--builds`: of the Windows pods and pod templates read, how many could run if
// the cluster's Windows nodes ran only Builds, and why the others could not.
type BuildsSummary struct {
	Builds            []string `json:"builds"`
	Pods              int      `json:"windowsPods"`
	PodsRunnable      int      `json:"podsRunnable"`
	Templates         int      `json:"windowsTemplates"`
	TemplatesRunnable int      `json:"templatesRunnable"`
	// PodsHyperV and TemplatesHyperV count, of the objects no build asked about runs in process
	// isolation, those Hyper-V isolation would keep running there: images of older builds (Hyper-V's
	// rule, host build not older than the image's), by the cluster's Hyper-V RuntimeClasses (HyperVClasses,
	// found by handler), or, where it has none, by a RuntimeClass of handler runhcs-wcow-hypervisor it
	// could add.
	PodsHyperV      int `json:"podsHyperV"`
	TemplatesHyperV int `json:"templatesHyperV"`
	// HyperVClasses are the cluster's Hyper-V RuntimeClasses; empty when it has none (or they could not
	// be read).
	HyperVClasses []string `json:"hyperVClasses"`
	// Reasons count the objects that could not run by reason, most frequent first; an object with two
	// reasons counts under both.
	Reasons []ReasonRow `json:"reasons"`
}

// ReasonRow is one reason why objects could not run on the builds asked about.
type ReasonRow struct {
	Reason    string `json:"reason"`
	Pods      int    `json:"pods"`
	Templates int    `json:"templates"`
}

// otherReasons collects the reasons beyond maxFindingsPerKind distinct ones, which bounds memory.
const otherReasons = "(other reasons)"

// ParseBuilds reads a comma-separated list of Windows builds as the policy names them: numbers
// (10.0.26100) or the catalog's names (ltsc2025, 2025). A well-formed number missing from the catalog
// is accepted, as a node of a newer build would carry it.
func ParseBuilds(p *policy.Policy, s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		b, ok := catalogBuild(p, part)
		if !ok {
			var names []string
			for _, c := range p.Builds {
				names = append(names, c.Names...)
			}
			return nil, fmt.Errorf("%q is not a Windows build: give build numbers (10.0.26100) or catalog names (%s), comma-separated", part, strings.Join(names, ", "))
		}
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out, nil
}

// check answers --builds for one Windows pod or template.
func (m *migration) check(ctx context.Context, ns, obj string, spec *corev1.PodSpec, pod bool) {
	s := m.summary
	count := func(pods, templates *int) {
		if pod {
			*pods++
		} else {
			*templates++
		}
	}
	count(&s.Pods, &s.Templates)
	if policy.HostProcess(spec) {
		// HostProcess containers run on the host, whatever its build: only the pins count.
		bare := *spec
		bare.InitContainers, bare.Containers = nil, nil
		spec = &bare
	}
	check := m.pol.CheckBuilds(spec, m.images.answers, s.Builds)
	if len(check.Runnable) > 0 {
		count(&s.PodsRunnable, &s.TemplatesRunnable)
		return
	}
	detail := strings.Join(check.Reasons, "; ")
	if where, kept := m.keptByHyperV(ctx, spec); kept {
		count(&s.PodsHyperV, &s.TemplatesHyperV)
		if where != "" {
			detail += "; " + where
		}
	}
	m.out.finding(CannotRunOnBuilds, ns, obj, detail)
	for _, r := range check.Reasons {
		// Group by what the reason says of the image, whichever container holds it.
		if i := strings.Index(r, ": image "); i >= 0 {
			r = r[i+2:]
		}
		row, ok := m.reasons[r]
		if !ok {
			if len(m.reasons) >= maxFindingsPerKind {
				r = otherReasons
			}
			if row, ok = m.reasons[r]; !ok {
				row = &ReasonRow{Reason: r}
				m.reasons[r] = row
			}
		}
		count(&row.Pods, &row.Templates)
	}
}

// keptByHyperV reports whether Hyper-V isolation would run an object no build asked about runs in
// process isolation (an image newer than every build asked about, or with no Windows entry, never
// runs): by its own Hyper-V RuntimeClass, else one of the cluster's, else one the cluster could add.
// where names the builds and the class, for the finding, when the cluster has that class; a class it
// does not have yet is counted in the summary only, and the finding stays what process isolation
// makes of the object.
func (m *migration) keptByHyperV(ctx context.Context, spec *corev1.PodSpec) (where string, kept bool) {
	classes := m.hyperV.of(ctx, spec)
	if classes == nil && spec.RuntimeClassName != nil {
		return "", false // a class of its own that is not Hyper-V decides how it runs
	}
	if classes == nil {
		classes = m.hyperV.all(ctx)
	}
	offered := classes != nil
	if !offered {
		classes = map[string]policy.RuntimeClass{"": {Handler: policy.HyperVHandler}}
	}
	class, hosts := m.pol.HyperVBuilds(spec, m.images.answers, m.summary.Builds, classes)
	if hosts == nil {
		return "", false
	}
	if !offered {
		return "", true
	}
	return "Hyper-V isolation would run it on " + strings.Join(hosts, " or ") + " (RuntimeClass " + class + ")", true
}

// finish sorts the reasons, most frequent first; nil when --builds was not asked.
func (m *migration) finish() *BuildsSummary {
	s := m.summary
	if s == nil {
		return nil
	}
	s.HyperVClasses = sortedKeys(m.hyperV.classes)
	s.Reasons = []ReasonRow{}
	for _, r := range m.reasons {
		s.Reasons = append(s.Reasons, *r)
	}
	sort.Slice(s.Reasons, func(i, j int) bool {
		ri, rj := s.Reasons[i], s.Reasons[j]
		if ri.Pods+ri.Templates != rj.Pods+rj.Templates {
			return ri.Pods+ri.Templates > rj.Pods+rj.Templates
		}
		return ri.Reason < rj.Reason
	})
	return s
}

func requiredTerms(spec *corev1.PodSpec) []corev1.NodeSelectorTerm {
	if na := spec.Affinity; na != nil && na.NodeAffinity != nil && na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		return na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	return nil
}

// withoutDerivedPins is a pod's spec without the build pins wincompat derived from its images or the
// cluster's nodes: a pod that replaces it (from its workload, on new nodes) gets them decided again, so
// a 2022 pod pinned to 10.0.20348 still counts as runnable on 2025 nodes. Pins the user asked for (a
// nodeSelector, a RuntimeClass, an annotation, the namespace's or the policy's default build) stay.
func withoutDerivedPins(p *corev1.Pod) *corev1.PodSpec {
	switch p.Annotations[policy.AnnotationBuildSource] {
	case policy.SourceImage, policy.SourceImageManifest, policy.SourceCluster:
	default:
		return &p.Spec
	}
	chosen := splitBuilds(p.Annotations[policy.AnnotationBuild])
	s := p.Spec
	if v, ok := s.NodeSelector[corev1.LabelWindowsBuild]; ok && slices.Equal(chosen, []string{v}) {
		s.NodeSelector = maps.Clone(s.NodeSelector)
		delete(s.NodeSelector, corev1.LabelWindowsBuild)
	}
	if len(requiredTerms(&s)) > 0 {
		s.Affinity = s.Affinity.DeepCopy()
		terms := s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		for i := range terms {
			terms[i].MatchExpressions = slices.DeleteFunc(terms[i].MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
				return e.Key == corev1.LabelWindowsBuild && e.Operator == corev1.NodeSelectorOpIn && sameSet(e.Values, chosen)
			})
		}
	}
	return &s
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// Sentence is the summary line: "12 of 15 Windows pods and 3 of 4 Windows pod templates could run on
// 10.0.26100".
func (s *BuildsSummary) Sentence() string {
	return fmt.Sprintf("%d of %s and %d of %s could run on %s", s.PodsRunnable, plural(s.Pods, "Windows pod"),
		s.TemplatesRunnable, plural(s.Templates, "Windows pod template"), strings.Join(s.Builds, " or "))
}

// HyperVSentence is the line of what Hyper-V isolation would keep running besides: "Hyper-V isolation
// would keep 3 pods and 1 template more running (RuntimeClass isolated)"; "" when nothing.
func (s *BuildsSummary) HyperVSentence() string {
	if s.PodsHyperV+s.TemplatesHyperV == 0 {
		return ""
	}
	with := "with a RuntimeClass of handler " + policy.HyperVHandler + ", which the cluster does not have"
	if len(s.HyperVClasses) > 0 {
		with = "RuntimeClass " + strings.Join(s.HyperVClasses, ", ")
	}
	return fmt.Sprintf("Hyper-V isolation would keep %s and %s more running (%s)", plural(s.PodsHyperV, "pod"), plural(s.TemplatesHyperV, "template"), with)
}
