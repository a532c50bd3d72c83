package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// builds judges the Windows builds of pods and templates against their nodes and their images: a pod on
// a node that cannot run it, a pod no ready node can take, an object pinned to builds its images
// cannot run on.
type builds struct {
	pol    *policy.Policy
	nodes  *nodes
	images *imageFacts
	hyperV *hyperV
	out    *sink
}

// pod reports a pod wincompat chose builds for (build, as wincompat.io/build records it) that its node
// cannot run, or that no ready node runs, and a pod whose image is of a newer revision than its node;
// it returns its node's build, "" when unknown.
func (b *builds) pod(ctx context.Context, p *corev1.Pod, obj, build string) (nodeBuild string) {
	if !b.nodes.known {
		return ""
	}
	isolated := b.hyperV.of(ctx, &p.Spec)
	b.revision(p, obj, isolated)
	if build == "" {
		return ""
	}
	// Several builds when wincompat required node affinity: the pod may run on any of them.
	chosen := splitBuilds(build)
	if len(chosen) == 0 {
		// Anyone who may update the pod may edit the annotation after admission.
		b.out.finding(BadAnnotation, p.Namespace, obj, fmt.Sprintf("%s: %q names no build", policy.AnnotationBuild, build))
		return ""
	}
	if p.Spec.NodeName == "" {
		if !slices.ContainsFunc(chosen, func(c string) bool { return b.nodes.readyBuild[c] }) {
			b.out.finding(PendingNoBuild, p.Namespace, obj, fmt.Sprintf("no ready node runs build %s", strings.Join(chosen, " or ")))
		}
		return ""
	}
	nodeBuild = b.nodes.build[p.Spec.NodeName]
	if nodeBuild != "" && !b.runsOn(&p.Spec, chosen, nodeBuild, isolated) {
		what := "build " + chosen[0]
		if len(chosen) > 1 {
			what = "builds " + strings.Join(chosen, ", ")
		}
		b.out.finding(BuildMismatch, p.Namespace, obj, fmt.Sprintf("chosen %s, but node %s runs %s", what, p.Spec.NodeName, nodeBuild))
	}
	return nodeBuild
}

// runsOn reports whether a pod wincompat gave the builds chosen can run on a node of build node. The
// chosen builds are the candidates wincompat found; a node outside them can still run the pod under
// the compatibility rule (a 2025 node runs 2022 images), judged from the images when something says
// what they are, else from the chosen builds as the images' own.
func (b *builds) runsOn(spec *corev1.PodSpec, chosen []string, node string, isolated map[string]policy.RuntimeClass) bool {
	if slices.Contains(chosen, node) {
		return true
	}
	if isolated != nil {
		// Hyper-V isolated: its own rule, a node not older than the images.
		if b.images.known(spec) {
			_, hosts := b.pol.HyperVBuilds(unpinned(spec), b.images.answers, []string{node}, isolated)
			return len(hosts) > 0
		}
		return slices.ContainsFunc(chosen, func(c string) bool { return policy.HyperVRuns(node, policy.Platform{OSVersion: c}) })
	}
	if b.images.known(spec) {
		return len(b.pol.CheckBuilds(unpinned(spec), b.images.answers, []string{node}).Runnable) > 0
	}
	return slices.ContainsFunc(chosen, func(c string) bool { return b.pol.HostRuns(node, c) })
}

// notInImage reports a Windows pod or template pinned to builds none of which its images can run on.
// annotations are the object's own (a pod's, or a template's metadata), where wincompat.io/build may
// ask for builds.
func (b *builds) notInImage(ctx context.Context, ns, obj string, spec *corev1.PodSpec, annotations map[string]string) {
	if policy.HostProcess(spec) {
		return // HostProcess containers run on the host, whatever its build
	}
	pins, by := b.pins(spec, annotations)
	if len(pins) == 0 {
		return
	}
	if isolated := b.hyperV.of(ctx, spec); isolated != nil {
		if _, hosts := b.pol.HyperVBuilds(unpinned(spec), b.images.answers, pins, isolated); len(hosts) > 0 {
			return // its Hyper-V RuntimeClass runs the images there
		}
	}
	if check := b.pol.CheckBuilds(unpinned(spec), b.images.answers, pins); len(check.Runnable) == 0 && len(check.Reasons) > 0 {
		b.out.finding(BuildNotInImage, ns, obj, fmt.Sprintf("pinned to %s by %s, but %s", strings.Join(pins, " or "), by, strings.Join(check.Reasons, "; ")))
	}
}

// revision reports a pod (not finished) on a Windows node whose image, as its registry says, is of that
// node's build and of a newer revision than the node reports in status.nodeInfo.kernelVersion: such
// images are reported failing to start until the node is updated. Hyper-V isolation runs the image's own
// kernel, so a pod of a Hyper-V RuntimeClass is not judged.
func (b *builds) revision(p *corev1.Pod, obj string, isolated map[string]policy.RuntimeClass) {
	if isolated != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	node := p.Spec.NodeName
	r, known := b.nodes.revision[node]
	if !known {
		return
	}
	build := b.nodes.build[node]
	if ahead := b.pol.RevisionsAhead(&p.Spec, b.images.answers, build, r); len(ahead) > 0 {
		b.out.finding(ImageNewerRevision, p.Namespace, obj, fmt.Sprintf("node %s runs %s.%d; %s: of a newer revision, reported failing to start until the node is updated",
			node, build, r, strings.Join(ahead, ", ")))
	}
}

// pins are the builds spec may run on by its nodeSelector and required node affinity, else by the
// wincompat.io/build annotation (a request wincompat honours when it admits the pod), and what pins them.
func (b *builds) pins(spec *corev1.PodSpec, annotations map[string]string) ([]string, string) {
	if pins := policy.PinnedBuilds(spec); pins != nil {
		if _, ok := spec.NodeSelector[corev1.LabelWindowsBuild]; ok {
			return pins, "its nodeSelector"
		}
		return pins, "its required node affinity"
	}
	var pins []string
	for _, v := range splitBuilds(annotations[policy.AnnotationBuild]) {
		if number, ok := catalogBuild(b.pol, v); ok && !slices.Contains(pins, number) {
			pins = append(pins, number)
		}
	}
	return pins, "its " + policy.AnnotationBuild + " annotation"
}

// unpinned is spec without the pins CheckBuilds reads, so that it judges the images alone.
func unpinned(spec *corev1.PodSpec) *corev1.PodSpec {
	s := *spec
	s.NodeSelector, s.Affinity = nil, nil
	return &s
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
