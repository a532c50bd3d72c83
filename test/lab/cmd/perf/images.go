package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
)

// imageLookupTimeout is the image server's per-review deadline, the shipped default, passed explicitly
// so that the slow phase knows what to expect.
const imageLookupTimeout = time.Second

// slowRegistryDelay is added to every manifest request in the slow phases: past the deadline, so that
// in lookup mode every review is answered at it and its pod gated, and gate mode reads no registry.
const slowRegistryDelay = 2 * time.Second

// The image phases, each selectable with -image-phases.
const (
	phaseHit      = "hit"
	phaseMiss     = "miss"
	phaseSlow     = "slow"      // the registry slow, --image-resolver-mode=lookup (the default)
	phaseSlowGate = "slow-gate" // the same registry, --image-resolver-mode=gate
)

var imagePhases = []string{phaseHit, phaseMiss, phaseSlow, phaseSlowGate}

// wantBuild is the one build both images of the pods were made for: with no node in the cluster,
// wincompat pins what the images were made for, from their manifests.
const wantBuild = "10.0.20348"

// runImages measures reviews of the chart pod whose two images wincompat reads from a registry: a
// registry from go-containerregistry on loopback in this process, holding an OCI index and a Docker
// manifest list whose tags name no build, and a second `wincompat serve` with image resolution on, in
// lookup mode. Its phases: every image cached (hit; at the maximum and at e.loadFraction of it), every
// image new (miss; at e.imageMissRate), every image new on a registry slower than the deadline (slow:
// the pods gated), and the same on a third `wincompat serve` in gate mode, which reads only its cache
// (slow-gate: every pod gated, no registry request). -image-phases selects among them.
func (e *env) runImages(ctx context.Context) (_ *perf.ImageResults, err error) {
	reg := registrytest.Start()
	defer reg.Close()
	web, err := reg.PushIndex("perf/web", "1.4.2", types.OCIImageIndex,
		registrytest.Linux("amd64"), registrytest.Windows("10.0.17763.5830"), registrytest.Windows("10.0.20348.2227"))
	if err != nil {
		return nil, err
	}
	agent, err := reg.PushIndex("perf/agent", "2.0", types.DockerManifestList, registrytest.Windows("10.0.20348.2340"))
	if err != nil {
		return nil, err
	}

	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	server, meter, err := e.launch(ctx, "wincompat-images", port, imageServerFlags(webhook.ImageModeLookup)...)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, server.Stop(10*time.Second)) }()
	t := target{port, meter}
	client, err := perf.NewReviewClient(port, webhook.PodPath, e.caPEM, e.connections)
	if err != nil {
		return nil, err
	}
	defer client.Close()

	res := &perf.ImageResults{GOMAXPROCS: 1, Connections: e.connections, PhaseSeconds: e.duration.Seconds(),
		LookupTimeoutMs: ms(imageLookupTimeout), SlowRegistryDelayMs: ms(slowRegistryDelay)}
	add := func(r *perf.Review, load string, p perf.Phase) {
		res.Phases = append(res.Phases, perf.ImagePhase{Scenario: r.Name, Description: r.Description, BodyBytes: r.BodyBytes(), Load: load, Phase: p})
	}

	if e.imagePhase(phaseHit) {
		if err := e.imageHit(ctx, t, client, web, agent, add); err != nil {
			return nil, err
		}
	}
	if e.imagePhase(phaseMiss) {
		if err := e.imageMiss(ctx, t, client, reg, web, agent, add); err != nil {
			return nil, err
		}
	}
	// Half the connections busy waiting for the deadline: the open loop's latency stays the server's.
	slowRate := float64(e.connections) / 2 / imageLookupTimeout.Seconds()
	if e.imagePhase(phaseSlowGate) {
		// Before the lookup mode's slow phase, whose lookups go on in the background after it.
		if err := e.imageSlowGate(ctx, reg, web, agent, slowRate, add); err != nil {
			return nil, err
		}
	}
	if e.imagePhase(phaseSlow) {
		if err := e.imageSlow(ctx, t, client, reg, web, agent, slowRate, add); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// imageServerFlags are the flags of an image server in mode (--image-resolver-mode).
func imageServerFlags(mode string) []string {
	return []string{"--resolve-images=true", "--image-lookup-timeout=" + imageLookupTimeout.String(), "--image-resolver-mode=" + mode,
		"--image-allow-private-networks"} // the registry is on loopback
}

// imagePhase says whether -image-phases selects phase.
func (e *env) imagePhase(phase string) bool { return e.imagePhaseSet[phase] }

type addImagePhase func(r *perf.Review, load string, p perf.Phase)

// imageHit: every image cached, at the maximum and at e.loadFraction of it.
func (e *env) imageHit(ctx context.Context, t target, client *perf.ReviewClient, web, agent string, add addImagePhase) error {
	hitPod := perf.WindowsChartPod(namespace, web, agent)
	hit, err := perf.NewReview("image-hit",
		"the chart pod with two images whose tags name no build (an OCI index with 2019, 2022 and Linux entries, a Docker manifest list with a 2022 entry), both in wincompat's cache",
		hitPod, namespace, admissionv1.Create, perf.WithPatch, "mutated")
	if err != nil {
		return err
	}
	// The first answer reads both images from the registry and fills the cache.
	if err := e.pinsFromManifests(ctx, client, hit, hitPod); err != nil {
		return err
	}
	s, err := e.maxAndFixed(ctx, t, hit)
	if err != nil {
		return err
	}
	e.checkLookups(hit, "max", s.Max, "hit")
	e.checkLookups(hit, "fixed", s.Fixed, "hit")
	add(hit, "max", s.Max)
	add(hit, fmt.Sprintf("%.0f/s", s.Fixed.TargetRate), s.Fixed)
	return nil
}

// imageMiss: every image new, at e.imageMissRate.
func (e *env) imageMiss(ctx context.Context, t target, client *perf.ReviewClient, reg *registrytest.Registry, web, agent string, add addImagePhase) error {
	// Each review of a miss names two tags no review named before, pushed as new tags of the same
	// manifests: a manifest GET (and the registry's ping) per image, as the first pod of a new release.
	missRate := e.imageMissRate
	miss, missPods, err := e.freshTags(reg, "image-miss",
		"the image-hit pod naming two tags no review named before (new tags of the same manifests): each image read from the registry within the review",
		web, agent, missRate)
	if err != nil {
		return err
	}
	// A one-shot review's first answer takes its first pod.
	if err := e.pinsFromManifests(ctx, client, miss, missPods[0]); err != nil {
		return err
	}
	p, err := e.atRate(ctx, t, client, miss, missRate)
	if err != nil {
		return err
	}
	e.checkLookups(miss, "fixed", p, "miss")
	printPhase(fmt.Sprintf("%s, %.0f/s", miss.Name, missRate), p)
	add(miss, fmt.Sprintf("%.0f/s", missRate), p)
	return nil
}

// imageSlow: every image new on a registry slowRegistryDelay late, in lookup mode: each review waits
// the deadline, then its pod is gated for the leader (reason timeout).
func (e *env) imageSlow(ctx context.Context, t target, client *perf.ReviewClient, reg *registrytest.Registry, web, agent string, rate float64, add addImagePhase) error {
	slow, _, err := e.freshTags(reg, "image-slow",
		fmt.Sprintf("the image-miss pod on a registry %v late, %v past the lookup deadline (--image-resolver-mode=lookup): answered at the deadline, the pod gated, the lookups going on in the background", slowRegistryDelay, slowRegistryDelay-imageLookupTimeout),
		web, agent, rate)
	if err != nil {
		return err
	}
	reg.SetDelay(slowRegistryDelay)
	p, err := e.atRate(ctx, t, client, slow, rate)
	reg.SetDelay(0)
	if err != nil {
		return err
	}
	e.checkLookups(slow, "fixed", p, "timeout")
	e.checkGated(slow, "fixed", p, "timeout")
	printPhase(fmt.Sprintf("%s, %.0f/s", slow.Name, rate), p)
	add(slow, fmt.Sprintf("%.0f/s", rate), p)
	return nil
}

// imageSlowGate: the image-slow reviews answered by a `wincompat serve` in gate mode, which reads only
// its resolver's cache: every pod gated (reason not-cached), and the registry never asked.
func (e *env) imageSlowGate(ctx context.Context, reg *registrytest.Registry, web, agent string, rate float64, add addImagePhase) (err error) {
	port, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	server, meter, err := e.launch(ctx, "wincompat-images-gate", port, imageServerFlags(webhook.ImageModeGate)...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, server.Stop(10*time.Second)) }()
	client, err := perf.NewReviewClient(port, webhook.PodPath, e.caPEM, e.connections)
	if err != nil {
		return err
	}
	defer client.Close()
	r, _, err := e.freshTags(reg, "image-slow-gate",
		fmt.Sprintf("the image-slow pod on the same registry, %v late, answered by a wincompat serve with --image-resolver-mode=gate: from its cache alone, the pod gated, no registry request", slowRegistryDelay),
		web, agent, rate)
	if err != nil {
		return err
	}
	reg.SetDelay(slowRegistryDelay)
	requests := reg.Requests.Load()
	p, err := e.atRate(ctx, target{port, meter}, client, r, rate)
	requests = reg.Requests.Load() - requests
	reg.SetDelay(0)
	if err != nil {
		return err
	}
	if requests != 0 || len(p.Wincompat.ImageLookups) != 0 {
		e.failures = append(e.failures, fmt.Sprintf("%s: gate mode asked the registry for %d manifests (wincompat counted image lookups %v), want none",
			r.Name, requests, p.Wincompat.ImageLookups))
	}
	e.checkGated(r, "fixed", p, "not-cached")
	printPhase(fmt.Sprintf("%s, %.0f/s", r.Name, rate), p)
	add(r, fmt.Sprintf("%.0f/s", rate), p)
	return nil
}

