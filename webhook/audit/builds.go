package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/images"
)

// ImageResolver reads what registries say of images: *images.Resolver.
type ImageResolver interface {
	Lookup(ctx context.Context, req images.Request) map[string]policy.Image
}

// BuildsSummary answers `--builds`: of the Windows pods and pod templates read, how many could run if
// the cluster's Windows nodes ran only Builds, and why the others could not.
type BuildsSummary struct {
	Builds            []string `json:"builds"`
	Pods              int      `json:"windowsPods"`
	PodsRunnable      int      `json:"podsRunnable"`
	Templates         int      `json:"windowsTemplates"`
	TemplatesRunnable int      `json:"templatesRunnable"`
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

// catalogBuild resolves a build number or catalog name to its number, as the policy does.
func catalogBuild(p *policy.Policy, s string) (string, bool) {
	b, ok := p.ResolveBuild(s)
	return b.Number, ok
}

// splitBuilds reads wincompat.io/build as wincompat records it: one build, or several joined by commas
// when it required node affinity instead of a nodeSelector.
func splitBuilds(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// resolve asks the registries about the images of specs not asked about yet, one Lookup per page so
// that a page's lookups run together. Each distinct image is asked once per run.
func (a *auditor) resolve(ctx context.Context, specs []*corev1.PodSpec) {
	if a.opts.Images == nil {
		return
	}
	var want []string
	for _, spec := range specs {
		for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for _, c := range list {
				if _, done := a.images[c.Image]; !done && c.Image != "" && !slices.Contains(want, c.Image) {
					want = append(want, c.Image)
				}
			}
		}
	}
	if len(want) == 0 {
		return
	}
	for image, img := range a.opts.Images.Lookup(ctx, images.Request{Images: want}) {
		a.images[image] = img
		if img.Err != "" {
			a.lookupErrors++
			if len(a.lookupFailed) < 3 {
				a.lookupFailed = append(a.lookupFailed, image+" ("+img.Err+")")
			}
		}
	}
}

// imagesKnown reports whether a registry or a tag says which builds some image of spec runs on.
func (a *auditor) imagesKnown(spec *corev1.PodSpec) bool {
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			if img, ok := a.images[c.Image]; ok && img.Err == "" {
				return true
			}
			if _, ok := a.pol.BuildOfImage(c.Image); ok {
				return true
			}
		}
	}
	return false
}

// runsOn reports whether a pod wincompat gave the builds chosen can run on a node of build node. The
// chosen builds are the candidates wincompat found; a node outside them can still run the pod under
// the compatibility rule (a 2025 node runs 2022 images), judged from the images when something says
// what they are, else from the chosen builds as the images' own.
func (a *auditor) runsOn(spec *corev1.PodSpec, chosen []string, node string) bool {
	if slices.Contains(chosen, node) {
		return true
	}
	if a.imagesKnown(spec) {
		return len(a.pol.CheckBuilds(unpinned(spec), a.images, []string{node}).Runnable) > 0
	}
	return slices.ContainsFunc(chosen, func(b string) bool { return a.pol.HostRuns(node, b) })
}

// unpinned is spec without the pins CheckBuilds reads, so that it judges the images alone.
func unpinned(spec *corev1.PodSpec) *corev1.PodSpec {
	s := *spec
	s.NodeSelector, s.Affinity = nil, nil
	return &s
}

// imageFindings reports, on every run, a Windows pod or template with an image that has no Windows
// entry, or pinned to builds none of which its images can run on. annotations are the object's own
// (a pod's, or a template's metadata), where wincompat.io/build may ask for builds; changes are what
// wincompat recorded on it.
func (a *auditor) imageFindings(ns, obj string, spec *corev1.PodSpec, annotations map[string]string, changes []policy.Change) {
	var linux []string
	for owner, list := range map[string][]corev1.Container{"initContainers": spec.InitContainers, "containers": spec.Containers} {
		for _, c := range list {
			// The registry's answer of this run is fresher than admission's, either way.
			if img, ok := a.images[c.Image]; ok && img.Err == "" {
				if !a.hasWindowsEntry(img) {
					var platforms []string
					for _, pl := range img.Platforms {
						platforms = append(platforms, pl.String())
					}
					linux = append(linux, fmt.Sprintf("%s[%s]: image %s (%s) has no Windows entry", owner, c.Name, c.Image, strings.Join(platforms, ", ")))
				}
				continue
			}
			if what, ok := policy.RecordedLinuxOnly(changes, "spec."+owner+"["+c.Name+"]", c.Image); ok {
				linux = append(linux, owner+"["+c.Name+"]: image "+what)
			}
		}
	}
	slices.Sort(linux)
	if len(linux) > 0 {
		// The root cause: such a pod runs on no Windows build, whatever it is pinned to.
		a.finding(LinuxOnlyImage, ns, obj, strings.Join(linux, "; "))
		return
	}
	if policy.HostProcess(spec) {
		return // HostProcess containers run on the host, whatever its build
	}
	pins, by := a.pins(spec, annotations)
	if len(pins) == 0 {
		return
	}
	if check := a.pol.CheckBuilds(unpinned(spec), a.images, pins); len(check.Runnable) == 0 && len(check.Reasons) > 0 {
		a.finding(BuildNotInImage, ns, obj, fmt.Sprintf("pinned to %s by %s, but %s", strings.Join(pins, " or "), by, strings.Join(check.Reasons, "; ")))
	}
}

