package policy

import (
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// Where a build choice came from, recorded in wincompat.io/build-source.
const (
	SourceAnnotation   = "annotation"
	SourceImage        = "image"
	SourceNamespace    = "namespace"
	SourceCluster      = "cluster"
	SourceDefault      = "default"
	SourceNodeSelector = "nodeSelector" // the pod already pins node.kubernetes.io/windows-build
	SourceRuntimeClass = "runtimeClass" // the pod already names a catalog RuntimeClass
)

// schedule injects what a Windows pod needs to land on a Windows node of the right build (DESIGN §5)
// and returns the chosen build and its source ("" when none was chosen).
func (p *Policy) schedule(pod *corev1.Pod, facts Facts, rec *recorder) (build, source string) {
	spec := &pod.Spec
	// A RuntimeClass the pod names brings its own nodeSelector; injecting another value for one of its
	// keys would make the RuntimeClass admission plugin reject the pod.
	classSelector := p.namedClassSelector(spec, facts)
	pin := func(key, value string) {
		if v, set := classSelector[key]; set && v != value {
			rec.add(Change{Action: Warn, Path: "spec.nodeSelector[" + key + "]",
				Reason: "RuntimeClass " + *spec.RuntimeClassName + " selects " + key + "=" + v + "; left to it"})
			return
		}
		p.pinNodeLabel(spec, key, value, rec)
	}
	pin(corev1.LabelOSStable, string(corev1.Windows))
	if p.Arch != "" {
		if _, set := spec.NodeSelector[corev1.LabelArchStable]; !set {
			pin(corev1.LabelArchStable, p.Arch)
		}
	}
	p.tolerateWindowsTaints(spec, rec)

	if hostProcess(spec) {
		// HostProcess containers run directly on the host and work on any Windows build.
		return "", ""
	}
	b, source := p.chooseBuild(pod, facts, rec)
	if source == "" {
		return "", ""
	}
	if source != SourceRuntimeClass {
		pin(labelWindowsBuild, b.Number)
	}
	p.setRuntimeClass(spec, b, facts, rec)
	if c := facts.Cluster; c != nil && !slices.Contains(c.Builds, b.Number) {
		rec.add(Change{Action: Warn, Path: "spec.nodeSelector[" + labelWindowsBuild + "]",
			Reason: "no ready node runs Windows build " + b.Number + "; the pod will stay Pending until one joins"})
	}
	return b.Number, source
}

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
		return p.catalogSelector(b)
	}
	return nil
}

// catalogSelector is the nodeSelector wincompat gives the RuntimeClass of a catalog build.
func (p *Policy) catalogSelector(b Build) map[string]string {
	sel := map[string]string{corev1.LabelOSStable: string(corev1.Windows), labelWindowsBuild: b.Number}
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
					Reason: "RuntimeClass " + b.RuntimeClass + " selects " + key + "=" + rc.NodeSelector[key] + ", which the pod contradicts; not set"})
				return
			}
		}
	}
	spec.RuntimeClassName = new(b.RuntimeClass)
	rec.add(Change{Action: Inject, Path: "spec.runtimeClassName", To: jsonValue(b.RuntimeClass),
		Reason: "RuntimeClass of Windows build " + b.Number})
}

// pinNodeLabel sets nodeSelector[key]=value, overwriting a conflicting value (recorded as a rewrite,
// which is also rendered as a warning).
func (p *Policy) pinNodeLabel(spec *corev1.PodSpec, key, value string, rec *recorder) {
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
		rec.add(Change{Action: Rewrite, Path: path, From: jsonValue(old), To: jsonValue(value), Reason: "conflicted with a Windows pod"})
		return
	}
	rec.add(Change{Action: Inject, Path: path, To: jsonValue(value), Reason: "schedules onto Windows nodes"})
}

// tolerateWindowsTaints appends a toleration for each Windows node taint the pod does not tolerate yet.
// Existing tolerations are never edited or reordered.
func (p *Policy) tolerateWindowsTaints(spec *corev1.PodSpec, rec *recorder) {
	for _, taint := range p.WindowsNodeTaints {
		tolerated := slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool {
			return t.ToleratesTaint(logr.Discard(), &taint, false)
		})
		if tolerated {
			continue
		}
		t := corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}
		spec.Tolerations = append(spec.Tolerations, t)
		rec.add(Change{Action: Inject, Path: "spec.tolerations", To: jsonValue(t), Reason: "tolerates the Windows node taint " + taint.ToString()})
	}
}

