package placement

// Gated placement through the real kube-apiserver and kube-scheduler: a registry slower than the
// admission budget no longer turns into a fallback build on the wrong node. Every pod whose images have
// not answered is admitted behind wincompat's scheduling gate with no build, the leader reads the
// images, pins the build and removes the gate, and the scheduler binds each pod only to a node of a
// build that runs it (the oracle of placement_images_test.go). A registry that never answers costs the
// bound, not the pod: the gate goes with the fallback build.

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/scheduling/gated"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// gatedShape is the cluster: 2019 and 2025 nodes, where the held-back image (tagged ltsc2019,
// its index holding only a 2022 entry) runs on 2025 alone.
var gatedShape = imageShape{"{2019,2025}", []string{e2eutil.Build2019, e2eutil.Build2025}}

// gatedMix is the pods of one run: the held-back image first and twice (the second is admitted while
// the first's lookup is still on), then one pod of each of the registry's Windows images.
func gatedMix(im pushedImages, heldBack string) []e2eutil.MixPod {
	rnd := rand.New(rand.NewSource(44))
	images := []struct{ name, ref string }{
		{"held-back", heldBack}, {"held-back", heldBack},
		{"2019 index", im.ref["2019"]}, {"2022 manifest list", im.ref["2022"]}, {"2025 index", im.ref["2025"]},
		{"2019 and 2022 list", im.ref["2019+2022"]}, {"2022 single image", im.ref["2022 single"]},
	}
	out := make([]e2eutil.MixPod, 0, len(images))
	for i, img := range images {
		cat := &e2eutil.Category{Name: img.name}
		pod := chartPod(rnd, cat, fmt.Sprintf("g%02d", i))
		pod.Spec.Containers[0].Image = img.ref
		out = append(out, e2eutil.MixPod{Cat: cat, Pod: pod})
	}
	return out
}

