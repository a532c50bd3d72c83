package policy

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// buildQuery is what the build sources look at.
type buildQuery struct {
	pod    *corev1.Pod
	facts  Facts
	images []containerImage
	rec    *recorder
}

// buildChoice is a source's answer: the builds the pod may run on, or none.
type buildChoice struct {
	builds []Build
	source string
	// hyperV, when set, is the Hyper-V RuntimeClass that runs the pod on builds: no ready node's build
	// runs its images in process isolation.
	hyperV *hyperVClass
}

// buildSource is one row of the order in which sources decide the build. The table
// drives chooseBuild and the list in policy/README.md.
type buildSource struct {
	name string
	doc  string
	// choose answers, or returns decided=false to leave the question to the next source. A source may
	// decide on no build at all (the images contradict each other, say): later sources are then not asked.
	choose func(p *Policy, q *buildQuery) (c buildChoice, decided bool)
}

// BuildSources is the order in which the build is chosen: the first source that decides wins.
func BuildSources() []struct{ Name, Doc string } {
	var out []struct{ Name, Doc string }
	for _, s := range buildSources {
		out = append(out, struct{ Name, Doc string }{s.name, s.doc})
	}
	return out
}

var buildSources = []buildSource{
	{"(recorded)", "the builds an earlier pass recorded in `wincompat.io/build` and `wincompat.io/build-source`, so that reinvocation gives the same answer", (*Policy).recordedBuild},
	{SourceNodeSelector, "the pod already pins `node.kubernetes.io/windows-build` in its nodeSelector (checked against its images: a contradiction is a warning)", (*Policy).nodeSelectorBuild},
	{SourceRuntimeClass, "the pod names a RuntimeClass: its build, when it selects one (checked against the images); a class that selects no build decides where the pod runs, so none is pinned", (*Policy).runtimeClassBuild},
	{SourceAffinity, "the pod's required node affinity already limits `node.kubernetes.io/windows-build` in every term: those builds, narrowed no further unless its `wincompat.io/build` annotation names one of them (checked against its images: a build that cannot run one is a warning)", (*Policy).affinityBuild},
	{SourceAnnotation, "the pod's `wincompat.io/build` annotation (`10.0.20348`, `ltsc2022` or `2022`), checked against the images", (*Policy).annotationBuild},
	{SourceImageManifest, "the registry: the builds every container and init container image can run on (the Windows entries' `os.version` by `windowsCompatibility`), among the builds of ready nodes (server mode) or of the catalog; an image the registry did not answer for counts by its tag", (*Policy).imageBuilds},
	{SourceImage, "the same from image tags alone (`servercore:ltsc2022`, `app:10.0.17763.5830`), when no registry answered", nil},
	{SourceNamespace, "the namespace's `wincompat.io/build` annotation", (*Policy).namespaceBuild},
	{SourceCluster, "the only Windows build among ready nodes (server mode)", (*Policy).clusterBuild},
	{SourceDefault, "the policy's `defaultBuild`", (*Policy).defaultBuild},
}

// chooseBuild asks the sources in order.
func (p *Policy) chooseBuild(q *buildQuery) buildChoice {
	for _, s := range buildSources {
		if s.choose == nil {
			continue // answered by the row above
		}
		if c, decided := s.choose(p, q); decided {
			return c
		}
	}
	if c := q.facts.Cluster; c != nil && len(c.Builds) > 1 {
		q.rec.add(Change{Action: Warn, Path: "spec.nodeSelector[" + corev1.LabelWindowsBuild + "]",
			Reason: "no build chosen while the cluster runs " + strings.Join(c.Builds, ", ") + "; the pod may land on a node whose build does not match its image", Rule: RuleBuild})
	}
	return buildChoice{}
}

func one(b Build, source string) (buildChoice, bool) {
	return buildChoice{builds: []Build{b}, source: source}, true
}

