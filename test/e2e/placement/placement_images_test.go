package placement

// Issue 13: placement through the real kube-apiserver and kube-scheduler when image tags name no
// Windows build, so only the registry knows. A loopback registry holds the images; the Windows build of
// every entry is what the oracle reads, and the oracle's compatibility rule is written here, apart from
// policy.HostRuns. The same pods are then placed with wincompat reading no registry, where placement is
// by luck.

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// registryImage is one image of the test registry. Its tag says nothing about Windows.
type registryImage struct {
	repo, tag string
	mediaType types.MediaType // an index (OCI) or a manifest list (Docker); "" for a single-platform image
	platforms []registrytest.Platform
}

// The registry's images, by the role pods give them.
var registryImages = map[string]registryImage{
	"2019": {"shop/api", "1.0", types.OCIImageIndex, []registrytest.Platform{registrytest.Windows("10.0.17763.5830")}},
	"2022": {"shop/web", "2.3.1", types.DockerManifestList, []registrytest.Platform{registrytest.Windows("10.0.20348.2227")}},
	"2025": {"shop/worker", "4.0", types.OCIImageIndex, []registrytest.Platform{registrytest.Windows("10.0.26100.1742")}},
	"2019+2022": {"base/runtime", "1.4.2", types.DockerManifestList, []registrytest.Platform{
		registrytest.Windows("10.0.17763.5830"), registrytest.Windows("10.0.20348.2227"), registrytest.Linux("amd64"), registrytest.Linux("arm64")}},
	"2022 single": {"shop/report", "1.0", "", []registrytest.Platform{registrytest.Windows("10.0.20348.2227")}}, // os.version in the config only
	"linux":       {"mesh/proxy", "1.27", types.OCIImageIndex, []registrytest.Platform{registrytest.Linux("amd64"), registrytest.Linux("arm64")}},
	// probe runs on every build: with it, wincompat's answer lists the ready builds it sees.
	"probe": {"probe/all", "1", types.OCIImageIndex, []registrytest.Platform{
		registrytest.Windows("10.0.17763.5830"), registrytest.Windows("10.0.20348.2227"), registrytest.Windows("10.0.26100.1742")}},
}

// pushedImages are the references of registryImages as pods name them, and for each the builds
// (17763) of its Windows entries, which is all the oracle knows of an image.
type pushedImages struct {
	ref    map[string]string // role → reference
	builds map[string][]int  // reference → builds of its Windows entries
}

func pushRegistryImages(t *testing.T, reg *registrytest.Registry) pushedImages {
	t.Helper()
	out := pushedImages{ref: map[string]string{}, builds: map[string][]int{}}
	for role, img := range registryImages {
		var ref string
		var err error
		if img.mediaType == "" {
			ref, err = reg.PushImage(img.repo, img.tag, img.platforms[0])
		} else {
			ref, err = reg.PushIndex(img.repo, img.tag, img.mediaType, img.platforms...)
		}
		if err != nil {
			t.Fatal(err)
		}
		out.ref[role] = ref
		out.builds[ref] = []int{}
		for _, p := range img.platforms {
			if p.OS == "windows" {
				out.builds[ref] = append(out.builds[ref], buildNo(p.OSVersion))
			}
		}
	}
	return out
}

// buildNo is the build of a Windows version: 10.0.20348.2227 and 10.0.20348 → 20348.
func buildNo(version string) int {
	parts := strings.Split(version, ".")
	if len(parts) < 3 {
		return 0
	}
	n, _ := strconv.Atoi(parts[2])
	return n
}

// hostRunsBuild is the oracle's compatibility rule, the test's own table of containerd's (containerd/platforms
// platform_windows_compat.go, Microsoft's "Windows container version compatibility", process isolation):
// a host below 20348 runs only its own build; a 2025 host also runs 2022 images.
var hostRunsBuild = map[int][]int{
	17763: {17763},
	20348: {20348},
	26100: {20348, 26100},
}

