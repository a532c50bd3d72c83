package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// podGroup is the pods of one shape: identical replicas of a workload, or a bare pod alone. The demo
// tells of each group once.
type podGroup struct {
	reports []podReport
	nodes   []string // where kube-scheduler bound them, each once, in order
}

// groupPods groups reports by shape, in the order of their first pod.
func groupPods(reports []podReport) []*podGroup {
	var groups []*podGroup
	byShape := map[string]*podGroup{}
	for _, r := range reports {
		s := r.shape()
		g := byShape[s]
		if g == nil {
			g = &podGroup{}
			byShape[s] = g
			groups = append(groups, g)
		}
		g.reports = append(g.reports, r)
		if !slices.Contains(g.nodes, r.pod.Spec.NodeName) {
			g.nodes = append(g.nodes, r.pod.Spec.NodeName)
		}
	}
	return groups
}

// shape is what identical replicas share: their workload, wincompat's decision and record, the
// warnings. A pod created bare is a shape of its own.
func (r podReport) shape() string {
	owner := r.owner
	if owner == "" {
		owner = "Pod " + r.namespace + "/" + r.name
	}
	a := r.pod.Annotations
	return strings.Join([]string{owner, a[policy.AnnotationBuild], a[policy.AnnotationBuildSource], runtimeClass(&r.pod),
		a[policy.AnnotationTemplateChanges], a[policy.AnnotationChanges], strings.Join(r.warnings, "\n"),
		strconv.FormatBool(r.linuxChart)}, "\x00")
}

// who names a group: "2 pods of Deployment web", "pod api".
func (g *podGroup) who() string {
	r := g.reports[0]
	if r.owner == "" {
		return "pod " + r.name
	}
	return plural(len(g.reports), "pod") + " of " + r.owner
}

// names are the group's pods.
func (g *podGroup) names() []string {
	names := make([]string, len(g.reports))
	for i, r := range g.reports {
		names[i] = r.name
	}
	return names
}

// outcome is the group in one line: its build and where it came from, its RuntimeClass, its nodes; for
// pods of Linux images, that they would not start where they went.
func (g *podGroup) outcome(nodes map[string]nodeSpec) string {
	r := g.reports[0]
	a := r.pod.Annotations
	build := "no build chosen"
	if b := a[policy.AnnotationBuild]; b != "" {
		build = "build " + strings.ReplaceAll(b, ",", " or ") + " (" + sourceBrief(a[policy.AnnotationBuildSource]) + ")"
	}
	rc := "no RuntimeClass"
	if name := runtimeClass(&r.pod); name != "" {
		rc = "RuntimeClass " + name
	}
	var on []string
	for _, n := range g.nodes {
		if nodes[n].os == "windows" {
			on = append(on, n)
		} else {
			on = append(on, n+" ("+nodeOS(nodes[n])+")")
		}
	}
	where := "on " + strings.Join(on, ", ")
	linux := r.linuxImages()
	if len(linux) == 0 {
		return fmt.Sprintf("%s: %s, %s, %s", g.who(), build, rc, where)
	}
	what := "Linux image " + strings.Join(linux, ", ")
	if r.linuxChart {
		what += " (a Linux chart declared Windows)"
	}
	it := "it"
	if len(g.reports) > 1 {
		it = "they"
	}
	return fmt.Sprintf("%s: %s, %s; bound to %s, where %s would not start", g.who(), what, build, strings.Join(on, ", "), it)
}

// changes is what wincompat did to the group's pods, template and pod together, in one line.
func (g *podGroup) changes() string {
	a := g.reports[0].pod.Annotations
	var all []policy.Change
	for _, key := range []string{policy.AnnotationTemplateChanges, policy.AnnotationChanges} {
		changes, err := policy.DecodeChanges(a[key])
		if err != nil {
			return fmt.Sprintf("unreadable %s: %v", key, err)
		}
		all = append(all, changes...)
	}
	if len(all) == 0 {
		return "nothing to change"
	}
	return brief(all)
}

// linuxImages are the images of the pod that no Windows node runs: every image of a pod from the Linux
// chart the demo declared Windows, and the images admission recorded as having no Windows entry (what
// their registry said).
func (r podReport) linuxImages() []string {
	changes, _ := policy.DecodeChanges(r.pod.Annotations[policy.AnnotationChanges])
	var out []string
	for _, list := range []struct {
		field      string
		containers []corev1.Container
	}{{"initContainers", r.pod.Spec.InitContainers}, {"containers", r.pod.Spec.Containers}} {
		for _, c := range list.containers {
			_, recorded := policy.RecordedLinuxOnly(changes, "spec."+list.field+"["+c.Name+"]", c.Image)
			if (r.linuxChart || recorded) && !slices.Contains(out, c.Image) {
				out = append(out, c.Image)
			}
		}
	}
	return out
}