// TestGatedPlacement: issue 44, on one control plane with kube-scheduler and one loopback registry.
//  1. The registry never answers within the bound (--gate-timeout 5s): every pod is admitted gated, then
//     ungated with a fallback build, a build-gate record entry and a WindowsBuildFallback Event.
//  2. The registry answers 5s late, well past the 1s admission budget (the second pod of an image joins
//     the first one's lookup, still pending on a loaded machine): every pod is admitted gated with no
//     build, then bound only to a node of a build that runs every image, its build from the registry.
//     A pod that keeps the gate without its label (outside an opted-in namespace) is found by the sweep
//     at the start of the term, and released.
//  3. The same with --image-resolver-mode=gate: admission reads the cache alone and makes no registry
//     request (a dry run of every pod moves neither the registry's request count nor the resolver's
//     lookup counter), and the placement is the same.
//
// Each run restarts wincompat, so that its resolver's cache is empty. The never-answering run goes first:
// its registry requests sleep past the test, and the loopback registry's Close waits for them.
func TestGatedPlacement(t *testing.T) {
	began := time.Now()
	reg := registrytest.Start()
	t.Cleanup(reg.Close)
	im := pushRegistryImages(t, reg)
	heldBack, err := reg.PushIndex("shop/legacy", "ltsc2019", types.OCIImageIndex, registrytest.Windows("10.0.20348.2227"))
	if err != nil {
		t.Fatal(err)
	}
	im.builds[heldBack] = []int{20348}

	serve := func(mode string, bound time.Duration) func(*server.Options) {
		return func(o *server.Options) {
			// The registry is on loopback, which wincompat reaches only when allowed.
			o.Images = &server.ImageOptions{Timeout: time.Second, AllowPrivateNetworks: true}
			o.ImageResolverMode, o.GateTimeout = mode, bound
		}
	}
	const neverBound = server.MinGateTimeout
	cl := e2eutil.StartClusterWith(t, []controlplane.Option{controlplane.WithScheduler()}, serve(webhook.ImageModeLookup, neverBound))
	r := &shapeRun{shape: gatedShape, nodes: map[string]e2eutil.TestNode{}}
	for _, n := range gatedShape.nodes("g-") {
		cl.AddNode(t, n)
		r.nodes[n.Name] = n
	}
	// Admission must see both builds before the first pod; the probe's image answers at once.
	cl.WaitForAdmission(t, e2eutil.ReadyNamespace, e2eutil.ProbePod(im.ref["probe"]), "the ready builds "+gatedShape.name, func(p *corev1.Pod, w []string) bool {
		return sameSet(seenBuilds(p, w), gatedShape.builds)
	})
	t.Logf("registry, control plane, kube-scheduler, nodes and wincompat up in %v", time.Since(began).Round(time.Millisecond))
	mix := gatedMix(im, heldBack)

	// createGated creates the mix in a new namespace and checks that admission gated every pod.
	createGated := func(t *testing.T, ns string) []*e2eutil.Placed {
		t.Helper()
		cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
		pods := cl.CreateMix(t, ns, mix, func(p *corev1.Pod) *corev1.Pod { return p.DeepCopy() })
		for _, p := range pods {
			if why := e2eutil.AdmittedGated(p.Stored); why != "" {
				t.Errorf("%s (%s) admitted ungated: %s", p.Stored.Name, p.Cat.Name, why)
			}
		}
		return pods
	}

	t.Run("registry never answers", func(t *testing.T) {
		start := time.Now()
		// Past the bound and the resolver's 10s background timeout: no lookup answers while it counts.
		reg.SetDelay(11 * time.Second)
		pods := createGated(t, "gated-never")
		cl.Settle(t, "gated-never", pods, func(p *e2eutil.Placed) bool { return e2eutil.Ungated(p.Stored) })
		for _, p := range pods {
			pod, where := p.Stored, p.Stored.Name+" ("+p.Cat.Name+")"
			if !e2eutil.Ungated(pod) {
				t.Errorf("%s: still gated %v after the bound", where, pod.Spec.SchedulingGates)
				continue
			}
			if src := pod.Annotations[policy.AnnotationBuildSource]; src == policy.SourceImageManifest {
				t.Errorf("%s: build source %s, yet the registry never answered", where, src)
			}
			entries := e2eutil.DecodeChanges(t, pod.Annotations, policy.AnnotationChanges)
			if !slices.ContainsFunc(entries, func(c policy.Change) bool {
				return c.Rule == policy.RuleBuildGate && strings.Contains(c.Reason, "no answer from the registry within "+neverBound.String())
			}) {
				t.Errorf("%s: no build-gate entry naming the bound in %v", where, entries)
			}
			evs := cl.WaitForPodEvent(t, "gated-never", pod.Name, gated.ReasonFallback)
			if len(evs) != 1 || evs[0].Type != corev1.EventTypeWarning || !strings.Contains(evs[0].Message, "within "+neverBound.String()) {
				t.Errorf("%s: %s Events %v, want one Warning naming the bound", where, gated.ReasonFallback, evs)
			}
			if waited := ungatedAfter(t, cl, "gated-never", pod.Name); waited < neverBound {
				t.Errorf("%s: ungated %v after its creation, before the bound %v", where, waited, neverBound)
			}
		}
		t.Logf("registry never answers: %d pods gated, then ungated with the fallback build, in %v", len(pods), time.Since(start).Round(time.Millisecond))
	})

	placed := func(t *testing.T, mode, ns string, pods []*e2eutil.Placed) {
		t.Helper()
		took := cl.Settle(t, ns, pods, func(p *e2eutil.Placed) bool { return p.Stored.Spec.NodeName != "" })
		for _, p := range pods {
			pod, where := p.Stored, mode+" "+p.Stored.Name+" ("+p.Cat.Name+")"
			if !r.correct(t, im, p) {
				t.Errorf("%s: on %q (build %s), which cannot run %v; nodeSelector %v, affinity %v, gates %v", where, pod.Spec.NodeName,
					r.nodes[pod.Spec.NodeName].Build, containerImages(pod), pod.Spec.NodeSelector, buildAffinity(pod), pod.Spec.SchedulingGates)
			}
			builds, _ := r.candidates(im, pod)
			if src, got := pod.Annotations[policy.AnnotationBuildSource], strings.Split(pod.Annotations[policy.AnnotationBuild], ","); src != policy.SourceImageManifest || !sameSet(got, builds) {
				t.Errorf("%s: build %v from %q, want %v from %s", where, got, src, builds, policy.SourceImageManifest)
			}
			if evs := cl.WaitForPodEvent(t, ns, pod.Name, gated.ReasonDecided); len(evs) != 1 {
				t.Errorf("%s: %d %s Events, want 1", where, len(evs), gated.ReasonDecided)
			}
		}
		t.Logf("%s: %d pods gated, then scheduled in %v", mode, len(pods), took.Round(time.Millisecond))
	}

	t.Run("registry slower than admission", func(t *testing.T) {
		start := time.Now()
		// A pod that keeps wincompat's gate without its label, in a namespace wincompat does not admit
		// in: the cache never holds it, the sweep at the start of the next term finds it.
		const lost = "gated-unlabelled"
		cl.NewNamespace(t, lost, nil)
		unlabelled := e2eutil.ProbePod(heldBack)
		unlabelled.Namespace, unlabelled.Spec.SchedulingGates = lost, []corev1.PodSchedulingGate{{Name: policy.SchedulingGate}}
		if err := cl.C.Create(context.Background(), unlabelled); err != nil {
			t.Fatal(err)
		}
		cl.StopServing()
		cl.Serve(t, serve(webhook.ImageModeLookup, time.Minute))
		reg.SetDelay(5 * time.Second)
		placed(t, "lookup mode", "gated-lookup", createGated(t, "gated-lookup"))
		cl.WaitForPodEvent(t, lost, unlabelled.Name, gated.ReasonReleased)
		if err := cl.C.Get(context.Background(), client.ObjectKeyFromObject(unlabelled), unlabelled); err != nil || !e2eutil.Ungated(unlabelled) {
			t.Errorf("the pod gated without its label: %v, gates %v", err, unlabelled.Spec.SchedulingGates)
		}
		t.Logf("lookup mode took %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("gate mode reads no registry at admission", func(t *testing.T) {
		start := time.Now()
		cl.StopServing()
		cl.Serve(t, serve(webhook.ImageModeGate, time.Minute))
		const ns = "gated-cache"
		cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
		requests, lookups := reg.Requests.Load(), e2eutil.InProcessCounter(t, "wincompat_image_lookups_total", "")
		// A dry run is admitted and never stored: what it costs is admission's alone.
		for _, m := range mix {
			pod := m.Pod.DeepCopy()
			pod.Namespace = ns
			if err := cl.C.Create(context.Background(), pod, client.DryRunAll); err != nil {
				t.Fatal(err)
			}
			if why := e2eutil.AdmittedGated(pod); why != "" {
				t.Errorf("dry run %s (%s) admitted ungated: %s", pod.Name, m.Cat.Name, why)
			}
		}
		if n := reg.Requests.Load() - requests; n != 0 {
			t.Errorf("admission in gate mode sent the registry %d manifest requests, want none", n)
		}
		if n := e2eutil.InProcessCounter(t, "wincompat_image_lookups_total", "") - lookups; n != 0 {
			t.Errorf("wincompat_image_lookups_total moved by %v during admission in gate mode", n)
		}
		placed(t, "gate mode", ns+"-2", createGated(t, ns+"-2"))
		t.Logf("gate mode took %v", time.Since(start).Round(time.Millisecond))
	})
	reg.SetDelay(0)
	t.Logf("TestGatedPlacement took %v", time.Since(began).Round(time.Millisecond))
}

// ungatedAfter is how long after pod's creation wincompat removed its gate: the time of its Event.
func ungatedAfter(t *testing.T, cl *e2eutil.Cluster, ns, name string) time.Duration {
	t.Helper()
	var pod corev1.Pod
	if err := cl.C.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{gated.ReasonDecided, gated.ReasonFallback, gated.ReasonReleased} {
		for _, e := range cl.PodEvents(t, ns, name, reason) {
			at := e.EventTime.Time
			if at.IsZero() {
				at = e.FirstTimestamp.Time
			}
			return at.Sub(pod.CreationTimestamp.Time)
		}
	}
	return 0
}

func containerImages(pod *corev1.Pod) []string {
	var out []string
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			out = append(out, c.Image)
		}
	}
	return out
}