// catalogBuilds are the default policy's builds, where a pod no ready node runs is pinned for an
// autoscaler to add the node.
var catalogBuilds = []string{e2eutil.Build2019, e2eutil.Build2022, e2eutil.Build2025}

// buildRuns: a Windows node of build can run every container and init container image of pod.
func (im pushedImages) buildRuns(build string, pod *corev1.Pod) bool {
	host := buildNo(build)
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			entries, known := im.builds[c.Image]
			if !known || !slices.ContainsFunc(entries, func(b int) bool { return slices.Contains(hostRunsBuild[host], b) }) {
				return false
			}
		}
	}
	return true
}

// imageKind is one kind of pod of the mix, named by its images. Only the category's name is used: it
// names the pods, and chartPod, given a name it does not know, writes the Windows chart pod without an
// image, which images then fills in. Where a pod belongs is the oracle's business, not the kind's.
type imageKind struct {
	e2eutil.Category
	images func(rnd *rand.Rand, im pushedImages, pod *corev1.Pod)
}

func setApp(role string) func(*rand.Rand, pushedImages, *corev1.Pod) {
	return func(_ *rand.Rand, im pushedImages, pod *corev1.Pod) { pod.Spec.Containers[0].Image = im.ref[role] }
}

// withSidecar adds a container as the chart writes it, with the app's hardened Linux security context.
func withSidecar(pod *corev1.Pod, image string) {
	app := pod.Spec.Containers[0]
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "sidecar", Image: image, SecurityContext: app.SecurityContext.DeepCopy()})
}

var imageKinds = []imageKind{
	{e2eutil.Category{Name: "2019 index"}, func(rnd *rand.Rand, im pushedImages, pod *corev1.Pod) {
		pod.Spec.Containers[0].Image = im.ref["2019"]
		if rnd.Intn(3) == 0 { // a multi-platform init container narrows nothing further
			pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: im.ref["2019+2022"]}}
		}
	}},
	{e2eutil.Category{Name: "2022 manifest list"}, setApp("2022")},
	{e2eutil.Category{Name: "2025 index"}, setApp("2025")},
	{e2eutil.Category{Name: "2019 and 2022 list"}, setApp("2019+2022")},
	{e2eutil.Category{Name: "2022 single image"}, setApp("2022 single")},
	// Each image alone runs in a 2019+2022 cluster; together only on 2025.
	{e2eutil.Category{Name: "2019-2022 app with 2025 sidecar"}, func(_ *rand.Rand, im pushedImages, pod *corev1.Pod) {
		pod.Spec.Containers[0].Image = im.ref["2019+2022"]
		withSidecar(pod, im.ref["2025"])
	}},
	{e2eutil.Category{Name: "windows app with linux sidecar"}, func(rnd *rand.Rand, im pushedImages, pod *corev1.Pod) {
		pod.Spec.Containers[0].Image = im.ref[pick(rnd, []string{"2019", "2022", "2019+2022"})]
		withSidecar(pod, im.ref["linux"])
	}},
}

// imageMix is n chart pods (chartPod's Windows skeleton, every kind once first, then at random) with
// the registry's images.
func imageMix(rnd *rand.Rand, im pushedImages, n int) []e2eutil.MixPod {
	out := make([]e2eutil.MixPod, 0, n)
	for i := range n {
		k := &imageKinds[rnd.Intn(len(imageKinds))]
		if i < len(imageKinds) {
			k = &imageKinds[i]
		}
		pod := chartPod(rnd, &k.Category, fmt.Sprintf("p%03d", i))
		k.images(rnd, im, pod)
		out = append(out, e2eutil.MixPod{Cat: &k.Category, Pod: pod})
	}
	return out
}

// imageShape is a cluster: two Windows nodes of each build and one Linux node.
type imageShape struct {
	name   string
	builds []string
}

var imageShapes = []imageShape{
	{"{2019,2022}", []string{e2eutil.Build2019, e2eutil.Build2022}},
	{"{2019,2025}", []string{e2eutil.Build2019, e2eutil.Build2025}},
	{"{2025}", []string{e2eutil.Build2025}},
	{"{2022,2025}", []string{e2eutil.Build2022, e2eutil.Build2025}},
}

