package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/audit"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
)

// The second part: builds from the image itself.
const (
	shopNamespace = "shop"
	leavingNode   = "win2022-0"
)

// The node that replaces leavingNode.
var node2025 = nodeSpec{"win2025-0", "windows", build2025}

// shopImage is an image the demo pushes: a tag that names no build, and its platforms.
type shopImage struct {
	repo, tag string
	mediaType types.MediaType
	platforms []registrytest.Platform
	ref       string // once pushed
}

var (
	imgAPI = &shopImage{repo: "shop/api", tag: "1.4.2", mediaType: types.OCIImageIndex,
		platforms: []registrytest.Platform{registrytest.Windows("10.0.20348.2227"), registrytest.Linux("amd64")}}
	imgLegacy = &shopImage{repo: "shop/legacy", tag: "3.0", mediaType: types.DockerManifestList,
		platforms: []registrytest.Platform{registrytest.Windows("10.0.17763.5830")}}
	imgWeb = &shopImage{repo: "shop/web", tag: "2.0", mediaType: types.OCIImageIndex,
		platforms: []registrytest.Platform{registrytest.Windows("10.0.17763.5830"), registrytest.Windows("10.0.20348.2227")}}
	imgExporter = &shopImage{repo: "prom/node-exporter", tag: "v1.8.2", mediaType: types.OCIImageIndex,
		platforms: []registrytest.Platform{registrytest.Linux("amd64"), registrytest.Linux("arm64")}}
	// The probe has an entry for each catalog build: wincompat allows it on exactly the ready builds it
	// knows, which tells when it has seen the node change.
	imgProbe = &shopImage{repo: "demo/probe", tag: "1", mediaType: types.OCIImageIndex,
		platforms: []registrytest.Platform{registrytest.Windows("10.0.17763.5830"), registrytest.Windows("10.0.20348.2227"), registrytest.Windows("10.0.26100.1742")}}
)

// shopPod is a pod of the second part and what wincompat should decide for it.
type shopPod struct {
	name       string
	containers []shopContainer
	builds     []string   // the builds it may run on (none: nil)
	class      string     // its RuntimeClass ("" for none)
	warnsOf    *shopImage // an image an admission warning must name as having no Windows entry
	expected   string     // what the demo shows with it
	// ownBuilds is the pod's own required node affinity on the build label (nil: none); wincompat keeps
	// it as the pod's choice (build source affinity) and warns where a build cannot run the images.
	ownBuilds []string
}

type shopContainer struct {
	name string
	img  *shopImage
}

var shopPods = []*shopPod{
	{name: "api", containers: []shopContainer{{"api", imgAPI}}, builds: []string{build2025}, class: "windows-2025",
		expected: "a 2022-only image on the 2025 node: 2025 runs 2022 images, and no 2022 node is left"},
	{name: "web", containers: []shopContainer{{"web", imgWeb}}, builds: []string{build2019, build2025},
		expected: "2019 and 2022 entries: allowed on every ready build that runs one of them"},
	{name: "legacy", containers: []shopContainer{{"legacy", imgLegacy}}, builds: []string{build2019}, class: "windows-2019",
		expected: "a 2019-only Docker manifest list on the 2019 node"},
	{name: "api-with-exporter", containers: []shopContainer{{"api", imgAPI}, {"node-exporter", imgExporter}}, warnsOf: imgExporter,
		expected: "a Linux-only sidecar: warned about, no build pinned"},
	{name: "api-on-2019", containers: []shopContainer{{"api", imgAPI}}, builds: []string{build2019}, class: "windows-2019", ownBuilds: []string{build2019},
		expected: "its own affinity allows only 2019 and its image is 2022-only: kept (its RuntimeClass selects the same build), warned about"},
}