func (p *Policy) recordedBuild(q *buildQuery) (buildChoice, bool) {
	src := q.pod.Annotations[AnnotationBuildSource]
	if src == "" {
		return buildChoice{}, false
	}
	var builds []Build
	for _, v := range strings.Split(q.pod.Annotations[AnnotationBuild], ",") {
		b, ok := p.ResolveBuild(v)
		if !ok {
			return buildChoice{}, false
		}
		builds = append(builds, b)
	}
	if pinned, hasPin := q.pod.Spec.NodeSelector[corev1.LabelWindowsBuild]; hasPin && (len(builds) != 1 || builds[0].Number != pinned) {
		return buildChoice{}, false
	}
	return buildChoice{builds: builds, source: src}, true
}

func (p *Policy) nodeSelectorBuild(q *buildQuery) (buildChoice, bool) {
	pinned, hasPin := q.pod.Spec.NodeSelector[corev1.LabelWindowsBuild]
	if !hasPin {
		return buildChoice{}, false
	}
	b := p.catalogEntry(pinned)
	p.overriddenRequest(q.pod, b, "the pod's nodeSelector pins "+corev1.LabelWindowsBuild+"="+pinned, q.rec)
	p.checkAgainstImages(q, b, "its nodeSelector pins "+corev1.LabelWindowsBuild+"="+pinned)
	return one(b, SourceNodeSelector)
}

// affinityBuild keeps the builds the pod's own required node affinity allows: narrowing them further (to
// what its images or the cluster suggest) could leave the pod with no node at all, and widening them is
// not ours to do.
func (p *Policy) affinityBuild(q *buildQuery) (buildChoice, bool) {
	allowed := PinnedBuilds(&q.pod.Spec) // the nodeSelector has no build here: the row above decided that
	if allowed == nil {
		return buildChoice{}, false
	}
	if len(allowed) == 0 {
		q.rec.add(Change{Action: Warn, Path: "spec.affinity.nodeAffinity",
			Reason: "the pod's required node affinity allows no " + corev1.LabelWindowsBuild + " at all (the values of each term exclude each other); no build pinned, the pod cannot be scheduled as it is", Rule: RuleAffinityAllowsNone})
		return buildChoice{}, true
	}
	if requested, ok := p.lookupBuild(q.pod.Annotations[AnnotationBuild]); ok && q.pod.Annotations[AnnotationBuildSource] == "" && slices.Contains(allowed, requested.Number) {
		return buildChoice{}, false // the annotation narrows within what the affinity allows: its row pins it
	}
	c := buildChoice{source: SourceAffinity}
	for _, n := range allowed {
		b := p.catalogEntry(n)
		c.builds = append(c.builds, b)
		p.checkAgainstImages(q, b, "its required node affinity allows it")
	}
	// An annotation naming an allowed build returned above, so any request left is overridden.
	why := "the pod's required node affinity allows " + corev1.LabelWindowsBuild + " " + strings.Join(allowed, ", ")
	if len(allowed) == 1 {
		why = "the pod's required node affinity pins " + corev1.LabelWindowsBuild + "=" + allowed[0]
	}
	p.overriddenRequest(q.pod, Build{}, why, q.rec)
	return c, true
}

func (p *Policy) runtimeClassBuild(q *buildQuery) (buildChoice, bool) {
	spec := &q.pod.Spec
	if spec.RuntimeClassName == nil {
		return buildChoice{}, false
	}
	// A RuntimeClass carries its own scheduling: its build, if it selects one, is the pod's; if it
	// selects none (or is unknown), pinning a build could contradict it.
	if n := p.namedClassSelector(spec, q.facts)[corev1.LabelWindowsBuild]; n != "" {
		b := p.catalogEntry(n)
		p.overriddenRequest(q.pod, b, "its RuntimeClass "+*spec.RuntimeClassName+" selects build "+n, q.rec)
		p.checkAgainstImages(q, b, "its RuntimeClass "+*spec.RuntimeClassName+" selects build "+n)
		return one(b, SourceRuntimeClass)
	}
	p.overriddenRequest(q.pod, Build{}, "its RuntimeClass "+*spec.RuntimeClassName+" decides where it runs", q.rec)
	return buildChoice{}, true
}