func (s imageShape) nodes(prefix string) []e2eutil.TestNode {
	out := []e2eutil.TestNode{{Name: prefix + "linux-0", OS: "linux", Build: ""}}
	for _, b := range s.builds {
		for i := range 2 {
			out = append(out, e2eutil.TestNode{Name: fmt.Sprintf("%swin%d-%d", prefix, buildNo(b), i), OS: "windows", Build: b})
		}
	}
	return out
}

// imageExpectation of a pod in a shape, from the oracle.
type imageExpectation int

const (
	wantRunnableNode imageExpectation = iota // some ready node runs every image: bound to one of them
	wantPending                              // no ready node does, a catalog build would: pinned to it, Pending, warned
	wantNowhere                              // no Windows build runs every image (a Linux-only image): warned; it runs nowhere
)

// shapeRun is one shape's pods of one run and what the oracle says of them.
type shapeRun struct {
	shape imageShape
	nodes map[string]e2eutil.TestNode
	pods  []*e2eutil.Placed
}

// candidates are the builds of the shape that run the pod, else those of the catalog.
func (r *shapeRun) candidates(im pushedImages, pod *corev1.Pod) ([]string, imageExpectation) {
	if ready := slices.DeleteFunc(slices.Clone(r.shape.builds), func(b string) bool { return !im.buildRuns(b, pod) }); len(ready) > 0 {
		return ready, wantRunnableNode
	}
	if fit := slices.DeleteFunc(slices.Clone(catalogBuilds), func(b string) bool { return !im.buildRuns(b, pod) }); len(fit) > 0 {
		return fit, wantPending
	}
	return nil, wantNowhere
}

func (r *shapeRun) outcome(im pushedImages, p *e2eutil.Placed) outcome {
	name := p.Stored.Spec.NodeName
	if name == "" {
		return pending
	}
	if n, ok := r.nodes[name]; ok && n.OS == "windows" && im.buildRuns(n.Build, p.Stored) {
		return rightNode
	}
	return wrongNode
}

// warnedUnrunnable: the pod's create returned the warning for its imageExpectation, and its changes
// annotation records a warning.
func warnedUnrunnable(t *testing.T, p *e2eutil.Placed, exp imageExpectation, builds []string) bool {
	want := "has no Windows entry"
	if exp == wantPending {
		want = e2eutil.NoReadyNode(strings.Join(builds, " or "))
	}
	if !e2eutil.HasWarning(p.Warnings, want) {
		return false
	}
	if _, set := p.Stored.Annotations[policy.AnnotationChanges]; !set {
		return false
	}
	return slices.ContainsFunc(e2eutil.DecodeChanges(t, p.Stored.Annotations, policy.AnnotationChanges), func(c policy.Change) bool { return c.Action == policy.Warn })
}

// correct: bound where every image runs; Pending where no ready node runs them but a build would; and
// a pod no Windows build runs, warned and kept off Linux nodes (wincompat pins nothing that can never be
// satisfied, so the scheduler may bind it to any Windows node, where it cannot start either).
func (r *shapeRun) correct(t *testing.T, im pushedImages, p *e2eutil.Placed) bool {
	builds, exp := r.candidates(im, p.Stored)
	o := r.outcome(im, p)
	switch exp {
	case wantRunnableNode:
		return o == rightNode
	case wantPending:
		return o == pending && warnedUnrunnable(t, p, exp, builds)
	default:
		n := r.nodes[p.Stored.Spec.NodeName]
		return (o == pending || n.OS == "windows") && warnedUnrunnable(t, p, exp, builds)
	}
}

