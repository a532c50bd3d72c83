package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
	"github.com/wincompat/wincompat/webhook/server"
)

// Mirrors and air-gapped clusters: MCR's images answered by a mirror on loopback. The demo has no
// internet, so MCR answering at all would be a failure; air-gapped mode makes wincompat never ask it.
const (
	mcr          = "mcr.microsoft.com"
	mirroredRepo = "dotnet/aspnet"
	mirroredTag  = "8.0" // a tag that names no Windows build
	// absentImage is not on the mirror: its lookup must name the mirror alone, MCR not being asked.
	absentImage = mcr + "/windows/nanoserver:ltsc2022"
)

// mirroredPlatforms are the copy's entries: Windows Server 2022 and 2025 and Linux. Of the cluster's
// builds (2019 and 2025 by now) only 2025 runs it.
var mirroredPlatforms = []registrytest.Platform{registrytest.Linux("amd64"), registrytest.Linux("arm64"),
	registrytest.Windows("10.0.20348.2849"), registrytest.Windows("10.0.26100.2314")}

func (d *demo) mirrors(ctx context.Context) error {
	d.section("Mirrors and air-gapped clusters: MCR's images read from a mirror on loopback, MCR never asked")
	mirror := registrytest.Start()
	defer mirror.Close()
	if _, err := mirror.PushIndex(mirroredRepo, mirroredTag, types.DockerManifestList, mirroredPlatforms...); err != nil {
		return err
	}
	image := mcr + "/" + mirroredRepo + ":" + mirroredTag
	d.detail("mirror registry %s in this process holds %s:%s (%s)", mirror.Host, mirroredRepo, mirroredTag, describePlatforms(mirroredPlatforms))

	mirrored := demoPolicy + "registryMirrors:\n- registry: " + mcr + "\n  mirrors: [{host: \"" + mirror.Host + "\", capabilities: [pull, resolve]}]\n  airGapped: true\n"
	t := time.Now()
	if err := d.applyPolicy(ctx, mirrored); err != nil {
		return err
	}
	// The pod's record names the mirror by its place in the entry: its host is the operator's network.
	record := "read from mirror #1 for " + mcr
	// In force once a dry-run pod of the image is decided from the mirror.
	var last string
	err := d.poll(ctx, 20*time.Second, func() (bool, error) {
		p := mirrorPod("probe", image)
		if err := d.c.Create(ctx, p, client.DryRunAll); err != nil {
			last = err.Error()
			return false, nil
		}
		last = p.Annotations[policy.AnnotationChanges]
		return strings.Contains(last, record), nil
	})
	d.warnings.Take()
	if err != nil {
		return fmt.Errorf("wincompat did not read %s from mirror %s after the policy changed (last: %s): %w", image, mirror.Host, last, err)
	}
	d.detail("policy registryMirrors (applied to ConfigMap %s, checked by the policy check, reloaded):", policyConfigMap)
	for l := range strings.SplitSeq(strings.TrimPrefix(mirrored, demoPolicy), "\n") {
		if l != "" {
			d.detail("  %s", l)
		}
	}
	d.say("policy registryMirrors: %s from mirror %s only (airGapped: true); in force %.1fs after the ConfigMap changed",
		mcr, mirror.Host, time.Since(t).Seconds())

	var warned []string
	for _, p := range []*corev1.Pod{mirrorPod("aspnet", image), mirrorPod("nanoserver", absentImage)} {
		if err := d.c.Create(ctx, p); err != nil {
			d.warnings.Take()
			return fmt.Errorf("creating pod %s: %w", p.Name, err)
		}
		w := d.warnings.Take()
		warned = append(warned, w...)
		for _, x := range w {
			d.detail("  %s: %s", p.Name, x)
		}
	}
	var aspnet, nano corev1.Pod
	for name, p := range map[string]*corev1.Pod{"aspnet": &aspnet, "nanoserver": &nano} {
		if err := d.c.Get(ctx, client.ObjectKey{Namespace: shopNamespace, Name: name}, p); err != nil {
			return err
		}
	}
	a := aspnet.Annotations
	rc := ""
	if aspnet.Spec.RuntimeClassName != nil {
		rc = *aspnet.Spec.RuntimeClassName
	}
	if a[policy.AnnotationBuild] != build2025 || a[policy.AnnotationBuildSource] != policy.SourceImageManifest || rc != "windows-2025" {
		return fmt.Errorf("pod aspnet: build %q from %q, RuntimeClass %q; want %s from %s, windows-2025 (the mirror's copy runs on 2022 and 2025, the cluster has 2019 and 2025)",
			a[policy.AnnotationBuild], a[policy.AnnotationBuildSource], rc, build2025, policy.SourceImageManifest)
	}
	if !strings.Contains(a[policy.AnnotationChanges], record) || !slices.ContainsFunc(warned, func(w string) bool { return strings.Contains(w, record) }) {
		return fmt.Errorf("pod aspnet: neither its record nor its warnings say %q (record %s, warnings %q)", record, a[policy.AnnotationChanges], warned)
	}
	d.say("aspnet (%s, a tag naming no build): Windows %s from %s, RuntimeClass %s;", image, a[policy.AnnotationBuild], a[policy.AnnotationBuildSource], rc)
	d.say("  its record and warning: %q", record)
	// Not on the mirror: the answer names every source tried, the mirror alone; MCR, which this
	// machine cannot reach, would have made it "registry unreachable".
	// A mirror is named by its place in the registry's entry, never its host (the operator's network).
	tried := "(mirror #1 of " + mcr + ": no such image"
	i := slices.IndexFunc(warned, func(w string) bool { return strings.Contains(w, absentImage) && strings.Contains(w, tried) })
	if i < 0 || strings.Count(warned[i], mcr+": ") > 1 || strings.Contains(warned[i], mirror.Host) {
		return fmt.Errorf("pod nanoserver: no warning names the mirror alone as the source tried for %s (warnings %q)", absentImage, warned)
	}
	n := nano.Annotations
	d.say("nanoserver (%s, not on the mirror): %s", absentImage, strings.TrimSuffix(tried[1:], ": no such image")+" said no such image; MCR not asked;")
	d.say("  Windows %s from its tag (%s)", n[policy.AnnotationBuild], n[policy.AnnotationBuildSource])

	for _, p := range []*corev1.Pod{&aspnet, &nano} {
		if err := d.c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			return fmt.Errorf("deleting pod %s: %w", p.Name, err)
		}
	}
	if err := d.applyPolicy(ctx, demoPolicy); err != nil {
		return err
	}
	lastGood := client.ObjectKey{Namespace: wincompatNamespace, Name: policyConfigMap + server.LastGoodSuffix}
	if err := d.poll(ctx, 20*time.Second, func() (bool, error) {
		var cm corev1.ConfigMap
		if err := d.c.Get(ctx, lastGood, &cm); err != nil {
			return false, err
		}
		return cm.Data[webhook.PolicyKey] == demoPolicy, nil
	}); err != nil {
		return fmt.Errorf("wincompat did not reload the demo's policy without mirrors: %w", err)
	}
	d.detail("policy without registryMirrors again, in force")
	return nil
}

// applyPolicy updates the policy ConfigMap, which the policy check validates, and writes the file
// wincompat reads, as the kubelet would update the mounted ConfigMap.
func (d *demo) applyPolicy(ctx context.Context, content string) error {
	var cm corev1.ConfigMap
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: wincompatNamespace, Name: policyConfigMap}, &cm); err != nil {
		return err
	}
	cm.Data = map[string]string{webhook.PolicyKey: content}
	if err := d.c.Update(ctx, &cm); err != nil {
		return fmt.Errorf("updating ConfigMap %s: %w", policyConfigMap, err)
	}
	d.warnings.Take()
	return os.WriteFile(d.policyFile, []byte(content), 0o600)
}

// mirrorPod is a bare Windows pod of one container in the opted-in namespace of the second part.
func mirrorPod(name, image string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: shopNamespace},
		Spec:       corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: name, Image: image}}},
	}
}