// fromImages is the second part: a registry on loopback with Windows images whose tags say nothing of
// their build, a cluster of Windows Server 2019 and 2025 nodes, and what wincompat reads from the
// registry for pods using them.
func (d *demo) fromImages(ctx context.Context) error {
	d.section("Builds from the image itself: a registry on loopback whose tags name no Windows build; %s leaves, %s (%s) joins",
		leavingNode, node2025.name, node2025.build)
	d.registry = registrytest.Start()
	d.detail("registry %s in this process (go-containerregistry's in-memory registry; plain HTTP, which", d.registry.Host)
	d.detail("wincompat allows for loopback registries only)")
	var pushed []string
	for _, img := range []*shopImage{imgAPI, imgLegacy, imgWeb, imgExporter, imgProbe} {
		var err error
		if img.ref, err = d.registry.PushIndex(img.repo, img.tag, img.mediaType, img.platforms...); err != nil {
			return err
		}
		kind := "OCI index"
		if img.mediaType == types.DockerManifestList {
			kind = "Docker manifest list"
		}
		d.detail("pushed %-28s %s: %s", img.repo+":"+img.tag, kind, describePlatforms(img.platforms))
		if img != imgProbe {
			pushed = append(pushed, img.repo+":"+img.tag+" ("+briefPlatforms(img.platforms)+")")
		}
	}
	d.brief("pushed %s,", strings.Join(pushed[:2], ", "))
	d.brief("       %s", strings.Join(pushed[2:], ", "))

	d.step("the cluster moves to Windows Server 2025: %s leaves, %s (Windows %s) joins", leavingNode, node2025.name, node2025.build)
	if err := d.c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: leavingNode}}); err != nil {
		return fmt.Errorf("deleting node %s: %w", leavingNode, err)
	}
	delete(d.nodes, leavingNode)
	d.detail("deleted node %s (Windows %s)", leavingNode, build2022)
	d.detail("added node:")
	if err := d.addNode(ctx, node2025); err != nil {
		return err
	}
	var windows []string
	for _, n := range slices.Sorted(maps.Keys(d.nodes)) {
		if d.nodes[n].os == "windows" {
			windows = append(windows, n+" "+d.nodes[n].build)
		}
	}
	d.detail("Windows nodes now: %s", strings.Join(windows, ", "))

	if err := d.setUpShop(ctx); err != nil {
		return err
	}

	d.step("creating pods in namespace %s from those images (bare pods, spec.os.name=windows)", shopNamespace)
	created, requests := time.Now(), d.registry.Requests.Load()
	var reports []podReport
	for _, sp := range shopPods {
		pod := sp.pod()
		if err := d.c.Create(ctx, pod); err != nil {
			d.warnings.Take()
			return fmt.Errorf("creating pod %s: %w", sp.name, err)
		}
		warns := d.warnings.Take()
		reports = append(reports, podReport{namespace: shopNamespace, name: pod.Name, warnings: warns})
		d.detail("created pod %-18s %s; the API server returned %s", sp.name, sp.imageList(), plural(len(warns), "warning"))
	}
	requests = d.registry.Requests.Load() - requests
	if err := d.waitBound(ctx, reports, created); err != nil {
		return err
	}

	d.step("what wincompat read from the registry, per pod (cluster: Windows %s and %s)", build2019, build2025)
	var wrong []string
	for i, sp := range shopPods {
		r := reports[i]
		if d.verbose {
			d.printGroup(&podGroup{reports: []podReport{r}, nodes: []string{r.pod.Spec.NodeName}}, sp.expected, func(row func(key, format string, args ...any)) {
				for j, c := range sp.containers {
					key := ""
					if j == 0 {
						key = "images"
					}
					row(key, "%s: %s (%s)", c.name, c.img.ref, describePlatforms(c.img.platforms))
				}
				row("pinned", "%s", buildPin(&r.pod))
			})
		}
		wrong = append(wrong, sp.check(&r, d.nodes)...)
	}
	if len(wrong) > 0 {
		return fmt.Errorf("wincompat misbehaved with images from the registry: %s", strings.Join(wrong, "; "))
	}
	d.brief("pods in namespace %s (labelled %s=true), each decided from what the registry says of its images:", shopNamespace, policy.LabelEnabled)
	d.table(reports)
	// What the warnings say (check has found them among each pod's), in a few words.
	for _, sp := range shopPods {
		switch {
		case sp.warnsOf != nil:
			d.brief("%s: warned that %s:%s has no Windows entry, so no build is pinned", sp.name, sp.warnsOf.repo, sp.warnsOf.tag)
		case sp.ownBuilds != nil:
			d.brief("%s: its own affinity allows only %s, which cannot run its 2022-only image: kept, and warned",
				sp.name, strings.Join(sp.ownBuilds, ", "))
		}
	}
	distinct := map[string]bool{}
	for _, sp := range shopPods {
		for _, c := range sp.containers {
			distinct[c.img.ref] = true
		}
	}
	line := fmt.Sprintf("admitting these pods took the registry %s for their %s", plural(int(requests), "manifest request"), plural(len(distinct), "image"))
	if int(requests) == len(distinct) {
		line += fmt.Sprintf(": one each (%s, in two pods, was read once)", imgAPI.repo)
	}
	d.say("%s", line)
	d.detail("all %d pods decided from what the registry says of their images; their tags name no build.", len(reports))
	if err := d.auditLinuxOnly(ctx); err != nil {
		return err
	}
	return d.offline(ctx)
}