// TestPlacementFromImages: issue 13. In clusters of {2019, 2022}, {2019, 2025}, {2025} and {2022, 2025},
// 240 chart pods whose image tags name no build are placed by the real scheduler on a node that runs
// every image when wincompat reads the registry; Pending (pinned for an autoscaler) or, with a
// Linux-only image, unpinned, and warned, where no ready node can. The same pods with wincompat reading
// no registry land by luck.
func TestPlacementFromImages(t *testing.T) {
	began := time.Now()
	reg := registrytest.Start()
	t.Cleanup(reg.Close)
	im := pushRegistryImages(t, reg)

	manageClasses := func(o *server.Options) { o.ManageRuntimeClasses = true }
	// The registry is on loopback, which wincompat reaches only when allowed.
	resolveImages := func(o *server.Options) {
		o.Images = &server.ImageOptions{Timeout: time.Second, AllowPrivateNetworks: true}
	}
	cl := e2eutil.StartClusterWith(t, []controlplane.Option{controlplane.WithScheduler()}, manageClasses, resolveImages)
	t.Logf("registry, control plane, kube-scheduler and wincompat (reading the registry) up in %v", time.Since(began).Round(time.Millisecond))
	cl.WaitForManagedRuntimeClasses(t, 3)

	seed := placementSeed(t)
	t.Logf("seed %d (PLACEMENT_SEED=%d replays this mix)", seed, seed)
	rnd := rand.New(rand.NewSource(seed))
	mixes := make([][]e2eutil.MixPod, len(imageShapes))
	for i := range imageShapes {
		mixes[i] = imageMix(rnd, im, 60)
	}

	runs := map[bool][]*shapeRun{}
	for _, resolved := range []bool{true, false} {
		mode := "resolved"
		if !resolved {
			mode = "tags"
			cl.StopServing()
			cl.Serve(t, manageClasses)
		}
		// The classes must be in wincompat's cache before the first pod, or no pod gets one.
		classProbe := e2eutil.ProbePod(im.ref["probe"])
		classProbe.Annotations = map[string]string{policy.AnnotationBuild: "2022"}
		cl.WaitForAdmission(t, e2eutil.ReadyNamespace, classProbe, "the windows-2022 RuntimeClass", func(p *corev1.Pod, _ []string) bool {
			return ptr.Deref(p.Spec.RuntimeClassName, "") == "windows-2022"
		})
		for i, shape := range imageShapes {
			start := time.Now()
			r := &shapeRun{shape: shape, nodes: map[string]e2eutil.TestNode{}}
			for _, n := range shape.nodes(fmt.Sprintf("%s%d-", mode[:1], i)) {
				cl.AddNode(t, n)
				r.nodes[n.Name] = n
			}
			ns := fmt.Sprintf("images-%s-%d", mode, i)
			cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
			// Admission must see exactly this shape's ready builds, not the last one's.
			cl.WaitForAdmission(t, ns, e2eutil.ProbePod(im.ref["probe"]), "the ready builds "+shape.name, func(p *corev1.Pod, w []string) bool {
				return sameSet(seenBuilds(p, w), shape.builds)
			})
			r.pods = cl.CreateMix(t, ns, mixes[i], func(p *corev1.Pod) *corev1.Pod { return p.DeepCopy() })
			created := time.Since(start)
			var done func(*e2eutil.Placed) bool
			if resolved {
				done = func(p *e2eutil.Placed) bool {
					switch _, exp := r.candidates(im, p.Stored); exp {
					case wantRunnableNode:
						return p.Stored.Spec.NodeName != ""
					case wantPending:
						return e2eutil.Unschedulable(p.Stored)
					}
					return e2eutil.Decided(p.Stored)
				}
			}
			took := cl.Settle(t, ns, r.pods, done)
			t.Logf("%s %s: nodes, namespace and %d pods created in %v, scheduled in %v", mode, shape.name, len(r.pods), created.Round(time.Millisecond), took.Round(time.Millisecond))
			runs[resolved] = append(runs[resolved], r)

			// Pending pods would be bound to the next shape's nodes: delete them, then the nodes.
			if err := cl.C.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil {
				t.Fatal(err)
			}
			for name := range r.nodes {
				if err := cl.C.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	t.Logf("placement of the same %d pods, WITH image resolution (left) and WITHOUT, tags only (right).\n"+
		"Cells: bound to a node that runs every image / bound to one that does not / Pending.\n"+
		"[cell]: no ready node runs these pods, a catalog build would (Pending is right); <cell>: no Windows build runs them (a Linux-only image: warned, runs nowhere).\n%s",
		4*60, imageTable(t, im, runs[true], runs[false]))

	// With the registry: every pod correct, and decided from the registry as the oracle predicts.
	wrong := 0
	for _, r := range runs[true] {
		for _, p := range r.pods {
			if !r.correct(t, im, p) {
				wrong++
				t.Errorf("%s %s (%s): on %q; warnings %q; nodeSelector %v; affinity %v",
					r.shape.name, p.Stored.Name, p.Cat.Name, p.Stored.Spec.NodeName, p.Warnings, p.Stored.Spec.NodeSelector, p.Stored.Spec.Affinity)
			}
			checkImageDecision(t, im, r, p)
		}
	}
	// Without it: the same pods are misplaced somewhere, or the images above are not realistic.
	misplaced := 0
	for _, r := range runs[false] {
		for _, p := range r.pods {
			if src := p.Stored.Annotations[policy.AnnotationBuildSource]; src == policy.SourceImageManifest {
				t.Errorf("tags only %s %s: build source %s, but wincompat reads no registry", r.shape.name, p.Stored.Name, src)
			}
			if !r.correct(t, im, p) {
				misplaced++
			}
		}
	}
	t.Logf("with image resolution: %d pods misplaced; tags only: %d of %d misplaced", wrong, misplaced, 4*60)
	if misplaced == 0 {
		t.Error("without image resolution every pod was placed correctly: the comparison shows nothing")
	}
	t.Logf("TestPlacementFromImages took %v", time.Since(began).Round(time.Millisecond))
}

// checkImageDecision checks what wincompat wrote into a pod of the resolved run against the oracle's
// candidates: one build → its nodeSelector and RuntimeClass; several → required node affinity In all of
// them, in every term, and no RuntimeClass; none → nothing pinned.
func checkImageDecision(t *testing.T, im pushedImages, r *shapeRun, p *e2eutil.Placed) {
	t.Helper()
	pod := p.Stored
	builds, exp := r.candidates(im, pod)
	where := r.shape.name + " " + pod.Name + " (" + p.Cat.Name + ")"
	if exp == wantRunnableNode {
		for _, bad := range []string{"no ready node", "has no Windows entry", "no Windows build runs every image", "could not read"} {
			if e2eutil.HasWarning(p.Warnings, bad) {
				t.Errorf("%s: runs on a ready node, yet warned %q", where, p.Warnings)
			}
		}
	}
	pinned, hasPin := pod.Spec.NodeSelector[corev1.LabelWindowsBuild]
	class := ptr.Deref(pod.Spec.RuntimeClassName, "")
	affinity := buildAffinity(pod)
	if exp == wantNowhere {
		if hasPin || class != "" || affinity != nil || pod.Annotations[policy.AnnotationBuild] != "" {
			t.Errorf("%s: no build runs it, yet pinned: nodeSelector %v, runtimeClassName %q, affinity %v, build %q",
				where, pod.Spec.NodeSelector, class, affinity, pod.Annotations[policy.AnnotationBuild])
		}
		return
	}
	if src := pod.Annotations[policy.AnnotationBuildSource]; src != policy.SourceImageManifest {
		t.Errorf("%s: build source %q, want %s", where, src, policy.SourceImageManifest)
	}
	if got := strings.Split(pod.Annotations[policy.AnnotationBuild], ","); !sameSet(got, builds) {
		t.Errorf("%s: %s=%v, want %v", where, policy.AnnotationBuild, got, builds)
	}
	if len(builds) == 1 {
		if pinned != builds[0] || class != catalogClass[builds[0]] {
			t.Errorf("%s: nodeSelector %v and runtimeClassName %q, want build %s and %s", where, pod.Spec.NodeSelector, class, builds[0], catalogClass[builds[0]])
		}
		return
	}
	if hasPin || class != "" {
		t.Errorf("%s: runs on %v, yet nodeSelector %v and runtimeClassName %q pin one", where, builds, pod.Spec.NodeSelector, class)
	}
	if affinity == nil {
		t.Errorf("%s: no required node affinity on %s, want In %v", where, corev1.LabelWindowsBuild, builds)
	}
	for i, values := range affinity {
		if !sameSet(values, builds) {
			t.Errorf("%s: required term %d allows builds %v, want %v", where, i, values, builds)
		}
	}
}

// buildAffinity returns, per required node affinity term, the values of its windows-build In
// expression (nil for a term without one); nil when the pod has no required term.
func buildAffinity(pod *corev1.Pod) [][]string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out [][]string
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		var values []string
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelWindowsBuild && e.Operator == corev1.NodeSelectorOpIn {
				values = e.Values
			}
		}
		out = append(out, values)
	}
	return out
}

