package policy

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Where a build choice came from, recorded in wincompat.io/build-source.
const (
	SourceAnnotation    = "annotation"
	SourceImageManifest = "image-manifest" // the registry's description of the images
	SourceImage         = "image"          // the image tags
	SourceNamespace     = "namespace"
	SourceCluster       = "cluster"
	SourceDefault       = "default"
	SourceNodeSelector  = "nodeSelector" // the pod already pins node.kubernetes.io/windows-build
	SourceRuntimeClass  = "runtimeClass" // the pod already names a catalog RuntimeClass
	SourceAffinity      = "affinity"     // the pod's required node affinity already limits the build
)

// KnownBuildSource reports whether source is one wincompat writes to wincompat.io/build-source (a row of
// buildSources). A pod may carry any other text there: it is the pod's annotation.
func KnownBuildSource(source string) bool {
	return slices.ContainsFunc(buildSources, func(s buildSource) bool { return s.name == source })
}

// CatalogBuilds reports whether build, one build number or several joined by commas (Decision.Build),
// names only builds of the catalog. A pod's own node affinity or a recorded annotation may name anything.
func (p *Policy) CatalogBuilds(build string) bool {
	for b := range strings.SplitSeq(build, ",") {
		if !slices.ContainsFunc(p.Builds, func(c Build) bool { return c.Number == b }) {
			return false
		}
	}
	return build != ""
}

// schedule injects what a Windows pod needs to land on a Windows node that can run it and
// returns the chosen builds, comma-separated, and their source ("" when none was chosen).
func (p *Policy) schedule(pod *corev1.Pod, facts Facts, images []containerImage, rec *recorder) (build, source string) {
	spec := &pod.Spec
	// A RuntimeClass the pod names brings its own nodeSelector; injecting another value for one of its
	// keys would make the RuntimeClass admission plugin reject the pod.
	classSelector := p.namedClassSelector(spec, facts)
	pin := func(key, value string, rule Rule) {
		if v, set := classSelector[key]; set && v != value {
			rec.add(Change{Action: Warn, Path: "spec.nodeSelector[" + key + "]",
				Reason: "RuntimeClass " + clipName(*spec.RuntimeClassName) + " selects " + key + "=" + v + "; left to it", Rule: rule})
			return
		}
		p.pinNodeLabel(spec, key, value, rule, rec)
	}
	pin(corev1.LabelOSStable, string(corev1.Windows), RuleWindowsNodeSelector)
	if p.Arch != "" {
		if _, set := spec.NodeSelector[corev1.LabelArchStable]; !set {
			pin(corev1.LabelArchStable, p.Arch, RuleArch)
		}
	}
	p.tolerateWindowsTaints(spec, facts.Cluster, rec)

	q := &buildQuery{pod: pod, facts: facts, images: images, rec: rec}
	if !HostProcess(spec) && p.mustGate(q) {
		gate(pod, rec)
		return "", ""
	}
	// A gate the admission policies added in the same request, now that the webhook decides here.
	removeGate(pod)
	if HostProcess(spec) {
		// HostProcess containers run directly on the host and work on any Windows build.
		return "", ""
	}
	choice := p.chooseBuild(q)
	chosen := numbers(choice.builds)
	switch len(chosen) {
	case 0:
		return "", ""
	case 1:
		b := choice.builds[0]
		if !heldByPod(choice.source) {
			pin(corev1.LabelWindowsBuild, b.Number, RuleBuild)
		}
		switch {
		case choice.hyperV != nil:
		case facts.afterCreation:
			p.pinClassScheduling(spec, b, facts, rec)
		default:
			p.setRuntimeClass(spec, b, facts, rec)
		}
	default:
		// No RuntimeClass: each catalog class selects one build, and one that selected none would add
		// nothing the os nodeSelector and tolerations do not already give.
		if !heldByPod(choice.source) {
			requireBuilds(spec, chosen, rec)
		}
	}
	if choice.hyperV != nil {
		p.useHyperV(spec, *choice.hyperV, chosen, images, rec)
	} else {
		// Hyper-V isolation runs the image's own kernel: the host's patch level does not matter to it.
		p.checkRevisions(images, chosen, facts.Cluster, rec)
	}
	if c := facts.Cluster; c != nil && !slices.ContainsFunc(chosen, func(b string) bool { return slices.Contains(c.Builds, b) }) {
		rec.add(Change{Action: Warn, Path: "spec.nodeSelector[" + corev1.LabelWindowsBuild + "]",
			Reason: noBuildNodeReason(chosen), Rule: RuleBuild})
	}
	return strings.Join(chosen, ","), choice.source
}

// noBuildNodeReason is the warning that no ready node runs the builds chosen; the record writes the
// builds alone (record_codec.go).
func noBuildNodeReason(builds []string) string {
	return noBuildNodeBefore + strings.Join(builds, noBuildNodeSep) + noBuildNodeAfter
}

const (
	noBuildNodeBefore = "no ready node runs Windows build "
	noBuildNodeSep    = " or "
	noBuildNodeAfter  = "; the pod will stay Pending until one joins"
)

// heldByPod: builds from this source already bind the pod's scheduling (its RuntimeClass's selector, its
// own required affinity), so pinning them again would only add a constraint to keep in step.
func heldByPod(source string) bool { return source == SourceRuntimeClass || source == SourceAffinity }