func (p *Policy) annotationBuild(q *buildQuery) (buildChoice, bool) {
	v, set := q.pod.Annotations[AnnotationBuild]
	if !set {
		return buildChoice{}, false
	}
	if b, ok := p.lookupBuild(v); ok {
		p.checkAgainstImages(q, b, "its "+AnnotationBuild+" annotation asks for it")
		return one(b, SourceAnnotation)
	}
	q.rec.add(Change{Action: Warn, Path: "metadata.annotations[" + AnnotationBuild + "]",
		Reason: "unknown build " + jsonString(clipName(v)) + "; use one of " + p.buildNames(), Rule: RuleUnknownBuild})
	return buildChoice{}, false
}

// checkAgainstImages warns when a build the pod chose explicitly cannot run one of its images: the
// choice stands (the user may know better, or the registry may be wrong), but not silently.
func (p *Policy) checkAgainstImages(q *buildQuery, b Build, why string) {
	for _, ci := range q.images {
		if ci.constrains() && !ci.linuxOnly() && q.rec.room(RuleImageNotOnBuild) && !p.runs(ci, b.Number) {
			q.rec.add(Change{Action: Warn, Path: ci.imagePath(),
				Reason: "the pod is pinned to Windows build " + b.Number + " (" + why + "), which cannot run " + ci.describe(), Rule: RuleImageNotOnBuild})
		}
	}
}

// imageBuilds answers for both image sources: the candidates are the builds every constraining image can
// run on, among the builds of ready nodes, or of the catalog offline (and when no ready node fits).
func (p *Policy) imageBuilds(q *buildQuery) (buildChoice, bool) {
	source := SourceImage
	constraining := 0
	for _, ci := range q.images {
		if ci.lookupErr != "" && q.rec.room(RuleImageUnread) {
			q.rec.add(Change{Action: Warn, Path: ci.imagePath(),
				Reason: "could not read " + ci.shown() + " from its registry (" + ci.lookupErr + "); its build is taken from the tag, namespace, cluster or default", Rule: RuleImageUnread})
		}
		if !ci.constrains() {
			continue
		}
		constraining++
		if ci.source == SourceImageManifest {
			source = SourceImageManifest
		}
	}
	if constraining == 0 {
		return buildChoice{}, false
	}
	runnable := func(host string) bool { return p.runsAll(q.images, host) }
	catalog := numbers(p.Builds)
	if c := q.facts.Cluster; c != nil {
		if fit := keep(c.Builds, runnable); len(fit) > 0 {
			return p.choice(fit, source), true
		}
		// Hyper-V isolation runs older images on newer hosts, where the cluster offers it.
		if k, hosts, ok := p.hyperVPlacement(q); ok {
			if !q.facts.afterCreation {
				c := p.choice(hosts, source)
				c.hyperV = &k
				return c, true
			}
			// runtimeClassName and overhead are fixed at creation: the builds the images were made for
			// are pinned below, and the pod's controller can make one that is admitted with the answer.
			q.rec.add(Change{Action: Warn, Path: "spec.runtimeClassName",
				Reason: "Hyper-V isolated RuntimeClass " + k.name + " would run it on Windows build " + strings.Join(hosts, " or ") + ", but a gated pod can no longer name one; delete the pod to have it re-created", Rule: RuleHyperV})
		}
		// No ready node can run the pod. Pin the catalog builds the images were made for (else, below,
		// those that could run them), so that an autoscaler adds the right node; schedule says the pod
		// waits.
		native := func(host string) bool {
			return !slices.ContainsFunc(q.images, func(ci containerImage) bool {
				return ci.constrains() && !slices.ContainsFunc(ci.entries, func(pl Platform) bool {
					return buildOf(pl.OSVersion) == host && p.HostRunsEntry(host, pl)
				})
			})
		}
		if fit := keep(catalog, native); len(fit) > 0 {
			return p.choice(fit, source), true
		}
	}
	if fit := keep(catalog, runnable); len(fit) > 0 {
		return p.choice(fit, source), true
	}
	if slices.ContainsFunc(q.images, containerImage.linuxOnly) {
		return buildChoice{}, true // already warned: an image with no Windows entry runs nowhere
	}
	q.rec.add(Change{Action: Warn, Path: "spec.nodeSelector[" + corev1.LabelWindowsBuild + "]",
		Reason: "no Windows build runs every image: " + p.imagesDescribed(q) + "; no build pinned, the pod cannot run as it is", Rule: RuleBuild})
	return buildChoice{}, true
}