// hasWindowsEntry mirrors the policy: an entry of another architecture than the policy's does not count.
func (a *auditor) hasWindowsEntry(img policy.Image) bool {
	return slices.ContainsFunc(img.Platforms, func(pl policy.Platform) bool {
		return pl.OS == string(corev1.Windows) && (a.pol.Arch == "" || pl.Architecture == "" || pl.Architecture == a.pol.Arch)
	})
}

// pins are the builds spec may run on by its nodeSelector and required node affinity, else by the
// wincompat.io/build annotation (a request wincompat honours when it admits the pod), and what pins them.
func (a *auditor) pins(spec *corev1.PodSpec, annotations map[string]string) ([]string, string) {
	if pins := policy.PinnedBuilds(spec); pins != nil {
		if _, ok := spec.NodeSelector[corev1.LabelWindowsBuild]; ok {
			return pins, "its nodeSelector"
		}
		return pins, "its required node affinity"
	}
	var pins []string
	for _, v := range splitBuilds(annotations[policy.AnnotationBuild]) {
		if b, ok := catalogBuild(a.pol, v); ok && !slices.Contains(pins, b) {
			pins = append(pins, b)
		}
	}
	return pins, "its " + policy.AnnotationBuild + " annotation"
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

// withClassPin adds the build the template's RuntimeClass selects to its nodeSelector, as the
// RuntimeClass admission plugin will for its pods (pods already carry it).
func (a *auditor) withClassPin(ctx context.Context, spec *corev1.PodSpec) *corev1.PodSpec {
	if spec.RuntimeClassName == nil {
		return spec
	}
	if _, set := spec.NodeSelector[corev1.LabelWindowsBuild]; set {
		return spec
	}
	b := a.classBuild(ctx, *spec.RuntimeClassName)
	if b == "" {
		return spec
	}
	s := *spec
	s.NodeSelector = maps.Clone(s.NodeSelector)
	if s.NodeSelector == nil {
		s.NodeSelector = map[string]string{}
	}
	s.NodeSelector[corev1.LabelWindowsBuild] = b
	return &s
}

// classBuild is the build a RuntimeClass selects, "" for none; read once per class and run.
func (a *auditor) classBuild(ctx context.Context, name string) string {
	if b, ok := a.classBuilds[name]; ok {
		return b
	}
	var rc nodev1.RuntimeClass
	err := a.c.Get(ctx, client.ObjectKey{Name: name}, &rc)
	switch {
	case err == nil && rc.Scheduling != nil:
		a.classBuilds[name] = rc.Scheduling.NodeSelector[corev1.LabelWindowsBuild]
	case err != nil && !apierrors.IsNotFound(err) && !a.classNoted:
		a.classNoted = true
		a.report.Notes = append(a.report.Notes, "runtimeclasses: "+reason(err)+"; the builds RuntimeClasses select were not read")
	}
	return a.classBuilds[name]
}

// checkBuilds answers --builds for one Windows pod or template.
func (a *auditor) checkBuilds(ns, obj string, spec *corev1.PodSpec, pod bool) {
	s := a.report.Builds
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
	check := a.pol.CheckBuilds(spec, a.images, a.opts.Builds)
	if len(check.Runnable) > 0 {
		count(&s.PodsRunnable, &s.TemplatesRunnable)
		return
	}
	a.finding(CannotRunOnBuilds, ns, obj, strings.Join(check.Reasons, "; "))
	for _, r := range check.Reasons {
		// Group by what the reason says of the image, whichever container holds it.
		if i := strings.Index(r, ": image "); i >= 0 {
			r = r[i+2:]
		}
		row, ok := a.reasons[r]
		if !ok {
			if len(a.reasons) >= maxFindingsPerKind {
				r = otherReasons
			}
			if row, ok = a.reasons[r]; !ok {
				row = &ReasonRow{Reason: r}
				a.reasons[r] = row
			}
		}
		count(&row.Pods, &row.Templates)
	}
}

// finishBuilds sorts the reasons and notes the images no registry answered for.
func (a *auditor) finishBuilds() {
	if a.lookupErrors > 0 {
		a.report.Notes = append(a.report.Notes, fmt.Sprintf("%d images could not be read from their registries, so their tags were used: %s",
			a.lookupErrors, strings.Join(a.lookupFailed, ", ")))
	}
	s := a.report.Builds
	if s == nil {
		return
	}
	s.Reasons = []ReasonRow{}
	for _, r := range a.reasons {
		s.Reasons = append(s.Reasons, *r)
	}
	sort.Slice(s.Reasons, func(i, j int) bool {
		ri, rj := s.Reasons[i], s.Reasons[j]
		if ri.Pods+ri.Templates != rj.Pods+rj.Templates {
			return ri.Pods+ri.Templates > rj.Pods+rj.Templates
		}
		return ri.Reason < rj.Reason
	})
}

// Sentence is the summary line: "12 of 15 Windows pods and 3 of 4 Windows pod templates could run on
// 10.0.26100".
func (s *BuildsSummary) Sentence() string {
	return fmt.Sprintf("%d of %s and %d of %s could run on %s", s.PodsRunnable, plural(s.Pods, "Windows pod"),
		s.TemplatesRunnable, plural(s.Templates, "Windows pod template"), strings.Join(s.Builds, " or "))
}