// seenBuilds are the ready Windows builds wincompat's answer for a probe shows: the builds it pinned (the
// probe image runs on all), or those of its warning that it chose none among several.
func seenBuilds(pod *corev1.Pod, warnings []string) []string {
	if b := pod.Annotations[policy.AnnotationBuild]; b != "" {
		return strings.Split(b, ",")
	}
	const among = "no build chosen while the cluster runs "
	for _, w := range warnings {
		if _, rest, ok := strings.Cut(w, among); ok {
			list, _, _ := strings.Cut(rest, ";")
			return strings.Split(list, ", ")
		}
	}
	return nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// imageTable renders category × shape for both runs side by side.
func imageTable(t *testing.T, im pushedImages, with, without []*shapeRun) string {
	type cell struct{ right, wrong, pending, correct, pods int }
	count := func(runs []*shapeRun) map[string][]cell {
		out := map[string][]cell{"total": make([]cell, len(runs)+1)}
		for i, r := range runs {
			for _, p := range r.pods {
				if out[p.Cat.Name] == nil {
					out[p.Cat.Name] = make([]cell, len(runs)+1)
				}
				for _, row := range []string{p.Cat.Name, "total"} {
					for _, c := range []*cell{&out[row][i], &out[row][len(runs)]} {
						c.pods++
						switch r.outcome(im, p) {
						case rightNode:
							c.right++
						case wrongNode:
							c.wrong++
						case pending:
							c.pending++
						}
						if r.correct(t, im, p) {
							c.correct++
						}
					}
				}
			}
		}
		return out
	}
	// marks say, per category and shape, what the oracle expects of its pods.
	marks := func(runs []*shapeRun, name string, i int) (string, string) {
		for _, p := range runs[i].pods {
			if p.Cat.Name == name {
				switch _, exp := runs[i].candidates(im, p.Stored); exp {
				case wantPending:
					return "[", "]"
				case wantNowhere:
					return "<", ">"
				}
				return " ", " "
			}
		}
		return " ", " "
	}
	left, right := count(with), count(without)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.AlignRight)
	header := "category\t"
	for range 2 {
		for _, s := range imageShapes {
			header += s.name + "\t"
		}
		header += "correct\t|\t"
	}
	fmt.Fprintln(tw, header)
	rows := []string{}
	for _, k := range imageKinds {
		rows = append(rows, k.Name)
	}
	for _, name := range append(rows, "total") {
		line := name + "\t"
		for side, cells := range []map[string][]cell{left, right} {
			runs := [][]*shapeRun{with, without}[side]
			for i, c := range cells[name] {
				if i == len(runs) {
					line += fmt.Sprintf("%d/%d\t|\t", c.correct, c.pods)
					continue
				}
				open, closing := " ", " "
				if name != "total" {
					open, closing = marks(runs, name, i)
				}
				line += fmt.Sprintf("%s%d/%d/%d%s\t", open, c.right, c.wrong, c.pending, closing)
			}
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	return b.String()
}
