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

// slowRegistryDelay is added to every manifest request in the slow phase: past the deadline, so that
// every review is answered at it, with the fallback.
const slowRegistryDelay = imageLookupTimeout + 500*time.Millisecond

// wantBuild is the one build both images of the pods were made for: with no node in the cluster,
// wincompat pins what the images were made for, from their manifests.
const wantBuild = "10.0.20348"

// runImages measures reviews of the chart pod whose two images wincompat reads from a registry: a
// registry from go-containerregistry on loopback in this process, holding an OCI index and a Docker
// manifest list whose tags name no build, and a second `wincompat serve` with image resolution on. Its
// phases: every image cached (hit; at the maximum and at e.loadFraction of it), every image new
// (miss; at e.imageMissRate), and every image new on a registry slower than the deadline (slow).
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
	server, meter, err := e.launch(ctx, "wincompat-images", port, "--resolve-images=true", "--image-lookup-timeout="+imageLookupTimeout.String(),
		"--image-allow-private-networks") // the registry is on loopback
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

	hitPod := perf.WindowsChartPod(namespace, web, agent)
	hit, err := perf.NewReview("image-hit",
		"the chart pod with two images whose tags name no build (an OCI index with 2019, 2022 and Linux entries, a Docker manifest list with a 2022 entry), both in wincompat's cache",
		hitPod, namespace, admissionv1.Create, perf.WithPatch, "mutated")
	if err != nil {
		return nil, err
	}
	// The first answer reads both images from the registry and fills the cache.
	if err := e.pinsFromManifests(ctx, client, hit, hitPod); err != nil {
		return nil, err
	}
	s, err := e.maxAndFixed(ctx, t, hit)
	if err != nil {
		return nil, err
	}
	e.checkLookups(hit, "max", s.Max, "hit")
	e.checkLookups(hit, "fixed", s.Fixed, "hit")
	add(hit, "max", s.Max)
	add(hit, fmt.Sprintf("%.0f/s", s.Fixed.TargetRate), s.Fixed)

	// Each review of a miss names two tags no review named before, pushed as new tags of the same
	// manifests: a manifest GET (and the registry's ping) per image, as the first pod of a new release.
	missRate := e.imageMissRate
	miss, missPods, err := e.freshTags(reg, "image-miss",
		"the image-hit pod naming two tags no review named before (new tags of the same manifests): each image read from the registry within the review",
		web, agent, missRate)
	if err != nil {
		return nil, err
	}
	// A one-shot review's first answer takes its first pod.
	if err := e.pinsFromManifests(ctx, client, miss, missPods[0]); err != nil {
		return nil, err
	}
	p, err := e.atRate(ctx, t, client, miss, missRate)
	if err != nil {
		return nil, err
	}
	e.checkLookups(miss, "fixed", p, "miss")
	printPhase(fmt.Sprintf("%s, %.0f/s", miss.Name, missRate), p)
	add(miss, fmt.Sprintf("%.0f/s", missRate), p)

	// Half the connections busy waiting for the deadline: the open loop's latency stays the server's.
	slowRate := float64(e.connections) / 2 / imageLookupTimeout.Seconds()
	slow, _, err := e.freshTags(reg, "image-slow",
		fmt.Sprintf("the image-miss pod on a registry that takes %v longer than the %v lookup deadline: answered at the deadline with the other build sources, the lookups going on in the background", slowRegistryDelay-imageLookupTimeout, imageLookupTimeout),
		web, agent, slowRate)
	if err != nil {
		return nil, err
	}
	reg.SetDelay(slowRegistryDelay)
	p, err = e.atRate(ctx, t, client, slow, slowRate)
	reg.SetDelay(0)
	if err != nil {
		return nil, err
	}
	e.checkLookups(slow, "fixed", p, "timeout")
	printPhase(fmt.Sprintf("%s, %.0f/s", slow.Name, slowRate), p)
	add(slow, fmt.Sprintf("%.0f/s", slowRate), p)
	return res, nil
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