// briefPlatforms names an image's platforms in a few words: "Windows 10.0.20348, Linux".
func briefPlatforms(ps []registrytest.Platform) string {
	var s []string
	for _, p := range ps {
		x := "Linux"
		if p.OS == "windows" {
			v := strings.Split(p.OSVersion, ".")
			x = "Windows " + strings.Join(v[:min(len(v), 3)], ".")
		}
		if !slices.Contains(s, x) {
			s = append(s, x)
		}
	}
	return strings.Join(s, ", ")
}

// setUpShop creates the opted-in namespace of the second part, waits for its default ServiceAccount, and returns
// once wincompat mutates pods there and sees the new nodes: a dry-run pod of the probe image, which has
// an entry for every catalog build, is allowed on exactly the ready builds 2019 and 2025.
func (d *demo) setUpShop(ctx context.Context) error {
	d.step("namespace %s, labelled %s=true", shopNamespace, policy.LabelEnabled)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shopNamespace, Labels: map[string]string{policy.LabelEnabled: "true"}}}
	if err := d.c.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating namespace %s: %w", shopNamespace, err)
	}
	if err := d.waitForDefaultServiceAccount(ctx, shopNamespace); err != nil {
		return err
	}
	probe := &shopPod{name: "probe", containers: []shopContainer{{"probe", imgProbe}}}
	want := build2019 + "," + build2025
	var last string
	err := d.poll(ctx, 30*time.Second, func() (bool, error) {
		p := probe.pod()
		if err := d.c.Create(ctx, p, client.DryRunAll); err != nil {
			last = err.Error()
			return false, nil
		}
		a := p.Annotations
		last = fmt.Sprintf("build %q from %q", a[policy.AnnotationBuild], a[policy.AnnotationBuildSource])
		return a[policy.AnnotationBuild] == want && a[policy.AnnotationBuildSource] == policy.SourceImageManifest, nil
	})
	d.warnings.Take()
	if err != nil {
		return fmt.Errorf("wincompat did not come to allow a dry-run pod of %s (entries for 2019, 2022 and 2025) on builds %s (last: %s): %w", imgProbe.ref, want, last, err)
	}
	d.detail("wincompat reads the registry and sees the ready builds: a dry-run pod of %s:%s", imgProbe.repo, imgProbe.tag)
	d.detail("(entries for 2019, 2022 and 2025) gets builds %s, from %s", want, policy.SourceImageManifest)
	return nil
}

// pod is the Pod to create.
func (sp *shopPod) pod() *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: sp.name, Namespace: shopNamespace},
		Spec:       corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}},
	}
	if sp.ownBuilds != nil {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: sp.ownBuilds}}}}}}}
	}
	for _, c := range sp.containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c.name, Image: c.img.ref})
	}
	return p
}