// namedClassSelector is the nodeSelector of the RuntimeClass the pod names: from the cluster in server
// mode, from the catalog offline. nil when the pod names none or an unknown one.
func (p *Policy) namedClassSelector(spec *corev1.PodSpec, facts Facts) map[string]string {
	if spec.RuntimeClassName == nil {
		return nil
	}
	if facts.Cluster != nil {
		return facts.Cluster.RuntimeClasses[*spec.RuntimeClassName].NodeSelector
	}
	if b, ok := p.buildByRuntimeClass(*spec.RuntimeClassName); ok {
		return p.RuntimeClassNodeSelector(b)
	}
	return nil
}

// RuntimeClassNodeSelector is the scheduling.nodeSelector of the RuntimeClass wincompat keeps for
// catalog build b. The RuntimeClass controller creates classes with it and offline decisions assume it,
// so both read it here: the RuntimeClass admission plugin merges it into every pod naming the class and
// rejects a pod whose own nodeSelector gives one of its keys another value.
func (p *Policy) RuntimeClassNodeSelector(b Build) map[string]string {
	sel := map[string]string{corev1.LabelOSStable: string(corev1.Windows), corev1.LabelWindowsBuild: b.Number}
	if p.Arch != "" {
		sel[corev1.LabelArchStable] = p.Arch
	}
	return sel
}

// setRuntimeClass names the build's RuntimeClass when the pod names none and (in server mode) the class
// exists and selects nothing the pod contradicts: a class edited or owned by someone else is not used.
func (p *Policy) setRuntimeClass(spec *corev1.PodSpec, b Build, facts Facts, rec *recorder) {
	if !p.SetRuntimeClassName || spec.RuntimeClassName != nil || b.RuntimeClass == "" {
		return
	}
	if facts.Cluster != nil {
		rc, exists := facts.Cluster.RuntimeClasses[b.RuntimeClass]
		if !exists {
			return
		}
		for _, key := range sortedKeys(rc.NodeSelector) {
			if v, set := spec.NodeSelector[key]; set && v != rc.NodeSelector[key] {
				rec.add(Change{Action: Warn, Path: "spec.runtimeClassName",
					Reason: "RuntimeClass " + b.RuntimeClass + " selects " + key + "=" + rc.NodeSelector[key] + ", which the pod contradicts; not set", Rule: RuleRuntimeClass})
				return
			}
		}
	}
	spec.RuntimeClassName = new(b.RuntimeClass)
	rec.add(Change{Action: Inject, Path: "spec.runtimeClassName", To: jsonValue(b.RuntimeClass),
		Reason: "RuntimeClass of Windows build " + b.Number, Rule: RuleRuntimeClass})
}

// Reasons recorded when pinNodeLabel sets a node label. ReasonPinned is exported because the admission
// policies record the same pin.
const (
	ReasonPinned      = "schedules onto Windows nodes"
	reasonPinConflict = "conflicted with a Windows pod"
)

// pinNodeLabel sets nodeSelector[key]=value, overwriting a conflicting value (recorded as a rewrite,
// which is also rendered as a warning).
func (p *Policy) pinNodeLabel(spec *corev1.PodSpec, key, value string, rule Rule, rec *recorder) {
	old, set := spec.NodeSelector[key]
	if set && old == value {
		return
	}
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[key] = value
	path := "spec.nodeSelector[" + key + "]"
	if set {
		rec.add(Change{Action: Rewrite, Path: path, From: jsonValue(old), To: jsonValue(value), Reason: reasonPinConflict, Rule: rule})
		return
	}
	rec.add(Change{Action: Inject, Path: path, To: jsonValue(value), Reason: ReasonPinned, Rule: rule})
}

// overriddenRequest records a warning when the user asked for a build in the pod's annotation but the
// pod's own scheduling decides another (or, with an empty chosen, none): the annotation is then
// rewritten to the build chosen, and that must not happen silently.
func (p *Policy) overriddenRequest(pod *corev1.Pod, chosen Build, why string, rec *recorder) {
	v, set := pod.Annotations[AnnotationBuild]
	if !set || pod.Annotations[AnnotationBuildSource] != "" {
		return // no request, or the build a previous pass recorded
	}
	if requested, ok := p.lookupBuild(v); ok && chosen.Number != "" && requested.Number == chosen.Number {
		return
	}
	rec.add(Change{Action: Warn, Path: "metadata.annotations[" + AnnotationBuild + "]",
		Reason: "requested build " + jsonString(clipName(v)) + " ignored: " + why, Rule: RuleBuildRequestIgnored})
}

// ResolveBuild resolves a build number or catalog name (case-insensitive) to its catalog entry, and also
// accepts a well-formed build number missing from the catalog (a node of a newer build than the policy
// knows), as an entry with no names and no RuntimeClass.
func (p *Policy) ResolveBuild(s string) (Build, bool) {
	if b, ok := p.lookupBuild(s); ok {
		return b, true
	}
	if buildNumber.MatchString(s) {
		return Build{Number: s}, true
	}
	return Build{}, false
}

// catalogEntry returns the catalog entry of a build number, or an entry with no names and no
// RuntimeClass for a build the catalog does not list.
func (p *Policy) catalogEntry(number string) Build {
	if b, ok := p.lookupBuild(number); ok {
		return b
	}
	return Build{Number: number}
}

func jsonString(s string) string { return string(jsonValue(s)) }