// chooseBuild picks the build the first source that answers gives (DESIGN §5). A recorded choice wins so
// that reinvocation, and later passes, give the same answer.
func (p *Policy) chooseBuild(pod *corev1.Pod, facts Facts, rec *recorder) (Build, string) {
	spec := &pod.Spec
	pinned, hasPin := spec.NodeSelector[labelWindowsBuild]
	if src := pod.Annotations[AnnotationBuildSource]; src != "" {
		if b, ok := p.resolveBuild(pod.Annotations[AnnotationBuild]); ok && (!hasPin || pinned == b.Number) {
			return b, src
		}
	}
	if hasPin {
		b := p.catalogEntry(pinned)
		p.overriddenRequest(pod, b, "the pod's nodeSelector pins "+labelWindowsBuild+"="+pinned, rec)
		return b, SourceNodeSelector
	}
	if spec.RuntimeClassName != nil {
		// A RuntimeClass carries its own scheduling: its build, if it selects one, is the pod's; if it
		// selects none (or is unknown), pinning a build could contradict it.
		if n := p.namedClassSelector(spec, facts)[labelWindowsBuild]; n != "" {
			b := p.catalogEntry(n)
			p.overriddenRequest(pod, b, "its RuntimeClass "+*spec.RuntimeClassName+" selects build "+n, rec)
			return b, SourceRuntimeClass
		}
		p.overriddenRequest(pod, Build{}, "its RuntimeClass "+*spec.RuntimeClassName+" decides where it runs", rec)
		return Build{}, ""
	}
	if v, set := pod.Annotations[AnnotationBuild]; set {
		if b, ok := p.lookupBuild(v); ok {
			return b, SourceAnnotation
		}
		rec.add(Change{Action: Warn, Path: "metadata.annotations[" + AnnotationBuild + "]",
			Reason: "unknown build " + jsonString(v) + "; use one of " + p.buildNames()})
	}
	if b, ok := p.buildOfImages(spec, rec); ok {
		return b, SourceImage
	}
	if v, set := facts.Namespace.Annotations[AnnotationBuild]; set {
		if b, ok := p.lookupBuild(v); ok {
			return b, SourceNamespace
		}
		rec.add(Change{Action: Warn, Path: "namespace.annotations[" + AnnotationBuild + "]",
			Reason: "unknown build " + jsonString(v) + " on the namespace; use one of " + p.buildNames()})
	}
	if c := facts.Cluster; c != nil && len(c.Builds) == 1 {
		return p.catalogEntry(c.Builds[0]), SourceCluster
	}
	if p.DefaultBuild != "" {
		return p.catalogEntry(p.DefaultBuild), SourceDefault
	}
	if c := facts.Cluster; c != nil && len(c.Builds) > 1 {
		rec.add(Change{Action: Warn, Path: "spec.nodeSelector[" + labelWindowsBuild + "]",
			Reason: "no build chosen while the cluster runs " + strings.Join(c.Builds, ", ") + "; the pod may land on a node whose build does not match its image"})
	}
	return Build{}, ""
}

// resolveBuild is lookupBuild that also accepts a well-formed build number missing from the catalog
// (a node of a newer build than the policy knows).
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
		Reason: "requested build " + jsonString(v) + " ignored: " + why})
}

func (p *Policy) resolveBuild(s string) (Build, bool) {
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

// buildOfImages infers one build from the images of all containers and init containers. Images with no
// build in their tag do not vote; images that disagree leave the choice to later sources, with a warning.
func (p *Policy) buildOfImages(spec *corev1.PodSpec, rec *recorder) (Build, bool) {
	var chosen Build
	var voters []string
	agree := true
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			b, ok := p.BuildOfImage(c.Image)
			if !ok {
				continue
			}
			if chosen.Number != "" && b.Number != chosen.Number {
				agree = false
			}
			if chosen.Number == "" {
				chosen = b
			}
			voters = append(voters, c.Name+"="+b.Number)
		}
	}
	if !agree {
		rec.add(Change{Action: Warn, Path: "spec.containers[*].image",
			Reason: "images are built for different Windows builds (" + strings.Join(voters, ", ") + "); no build chosen from images"})
		return Build{}, false
	}
	return chosen, chosen.Number != ""
}

func jsonString(s string) string { return string(jsonValue(s)) }
