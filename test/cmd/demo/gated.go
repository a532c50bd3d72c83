package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/audit"
	"github.com/wincompat/wincompat/webhook/scheduling/gated"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
)

// gatedDelay is how late the registry answers every manifest in the gated section: past the webhook's
// admission budget (--image-lookup-timeout, 1s), a registry on a Monday morning.
const gatedDelay = 3 * time.Second

// gatedWait bounds the wait for the leader to remove the gate: the registry's answer comes gatedDelay
// after the pod's creation; --gate-timeout (3m) is the bound of last resort, far past it.
const gatedWait = 45 * time.Second

// imgHeldBack is tagged ltsc2019 but holds only a 2022 entry: its tag alone would pin it to 2019 nodes,
// which cannot run it.
var imgHeldBack = &shopImage{repo: "shop/held-back", tag: "ltsc2019", mediaType: types.OCIImageIndex,
	platforms: []registrytest.Platform{registrytest.Windows("10.0.20348.2227")}}

// gatedPlacement: a pod whose registry answers too late for admission is stored behind wincompat's
// scheduling gate with no build, which the scheduler leaves alone and `wincompat audit` reports; the
// leader reads the registry off the admission path, pins the build the image's manifest gives, and
// removes the gate; the scheduler then places the pod on a node that runs it.
func (d *demo) gatedPlacement(ctx context.Context) error {
	d.section("Gated placement: the registry answers every manifest %s late, past the webhook's 1s budget", gatedDelay)
	var err error
	if imgHeldBack.ref, err = d.registry.PushIndex(imgHeldBack.repo, imgHeldBack.tag, imgHeldBack.mediaType, imgHeldBack.platforms...); err != nil {
		return err
	}
	d.detail("pushed %s:%s OCI index: %s (its tag names 2019; its only entry is 2022)", imgHeldBack.repo, imgHeldBack.tag, describePlatforms(imgHeldBack.platforms))
	sp := &shopPod{name: "held-back", containers: []shopContainer{{"app", imgHeldBack}}}

	// What the tag alone says: the build admission would have pinned without waiting for the registry.
	byTag, err := d.tagBuild(ctx, sp)
	if err != nil {
		return err
	}

	d.registry.SetDelay(gatedDelay)
	defer d.registry.SetDelay(0)
	d.detail("the registry now answers every manifest %s late", gatedDelay)
	pod := sp.pod()
	created := time.Now()
	if err := d.c.Create(ctx, pod); err != nil {
		d.warnings.Take()
		return fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
	admitted := time.Since(created)
	warns := d.warnings.Take()
	d.detail("created pod %s %s in %.1fs; the API server returned %s", pod.Name, sp.imageList(), admitted.Seconds(), plural(len(warns), "warning"))
	for _, w := range warns {
		d.detail("  warning: %s", w)
	}
	scheduled := "no PodScheduled condition"
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			scheduled = fmt.Sprintf("PodScheduled=%s %s", c.Status, c.Reason)
		}
	}
	if !policy.Gated(pod) || pod.Labels[policy.LabelGated] != "true" || pod.Annotations[policy.AnnotationBuild] != "" || pod.Spec.NodeSelector[corev1.LabelWindowsBuild] != "" {
		return fmt.Errorf("pod %s was not stored behind the gate %s without a build: gates %v, labels %v, build %q, nodeSelector %v (warnings: %q)",
			pod.Name, policy.SchedulingGate, pod.Spec.SchedulingGates, pod.Labels, pod.Annotations[policy.AnnotationBuild], pod.Spec.NodeSelector, warns)
	}
	d.detail("  stored      schedulingGates %s, label %s=true, no build annotation, no windows-build pin; %s", gateNames(pod), policy.LabelGated, scheduled)
	d.brief("pod %s (%s:%s, tagged 2019, its only entry 2022) admitted in %.1fs behind the gate %s,", pod.Name, imgHeldBack.repo, imgHeldBack.tag, admitted.Seconds(), policy.SchedulingGate)
	d.brief("  no build yet (%s); its tag alone would have pinned %s", scheduled, byTag)

	// The audit sees it while it waits (unless the leader was quicker than the audit).
	finding, err := d.auditFinding(ctx, pod, audit.GatedPod)
	if err != nil {
		return err
	}
	var now corev1.Pod
	if err := d.c.Get(ctx, client.ObjectKeyFromObject(pod), &now); err != nil {
		return err
	}
	switch {
	case finding != "":
		d.detail("  audit       %s: %s", audit.GatedPod, finding)
		age, _, _ := strings.Cut(finding, " (")
		d.brief("  wincompat audit reports it: %s, %s", audit.GatedPod, age)
	case policy.Gated(&now):
		return fmt.Errorf("wincompat audit reports no %s finding for pod %s, which is still gated", audit.GatedPod, pod.Name)
	default:
		d.detail("  audit       the leader removed the gate before the audit read the pod")
	}

	// The leader reads the registry off the admission path, pins the build and removes the gate.
	if err := d.waitPlaced(ctx, pod, ""); err != nil {
		return err
	}
	placed := time.Since(created)
	a := pod.Annotations
	node := d.nodes[pod.Spec.NodeName]
	if a[policy.AnnotationBuild] != build2025 || a[policy.AnnotationBuildSource] != policy.SourceImageManifest ||
		pod.Spec.NodeSelector[corev1.LabelWindowsBuild] != build2025 || node.build != build2025 || pod.Labels[policy.LabelGated] != "" {
		return fmt.Errorf("pod %s after the gate: build %q from %q, nodeSelector %v, label %q, bound to %s (%s); want %s from %s on a %s node",
			pod.Name, a[policy.AnnotationBuild], a[policy.AnnotationBuildSource], pod.Spec.NodeSelector, pod.Labels[policy.LabelGated],
			pod.Spec.NodeName, node.build, build2025, policy.SourceImageManifest, build2025)
	}
	changes, err := policy.DecodeChanges(a[policy.AnnotationChanges])
	if err != nil {
		return fmt.Errorf("the record of pod %s: %w", pod.Name, err)
	}
	for _, c := range changes {
		if c.Rule == policy.RuleBuildGate {
			d.detail("  recorded    %s %s: %s", c.Action, c.Path, c.Reason)
		}
	}
	event, err := d.podEvent(ctx, pod, gated.ReasonDecided)
	if err != nil {
		return err
	}
	d.detail("  event       %s: %s", gated.ReasonDecided, event)
	d.detail("  placed      %.1fs after its creation: build %s from %s, nodeSelector %s=%s, bound to %s (%s)",
		placed.Seconds(), a[policy.AnnotationBuild], a[policy.AnnotationBuildSource], corev1.LabelWindowsBuild, build2025, pod.Spec.NodeName, node.build)
	d.brief("%.1fs after its creation the leader had read the registry, pinned build %s (%s) and removed the gate", placed.Seconds(), build2025, policy.SourceImageManifest)
	d.brief("  (Event %s); kube-scheduler bound it to %s (%s), which runs 2022 images", gated.ReasonDecided, pod.Spec.NodeName, node.build)
	if d.verbose {
		fmt.Fprintln(d.out)
	}
	d.say("a pod whose registry was slow waited behind the gate instead of landing on a 2019 node that cannot run it")
	return nil
}