// tally counts the pods of Windows images on Windows nodes, each on the build wincompat chose where it
// chose one, and names apart the pods of Linux images: no Windows node runs them, wherever they went.
// Pods placed otherwise are the caller's error.
func tally(reports []podReport, nodes map[string]nodeSpec) string {
	var windows, nLinux int
	var linux []string
	for _, r := range reports {
		if len(r.linuxImages()) > 0 {
			// Named as their group is: replicas are told apart with -v only.
			name := r.owner
			if name == "" {
				name = "pod " + r.name
			}
			if !slices.Contains(linux, name) {
				linux = append(linux, name)
			}
			nLinux++
			continue
		}
		if onItsBuild(&r.pod, nodes) {
			windows++
		}
	}
	s := plural(windows, "pod") + " of Windows images on Windows nodes, each on the build wincompat chose"
	if len(linux) > 0 {
		s += fmt.Sprintf("; not counted: %s of Linux images (%s)", plural(nLinux, "pod"), strings.Join(linux, ", "))
	}
	return s
}

// onItsBuild: bound to a Windows node of one of the builds wincompat chose (any, when it chose none).
func onItsBuild(p *corev1.Pod, nodes map[string]nodeSpec) bool {
	n := nodes[p.Spec.NodeName]
	build := p.Annotations[policy.AnnotationBuild]
	return n.os == "windows" && (build == "" || slices.Contains(strings.Split(build, ","), n.build))
}

func nodeOS(n nodeSpec) string {
	if n.os == "windows" {
		return "Windows " + n.build
	}
	if n.os == "" {
		return "no such node"
	}
	return "Linux"
}

func runtimeClass(p *corev1.Pod) string {
	if p.Spec.RuntimeClassName == nil {
		return ""
	}
	return *p.Spec.RuntimeClassName
}

// sourceBrief is a build source in a few words, for the one-line outcome; buildSource says it in full.
func sourceBrief(s string) string {
	switch s {
	case policy.SourceImage:
		return "image tag"
	case policy.SourceImageManifest:
		return "image manifest"
	case policy.SourceNodeSelector:
		return "its nodeSelector"
	case policy.SourceAffinity:
		return "its own affinity"
	case policy.SourceRuntimeClass:
		return "its RuntimeClass"
	case policy.SourceAnnotation:
		return "its " + policy.AnnotationBuild
	case policy.SourceCluster:
		return "the cluster's only build"
	}
	return s
}

// brief says what changes did in one line, by kind of field, each named once: "removed 6 Linux-only
// fields; set runAsUserName, nodeSelector, tolerations, RuntimeClass; warned: image, memory-no-limit".
// summarise says it per field and container; -v prints that.
func brief(changes []policy.Change) string {
	var removed []string
	names := map[policy.Action][]string{}
	for _, c := range changes {
		if c.Action == policy.Strip {
			if !slices.Contains(removed, c.Path) {
				removed = append(removed, c.Path)
			}
			continue
		}
		name := briefName(c)
		if !slices.Contains(names[c.Action], name) {
			names[c.Action] = append(names[c.Action], name)
		}
	}
	var parts []string
	if len(removed) > 0 {
		parts = append(parts, "removed "+plural(len(removed), "Linux-only field"))
	}
	for _, a := range []struct {
		action policy.Action
		verb   string
	}{{policy.Rewrite, "rewrote "}, {policy.Inject, "set "}, {policy.Warn, "warned: "}} {
		if len(names[a.action]) > 0 {
			parts = append(parts, a.verb+strings.Join(names[a.action], ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// briefName names what a change is about in a word or two: its rule's code for a warning the rules table
// recognises, else the field as users know it.
func briefName(c policy.Change) string {
	if c.Action == policy.Warn {
		if r := policy.RuleOf(c); r != "" {
			return string(r)
		}
	}
	path := strings.TrimPrefix(c.Path, "spec.")
	switch {
	case c.Action == policy.Inject && (path == "metadata.labels" || path == "metadata.annotations"):
		return "injector opt-outs"
	case c.Action == policy.Warn && path == "nodeSelector["+corev1.LabelWindowsBuild+"]":
		return "build" // no build chosen, or one the pod's images cannot run on
	case strings.HasPrefix(path, "nodeSelector"):
		return "nodeSelector"
	case path == "tolerations":
		return "tolerations"
	case path == "runtimeClassName":
		return "RuntimeClass"
	case strings.HasPrefix(path, "affinity."):
		return "node affinity"
	}
	if m := containerPath.FindStringSubmatch(path); m != nil {
		path = m[2]
	} else if m := volumePath.FindStringSubmatch(path); m != nil {
		path = m[2]
	}
	// The last two names of the path, without the keys in brackets (which may hold dots):
	// emptyDir.medium, limits.memory, volumeMounts.subPath.
	var bare strings.Builder
	depth := 0
	for _, r := range path {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			bare.WriteRune(r)
		}
	}
	var segs []string
	for _, s := range strings.Split(bare.String(), ".") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	if len(segs) > 2 {
		segs = segs[len(segs)-2:]
	}
	if segs[0] == "windowsOptions" { // runAsUserName says it
		segs = segs[1:]
	}
	return strings.Join(segs, ".")
}