// checkGated checks that every review answered in p had its pod gated, for reason, and none for another.
func (e *env) checkGated(r *perf.Review, phase string, p perf.Phase, reason string) {
	got := p.Wincompat.Gated
	if got[reason] != float64(p.OK) || len(got) > 1 || p.OK == 0 {
		e.failures = append(e.failures, fmt.Sprintf("%s (%s): %d reviews answered, wincompat counted pods gated %v, not %d %q",
			r.Name, phase, p.OK, got, p.OK, reason))
	}
}

// freshTags is a one-shot review of chart pods, each naming new tags of web and agent, enough for a
// warm-up and a measured phase at rate; and the pods, in the order it sends them.
func (e *env) freshTags(reg *registrytest.Registry, name, description, web, agent string, rate float64) (*perf.Review, [][]byte, error) {
	n := int(math.Ceil(rate*(e.warmup+e.duration+e.grace()).Seconds())) + 16
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("%s-%d", name, i)
	}
	webs, err := reg.Tag(web, tags...)
	if err != nil {
		return nil, nil, err
	}
	agents, err := reg.Tag(agent, tags...)
	if err != nil {
		return nil, nil, err
	}
	pods := make([][]byte, n)
	for i := range pods {
		pods[i] = perf.WindowsChartPod(namespace, webs[i], agents[i])
	}
	r, err := perf.NewOneShotReview(name, description, pods, namespace, perf.WithPatch, "mutated")
	return r, pods, err
}