// tagBuild is the build `wincompat mutate` pins for sp offline, from its image's tag: what admission
// without the registry's answer goes by.
func (d *demo) tagBuild(ctx context.Context, sp *shopPod) (string, error) {
	raw, err := yaml.Marshal(sp.pod())
	if err != nil {
		return "", err
	}
	file := filepath.Join(d.work, sp.name+".yaml")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return "", err
	}
	out, _, err := d.mutate(ctx, os.Environ(), []string{"mutate", "-f", file})
	if err != nil {
		return "", err
	}
	build, source := out.Annotations[policy.AnnotationBuild], out.Annotations[policy.AnnotationBuildSource]
	if build != build2019 {
		return "", fmt.Errorf("wincompat mutate pinned %s to %q from %q by its tag %s, want %s", sp.name, build, source, imgHeldBack.tag, build2019)
	}
	d.detail("without the registry (wincompat mutate): build %s from %s, the tag: a 2019 node, which cannot run the image's 2022 entry", build, source)
	return build + " (2019)", nil
}

// podEvent waits a little for the Event of reason on pod (the leader records it after its write) and
// returns its message.
func (d *demo) podEvent(ctx context.Context, pod *corev1.Pod, reason string) (string, error) {
	msg := ""
	err := d.poll(ctx, 10*time.Second, func() (bool, error) {
		var events corev1.EventList
		if err := d.c.List(ctx, &events, client.InNamespace(pod.Namespace)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.UID == pod.UID && e.Reason == reason {
				msg = e.Message
			}
		}
		return msg != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("no Event %s on pod %s: %w", reason, pod.Name, err)
	}
	return msg, nil
}

func gateNames(p *corev1.Pod) string {
	var names []string
	for _, g := range p.Spec.SchedulingGates {
		names = append(names, g.Name)
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// auditFinding runs the audit on pod's namespace and returns the detail of its finding of kind, "" for none.
func (d *demo) auditFinding(ctx context.Context, pod *corev1.Pod, kind string) (string, error) {
	rep, err := audit.Run(ctx, d.c, audit.Options{Namespaces: []string{pod.Namespace}})
	if err != nil {
		return "", err
	}
	for _, f := range rep.Findings {
		if f.Kind == kind && f.Object == "Pod/"+pod.Name {
			return f.Detail, nil
		}
	}
	return "", nil
}

// waitPlaced waits, within gatedWait, until the leader has removed wincompat's gate from pod and the
// scheduler has bound it; pod is read again as it goes. since says from when, for the error.
func (d *demo) waitPlaced(ctx context.Context, pod *corev1.Pod, since string) error {
	var last string
	err := d.poll(ctx, gatedWait, func() (bool, error) {
		if err := d.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		last = fmt.Sprintf("gates %v, node %q", pod.Spec.SchedulingGates, pod.Spec.NodeName)
		return !policy.Gated(pod) && pod.Spec.NodeName != "", nil
	})
	if err != nil {
		return fmt.Errorf("pod %s was not ungated and bound within %s%s (%s): %w", pod.Name, gatedWait, since, last, err)
	}
	return nil
}