func (sp *shopPod) imageList() string {
	var s []string
	for _, c := range sp.containers {
		s = append(s, c.img.repo+":"+c.img.tag)
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// check compares what wincompat did with what the images allow, and says precisely what differs.
func (sp *shopPod) check(r *podReport, nodes map[string]nodeSpec) []string {
	var wrong []string
	p := &r.pod
	a := p.Annotations
	build, source := a[policy.AnnotationBuild], a[policy.AnnotationBuildSource]
	want := strings.Join(sp.builds, ",")
	if build != want {
		wrong = append(wrong, fmt.Sprintf("pod %s: %s is %q, want %q", sp.name, policy.AnnotationBuild, build, want))
	}
	wantSource := policy.SourceImageManifest
	if sp.ownBuilds != nil {
		wantSource = policy.SourceAffinity
		// Its RuntimeClass brings a nodeSelector of its own build, which must be one the affinity allows.
		if b, pinned := p.Spec.NodeSelector[corev1.LabelWindowsBuild]; pinned && !slices.Contains(sp.ownBuilds, b) {
			wrong = append(wrong, fmt.Sprintf("pod %s: nodeSelector build %s contradicts its own affinity %v", sp.name, b, sp.ownBuilds))
		}
		if !slices.ContainsFunc(r.warnings, func(w string) bool { return strings.Contains(w, "its required node affinity allows it") }) {
			wrong = append(wrong, fmt.Sprintf("pod %s: no admission warning that its own build cannot run its image (warnings: %q)", sp.name, r.warnings))
		}
	}
	if want != "" && source != wantSource {
		wrong = append(wrong, fmt.Sprintf("pod %s: %s is %q, want %q", sp.name, policy.AnnotationBuildSource, source, wantSource))
	}
	rc := ""
	if p.Spec.RuntimeClassName != nil {
		rc = *p.Spec.RuntimeClassName
	}
	if rc != sp.class {
		wrong = append(wrong, fmt.Sprintf("pod %s: RuntimeClass %q, want %q", sp.name, rc, sp.class))
	}
	if len(sp.builds) > 1 && !slices.Equal(affinityBuilds(p), sp.builds) {
		wrong = append(wrong, fmt.Sprintf("pod %s: required node affinity %s In %v, want In %v", sp.name, corev1.LabelWindowsBuild, affinityBuilds(p), sp.builds))
	}
	if len(sp.builds) > 0 && sp.ownBuilds == nil && !slices.Contains(sp.builds, nodes[p.Spec.NodeName].build) {
		wrong = append(wrong, fmt.Sprintf("pod %s: bound to %s (Windows %s), whose build cannot run its image", sp.name, p.Spec.NodeName, nodes[p.Spec.NodeName].build))
	}
	if sp.warnsOf != nil && !slices.ContainsFunc(r.warnings, func(w string) bool {
		return strings.Contains(w, sp.warnsOf.ref) && strings.Contains(w, "no Windows entry")
	}) {
		wrong = append(wrong, fmt.Sprintf("pod %s: no admission warning says %s has no Windows entry (warnings: %q)", sp.name, sp.warnsOf.ref, r.warnings))
	}
	return wrong
}

// buildPin says how the pod is held to its builds: nodeSelector, required node affinity, or not at all.
func buildPin(p *corev1.Pod) string {
	if b, ok := p.Spec.NodeSelector[corev1.LabelWindowsBuild]; ok {
		return "nodeSelector " + corev1.LabelWindowsBuild + "=" + b
	}
	if bs := affinityBuilds(p); len(bs) > 0 {
		return "required node affinity " + corev1.LabelWindowsBuild + " In [" + strings.Join(bs, ", ") + "]"
	}
	return "no Windows build (only kubernetes.io/os=windows)"
}

// affinityBuilds are the values of the first required node affinity expression on the build label.
func affinityBuilds(p *corev1.Pod) []string {
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	for _, t := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range t.MatchExpressions {
			if e.Key == corev1.LabelWindowsBuild && e.Operator == corev1.NodeSelectorOpIn {
				return e.Values
			}
		}
	}
	return nil
}

// table prints one line per pod: build, source, RuntimeClass, node.
func (d *demo) table(reports []podReport) {
	if d.verbose {
		fmt.Fprintln(d.out)
	}
	format := "    %-18s %-22s %-15s %-13s %s\n"
	fmt.Fprintf(d.out, format, "POD", "BUILD", "SOURCE", "RUNTIMECLASS", "NODE")
	for _, r := range reports {
		a := r.pod.Annotations
		build, source, rc := a[policy.AnnotationBuild], a[policy.AnnotationBuildSource], "-"
		if build == "" {
			build, source = "-", "-"
		}
		if r.pod.Spec.RuntimeClassName != nil {
			rc = *r.pod.Spec.RuntimeClassName
		}
		node := r.pod.Spec.NodeName
		fmt.Fprintf(d.out, format, r.name, build, source, rc, node+" ("+d.nodes[node].build+")")
	}
	if d.verbose {
		fmt.Fprintln(d.out)
	}
}

// offline runs `wincompat mutate` on the first pod without and with --resolve-images, against the same
// registry, and prints one line each. An empty DOCKER_CONFIG keeps the user's credentials out of it.
func (d *demo) offline(ctx context.Context) error {
	sp := shopPods[0]
	d.step("the %s pod offline: %s mutate, without and with --resolve-images", sp.name, d.rel(d.wincompatBin))
	raw, err := yaml.Marshal(sp.pod())
	if err != nil {
		return err
	}
	file := filepath.Join(d.work, sp.name+".yaml")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return err
	}
	dockerConfig := filepath.Join(d.work, "docker")
	if err := os.MkdirAll(dockerConfig, 0o700); err != nil {
		return err
	}
	var said []string
	for _, resolve := range []bool{false, true} {
		args := []string{"mutate", "-f", file}
		if resolve {
			args = append(args, "--resolve-images", "--image-lookup-timeout", "5s")
		}
		out, _, err := d.mutate(ctx, append(os.Environ(), "DOCKER_CONFIG="+dockerConfig), args)
		if err != nil {
			return err
		}
		build, source := out.Annotations[policy.AnnotationBuild], out.Annotations[policy.AnnotationBuildSource]
		what := fmt.Sprintf("no build (the tag %s names none)", sp.containers[0].img.tag)
		if build != "" {
			what = fmt.Sprintf("build %s, from %s", strings.ReplaceAll(build, ",", " or "), source)
		}
		label := "mutate"
		if resolve {
			label += " --resolve-images"
		}
		d.detail("%-24s %s; pinned: %s", label, what, buildPin(&out))
		said = append(said, label+": "+what)
		if resolve && (build != build2022+","+build2025 || source != policy.SourceImageManifest) {
			return fmt.Errorf("wincompat mutate --resolve-images gave %s build %q from %q, want %q from the manifest", sp.name, build, source, build2022+","+build2025)
		}
		if !resolve && build != "" {
			return fmt.Errorf("wincompat mutate without --resolve-images gave %s build %q from %q, want none: its tag names no build", sp.name, build, source)
		}
	}
	d.brief("offline, pod %s: %s", sp.name, strings.Join(said, "; "))
	d.detail("offline there are no nodes, so every catalog build that can run the image; in the cluster above")
	d.detail("only %s of them was ready, hence that build and RuntimeClass windows-2025. wincompat serve", build2025)
	d.detail("--resolve-images=false has only the tag, like the first line: with two Windows builds ready it")
	d.detail("would pin none (and warn), and the pod could land on %s, which cannot run it", "win2019-0")
	return nil
}