// pinsFromManifests answers one review of r and checks that wincompat pinned the build the images'
// manifests give: the load measures image resolution, not a fallback.
func (e *env) pinsFromManifests(ctx context.Context, client *perf.ReviewClient, r *perf.Review, pod []byte) error {
	resp, err := client.Answer(ctx, r)
	if err != nil {
		return fmt.Errorf("%s: %w", r.Name, err)
	}
	if !resp.Allowed || len(resp.Patch) == 0 {
		return fmt.Errorf("%s: wincompat answered allowed=%v with a %d-byte patch", r.Name, resp.Allowed, len(resp.Patch))
	}
	patched, err := perf.ApplyPatch(pod, resp.Patch)
	if err != nil {
		return fmt.Errorf("%s: applying wincompat's patch: %w", r.Name, err)
	}
	var stamped struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			NodeSelector map[string]string `json:"nodeSelector"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(patched, &stamped); err != nil {
		return err
	}
	a, pinned := stamped.Metadata.Annotations, stamped.Spec.NodeSelector["node.kubernetes.io/windows-build"]
	if pinned != wantBuild || a[policy.AnnotationBuild] != wantBuild || a[policy.AnnotationBuildSource] != policy.SourceImageManifest {
		return fmt.Errorf("%s: wincompat pinned build %q and recorded %q from %q, not %s from %s: is image resolution on, and the registry reachable? (warnings: %v)",
			r.Name, pinned, a[policy.AnnotationBuild], a[policy.AnnotationBuildSource], wantBuild, policy.SourceImageManifest, resp.Warnings)
	}
	return nil
}

// checkLookups checks that every image of every review answered in p had the lookup result want, and
// that no image had another: two images per review.
func (e *env) checkLookups(r *perf.Review, phase string, p perf.Phase, want string) {
	got := p.Wincompat.ImageLookups
	others := 0.0
	for result, n := range got {
		if result != want {
			others += n
		}
	}
	if got[want] != float64(2*p.OK) || others != 0 {
		e.failures = append(e.failures, fmt.Sprintf("%s (%s): %d reviews answered, wincompat counted image lookups %v, not %d %q",
			r.Name, phase, p.OK, got, 2*p.OK, want))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