func (p *Policy) imagesDescribed(q *buildQuery) string {
	var parts []string
	for _, ci := range q.images {
		if ci.constrains() {
			parts = append(parts, ci.owner()+" "+ci.describe())
		}
	}
	return strings.Join(parts, "; ")
}

func (p *Policy) choice(numbers []string, source string) buildChoice {
	c := buildChoice{source: source}
	for _, n := range numbers {
		c.builds = append(c.builds, p.catalogEntry(n))
	}
	return c
}

func (p *Policy) namespaceBuild(q *buildQuery) (buildChoice, bool) {
	v, set := q.facts.Namespace.Annotations[AnnotationBuild]
	if !set {
		return buildChoice{}, false
	}
	if b, ok := p.lookupBuild(v); ok {
		return one(b, SourceNamespace)
	}
	q.rec.add(Change{Action: Warn, Path: "namespace.annotations[" + AnnotationBuild + "]",
		Reason: "unknown build " + jsonString(clipName(v)) + " on the namespace; use one of " + p.buildNames(), Rule: RuleUnknownBuild})
	return buildChoice{}, false
}

func (p *Policy) clusterBuild(q *buildQuery) (buildChoice, bool) {
	if c := q.facts.Cluster; c != nil && len(c.Builds) == 1 {
		return one(p.catalogEntry(c.Builds[0]), SourceCluster)
	}
	return buildChoice{}, false
}

func (p *Policy) defaultBuild(q *buildQuery) (buildChoice, bool) {
	if p.DefaultBuild == "" {
		return buildChoice{}, false
	}
	return one(p.catalogEntry(p.DefaultBuild), SourceDefault)
}

// keep is the builds of list for which ok holds, in list's order; list is not changed.
func keep(list []string, ok func(string) bool) []string {
	return slices.DeleteFunc(slices.Clone(list), func(b string) bool { return !ok(b) })
}

func numbers(builds []Build) []string {
	out := make([]string, len(builds))
	for i, b := range builds {
		out[i] = b.Number
	}
	return out
}

// requireBuilds adds node.kubernetes.io/windows-build In builds to every term of the pod's required node
// affinity (terms are alternatives, so each must carry it), or creates the one term. The pod's own
// terms and expressions are never dropped, edited or reordered.
func requireBuilds(spec *corev1.PodSpec, builds []string, rec *recorder) {
	requireInEveryTerm(spec, corev1.NodeSelectorRequirement{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: builds},
		buildsReason(builds), RuleBuild, rec)
}

// buildsReason is the reason of build's pin in the node affinity; the record gives it back from the
// builds (record_codec.go).
func buildsReason(builds []string) string {
	return buildsReasonPrefix + strings.Join(builds, ", ")
}

const buildsReasonPrefix = "the pod's images run on Windows builds "

// requireInEveryTerm adds req to every term of the pod's required node affinity (terms are
// alternatives, so each must carry it), or makes it the only term when there is none.
func requireInEveryTerm(spec *corev1.PodSpec, req corev1.NodeSelectorRequirement, reason string, rule Rule, rec *recorder) {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := &na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	const path = affinityTermsPath
	if len(*terms) == 0 {
		*terms = append(*terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}})
		rec.add(Change{Action: Inject, Path: path, To: jsonValue((*terms)[0]), Reason: reason, Rule: rule})
		return
	}
	for i := range *terms {
		t := &(*terms)[i]
		if slices.ContainsFunc(t.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
			return e.Key == req.Key && e.Operator == req.Operator && slices.Equal(e.Values, req.Values)
		}) {
			continue
		}
		t.MatchExpressions = append(t.MatchExpressions, req)
		rec.add(Change{Action: Inject, Path: path + "[" + strconv.Itoa(i) + "].matchExpressions", To: jsonValue(req), Reason: reason, Rule: rule})
	}
}