// describePlatforms renders platforms as windows/amd64 10.0.20348.2227, linux/amd64.
func describePlatforms(ps []registrytest.Platform) string {
	var s []string
	for _, p := range ps {
		x := p.OS + "/" + p.Architecture
		if p.OSVersion != "" {
			x += " " + p.OSVersion
		}
		s = append(s, x)
	}
	return strings.Join(s, ", ")
}

// auditLinuxOnly shows that the audit finds the Linux-only sidecar without reading any registry itself:
// admission recorded what the registry said.
func (d *demo) auditLinuxOnly(ctx context.Context) error {
	d.step("wincompat audit (in process, no registry access) on %s", shopNamespace)
	rep, err := audit.Run(ctx, d.c, audit.Options{Namespaces: []string{shopNamespace}})
	if err != nil {
		return err
	}
	found := false
	for _, f := range rep.Findings {
		if f.Kind != audit.LinuxOnlyImage {
			continue
		}
		d.detail("%s  %s/%s: %s", f.Kind, f.Namespace, f.Object, f.Detail)
		if f.Object == "Pod/api-with-exporter" {
			found = true
			d.brief("wincompat audit, reading no registry, finds it from admission's record: %s %s/%s", f.Kind, f.Namespace, f.Object)
		}
	}
	if !found {
		return fmt.Errorf("the audit does not report the Linux-only sidecar of pod api-with-exporter from admission's record")
	}
	return nil
}

// mutate runs wincompat mutate with env and args and reads back the one object it printed, a pod; its
// warnings are on stderr.
func (d *demo) mutate(ctx context.Context, env, args []string) (corev1.Pod, string, error) {
	d.detail("%s %s", d.rel(d.wincompatBin), strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, d.wincompatBin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return corev1.Pod{}, "", fmt.Errorf("wincompat %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var out corev1.Pod
	if err := yaml.Unmarshal(stdout.Bytes(), &out); err != nil {
		return corev1.Pod{}, "", fmt.Errorf("wincompat %s printed no pod: %w", strings.Join(args, " "), err)
	}
	return out, stderr.String(), nil
}
