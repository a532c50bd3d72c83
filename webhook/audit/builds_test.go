package audit

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/wincompat/wincompat/policy"
)

const (
	b2019 = "10.0.17763"
	b2022 = "10.0.20348"
	b2025 = "10.0.26100"

	img2019 = "mcr.microsoft.com/windows/servercore:ltsc2019"
	img2022 = "mcr.microsoft.com/windows/nanoserver:ltsc2022"
	tagless = "registry.example.com/shop/api:1.4.2" // its tag names no build
)

func TestParseBuilds(t *testing.T) {
	p := policy.Default()
	for in, want := range map[string][]string{
		"10.0.26100":                   {b2025},
		"ltsc2022, 2019,10.0.26100":    {b2022, b2019, b2025},
		"2025,LTSC2025,10.0.26100":     {b2025},
		"10.0.30000":                   {"10.0.30000"}, // newer than the catalog, as a node may be
		"1809":                         {b2019},
		"10.0.20348,10.0.20348,ltsc22": nil,
	} {
		got, err := ParseBuilds(p, in)
		if want == nil {
			if err == nil {
				t.Errorf("ParseBuilds(%q) = %v, want an error", in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseBuilds(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "2030", "ltsc2025,,", "10.0.1", "10.0.26100.1"} {
		if got, err := ParseBuilds(p, bad); err == nil || !strings.Contains(err.Error(), "ltsc2025") {
			t.Errorf("ParseBuilds(%q) = %v, %v; want an error naming the catalog", bad, got, err)
		}
	}
}

func node(name, build string, ready bool) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: build}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
	}
}

func winPod(name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web", Annotations: map[string]string{}},
		Spec:       corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

// recorded marks the pod as wincompat leaves it: the builds it chose and why.
func recorded(p *corev1.Pod, builds, source string) *corev1.Pod {
	p.Annotations[policy.AnnotationVersion] = "test"
	p.Annotations[policy.AnnotationBuild] = builds
	p.Annotations[policy.AnnotationBuildSource] = source
	return p
}

func onNode(p *corev1.Pod, n string) *corev1.Pod { p.Spec.NodeName = n; return p }

func requireBuildsIn(p *corev1.Pod, builds ...string) *corev1.Pod {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
			{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: builds},
		}}}}}}
	return p
}

func pinned(p *corev1.Pod, build string) *corev1.Pod {
	p.Spec.NodeSelector = map[string]string{corev1.LabelWindowsBuild: build}
	return p
}

func run(t *testing.T, opts Options, objs ...client.Object) *Report {
	t.Helper()
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	rep, err := Run(context.Background(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// runForbidding audits objs as a user who may not list the kinds of deny: the audit must say what it
// could not read and report the rest.
func runForbidding(t *testing.T, objs []client.Object, deny ...client.ObjectList) *Report {
	t.Helper()
	c := fake.NewClientBuilder().WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			for _, d := range deny {
				if reflect.TypeOf(d) == reflect.TypeOf(list) {
					return apierrors.NewForbidden(schema.GroupResource{Resource: reflect.TypeOf(list).Elem().Name()}, "", nil)
				}
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	rep, err := Run(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// findings are the report's findings of kinds, as "kind Kind/name: detail".
func findings(rep *Report, kinds ...string) []string {
	var out []string
	for _, f := range rep.Findings {
		if slices.Contains(kinds, f.Kind) {
			out = append(out, f.Kind+" "+f.Object+": "+f.Detail)
		}
	}
	return out
}

func sameFindings(t *testing.T, what string, got, want []string) {
	t.Helper()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// TestMultiBuildAnnotation: wincompat.io/build may list several builds, and a node outside the list may
// still run the pod under the compatibility rule.
func TestMultiBuildAnnotation(t *testing.T) {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		node("win2019-0", b2019, false), node("win2022-0", b2022, true), node("win2025-0", b2025, true),
		// In the list: fine, whichever build of it.
		onNode(recorded(requireBuildsIn(winPod("multi-on-2025", tagless), b2022, b2025), b2022+","+b2025, policy.SourceImageManifest), "win2025-0"),
		// Outside the list, and a 2019 node runs no 2022 image.
		onNode(recorded(requireBuildsIn(winPod("multi-on-2019", tagless), b2022, b2025), b2022+","+b2025, policy.SourceImageManifest), "win2019-0"),
		// 2022 chosen, on a 2025 node: a 2025 node runs 2022 images.
		onNode(recorded(winPod("2022-on-2025", tagless), b2022, policy.SourceNamespace), "win2025-0"),
		// 2022 chosen, but its tag says 2019, which a 2025 node cannot run: the image decides.
		onNode(recorded(winPod("2019-image-on-2025", img2019), b2022, policy.SourceAnnotation), "win2025-0"),
		// Pending: one of its builds has a ready node; none of the other's has.
		recorded(winPod("pending-multi", tagless), b2019+","+b2025, policy.SourceImageManifest),
		recorded(winPod("pending-2019", tagless), b2019, policy.SourceImage),
	}
	rep := run(t, Options{}, objs...)
	sameFindings(t, "compatible rule", findings(rep, BuildMismatch, PendingNoBuild), []string{
		"build-mismatch Pod/multi-on-2019: chosen builds 10.0.20348, 10.0.26100, but node win2019-0 runs 10.0.17763",
		"build-mismatch Pod/2019-image-on-2025: chosen build 10.0.20348, but node win2025-0 runs 10.0.26100",
		"pending-no-build Pod/pending-2019: no ready node runs build 10.0.17763",
	})

	exact, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsCompatibility: exact\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep = run(t, Options{Policy: exact}, objs...)
	if got := findings(rep, BuildMismatch); !slices.Contains(got, "build-mismatch Pod/2022-on-2025: chosen build 10.0.20348, but node win2025-0 runs 10.0.26100") || len(got) != 3 {
		t.Errorf("with windowsCompatibility exact, a 2022 pod on a 2025 node is a mismatch: %q", got)
	}
}

// TestEditedBuildAnnotation: a pod's author can edit wincompat.io/build after admission; a value that
// names no build ("," or spaces) is a bad annotation, never a crash of the audit.
func TestEditedBuildAnnotation(t *testing.T) {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		node("win2022-0", b2022, true),
		onNode(recorded(winPod("edited-comma", tagless), ",", policy.SourceImage), "win2022-0"),
		onNode(recorded(winPod("edited-spaces", tagless), " , ", policy.SourceImage), "win2022-0"),
		recorded(winPod("edited-pending", tagless), ",", policy.SourceImage),
	}
	rep := run(t, Options{}, objs...)
	sameFindings(t, "edited annotations", findings(rep, BuildMismatch, PendingNoBuild, BadAnnotation), []string{
		`bad-annotation Pod/edited-comma: wincompat.io/build: "," names no build`,
		`bad-annotation Pod/edited-spaces: wincompat.io/build: " , " names no build`,
		`bad-annotation Pod/edited-pending: wincompat.io/build: "," names no build`,
	})
}

// fakeResolver answers from a table and counts what it was asked.
type fakeResolver struct {
	images map[string]policy.Image
	asked  map[string]int
}

func (f *fakeResolver) Lookup(_ context.Context, req policy.ImageRequest) map[string]policy.Image {
	out := map[string]policy.Image{}
	for _, i := range req.Images {
		f.asked[i]++
		img, ok := f.images[i]
		if !ok {
			img = policy.Image{Err: "not found"}
		}
		out[i] = img
	}
	return out
}

func win(v string) policy.Platform {
	return policy.Platform{OS: "windows", Architecture: "amd64", OSVersion: v}
}

func deployment(name string, spec corev1.PodSpec) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web"},
		Spec:       appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: spec}},
	}
}

// TestBuilds: --builds 10.0.26100 reports exactly the pods and templates that could not run on 2025
// nodes, with why; the registry's answers, when asked, take over from tags.
func TestBuilds(t *testing.T) {
	hostProcess := winPod("host-process", img2019)
	hostProcess.Spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}
	// Its image does not limit it, but its pin does; and the pin is no contradiction of its image.
	hostProcessPinned := pinned(winPod("host-process-pinned", img2019), b2022)
	hostProcessPinned.Spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}
	classPinned := winPod("", tagless).Spec
	classPinned.RuntimeClassName = ptr.To("windows-2019")
	unknownClass := winPod("", tagless).Spec
	unknownClass.RuntimeClassName = ptr.To("missing")
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		node("win2025-0", b2025, true),
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2019"}, Handler: "runhcs-wcow-process",
			Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{corev1.LabelWindowsBuild: b2019}}},
		winPod("2019", img2019),
		winPod("2022", img2022),
		winPod("tagless", tagless),
		pinned(winPod("user-pinned-2019", tagless), b2019),
		// wincompat pinned these from their images: a replacement would be decided again.
		pinned(recorded(winPod("wincompat-pinned-2022", img2022), b2022, policy.SourceImage), b2022),
		requireBuildsIn(recorded(winPod("wincompat-required-2022", img2022), b2022, policy.SourceImageManifest), b2022),
		// The namespace asked for 2022: that pin stays.
		pinned(recorded(winPod("namespace-pinned-2022", img2022), b2022, policy.SourceNamespace), b2022),
		hostProcess, hostProcessPinned,
		// Finished: it will not run again, so it is not judged.
		&corev1.Pod{ObjectMeta: winPod("done-2019", img2019).ObjectMeta, Spec: winPod("", img2019).Spec, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		deployment("web-2019", winPod("", img2019).Spec),
		deployment("web-2022", winPod("", img2022).Spec),
		deployment("class-2019", classPinned),
		deployment("class-missing", unknownClass),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "linux", Namespace: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: img2019}}}},
	}
	rep := run(t, Options{Builds: []string{b2025}}, objs...)
	const cannot = "cannot run on 10.0.26100"
	sameFindings(t, "--builds 10.0.26100, tags only", findings(rep, CannotRunOnBuilds), []string{
		"cannot-run-on-builds Pod/2019: containers[app]: image " + img2019 + " (tag: Windows build 10.0.17763) " + cannot,
		"cannot-run-on-builds Pod/user-pinned-2019: pinned to Windows build 10.0.17763 by node.kubernetes.io/windows-build",
		"cannot-run-on-builds Pod/namespace-pinned-2022: pinned to Windows build 10.0.20348 by node.kubernetes.io/windows-build",
		"cannot-run-on-builds Pod/host-process-pinned: pinned to Windows build 10.0.20348 by node.kubernetes.io/windows-build",
		"cannot-run-on-builds Deployment/web-2019: containers[app]: image " + img2019 + " (tag: Windows build 10.0.17763) " + cannot,
		"cannot-run-on-builds Deployment/class-2019: pinned to Windows build 10.0.17763 by node.kubernetes.io/windows-build",
	})
	want := BuildsSummary{Builds: []string{b2025}, Pods: 9, PodsRunnable: 5, Templates: 4, TemplatesRunnable: 2, Reasons: []ReasonRow{
		{Reason: "image " + img2019 + " (tag: Windows build 10.0.17763) " + cannot, Pods: 1, Templates: 1},
		{Reason: "pinned to Windows build 10.0.17763 by node.kubernetes.io/windows-build", Pods: 1, Templates: 1},
		{Reason: "pinned to Windows build 10.0.20348 by node.kubernetes.io/windows-build", Pods: 2},
	}}
	if got := rep.Builds; got == nil || !slices.Equal(got.Builds, want.Builds) || !slices.Equal(got.Reasons, want.Reasons) ||
		got.Pods != want.Pods || got.PodsRunnable != want.PodsRunnable || got.Templates != want.Templates || got.TemplatesRunnable != want.TemplatesRunnable {
		t.Errorf("summary:\n got %+v\nwant %+v", got, want)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out, ViewSummary); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"  5 of 9 Windows pods and 2 of 4 Windows pod templates could run on 10.0.26100",
		"  1 pod, 1 template: image " + img2019 + " (tag: Windows build 10.0.17763) " + cannot,
		"  2 pods: pinned to Windows build 10.0.20348 by node.kubernetes.io/windows-build",
	} {
		if !strings.Contains(out.String(), line+"\n") {
			t.Errorf("the summary lacks %q:\n%s", line, out.String())
		}
	}
	if len(findings(rep, BuildNotInImage, LinuxOnlyImage)) != 0 {
		t.Errorf("no pin contradicts a tag here: %q", findings(rep, BuildNotInImage, LinuxOnlyImage))
	}

	// Without --builds: no summary and no such finding.
	if rep := run(t, Options{}, objs...); rep.Builds != nil || len(findings(rep, CannotRunOnBuilds)) != 0 {
		t.Errorf("without Builds: %+v, %q", rep.Builds, findings(rep, CannotRunOnBuilds))
	}

	// The registry says the tagless image runs on 2019 and 2025, and the 2022 one only on 2019 (the tag
	// lies); the sidecar has no Windows entry.
	res := &fakeResolver{asked: map[string]int{}, images: map[string]policy.Image{
		tagless: {Platforms: []policy.Platform{win("10.0.17763.5830"), win("10.0.26100.2894")}},
		img2022: {Platforms: []policy.Platform{win("10.0.17763.5830")}},
		"busybox:1.36": {Platforms: []policy.Platform{
			{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}},
	}}
	sidecar := winPod("sidecar", tagless)
	sidecar.Spec.Containers = append(sidecar.Spec.Containers, corev1.Container{Name: "log", Image: "busybox:1.36"})
	rep = run(t, Options{Builds: []string{b2025}, Images: res}, append(objs, sidecar)...)
	sameFindings(t, "--builds 10.0.26100 --resolve-images", findings(rep, CannotRunOnBuilds), []string{
		"cannot-run-on-builds Pod/2019: containers[app]: image " + img2019 + " (tag: Windows build 10.0.17763) " + cannot,
		"cannot-run-on-builds Pod/2022: containers[app]: image " + img2022 + " (windows/amd64:10.0.17763.5830) " + cannot,
		"cannot-run-on-builds Pod/user-pinned-2019: pinned to Windows build 10.0.17763 by node.kubernetes.io/windows-build",
		"cannot-run-on-builds Pod/wincompat-pinned-2022: containers[app]: image " + img2022 + " (windows/amd64:10.0.17763.5830) " + cannot,
		"cannot-run-on-builds Pod/wincompat-required-2022: containers[app]: image " + img2022 + " (windows/amd64:10.0.17763.5830) " + cannot,
		"cannot-run-on-builds Pod/host-process-pinned: pinned to Windows build 10.0.20348 by node.kubernetes.io/windows-build",
		"cannot-run-on-builds Pod/namespace-pinned-2022: pinned to Windows build 10.0.20348 by node.kubernetes.io/windows-build; containers[app]: image " + img2022 + " (windows/amd64:10.0.17763.5830) " + cannot,
		"cannot-run-on-builds Pod/sidecar: containers[log]: image busybox:1.36 (linux/amd64, linux/arm64) has no Windows entry",
		"cannot-run-on-builds Deployment/web-2019: containers[app]: image " + img2019 + " (tag: Windows build 10.0.17763) " + cannot,
		"cannot-run-on-builds Deployment/web-2022: containers[app]: image " + img2022 + " (windows/amd64:10.0.17763.5830) " + cannot,
		"cannot-run-on-builds Deployment/class-2019: pinned to Windows build 10.0.17763 by node.kubernetes.io/windows-build",
	})
	// Pinned to 2022 where the registry says 2019 only; the class-pinned template's image runs on 2019.
	sameFindings(t, "image findings", findings(rep, BuildNotInImage, LinuxOnlyImage), []string{
		"build-not-in-image Pod/wincompat-pinned-2022: pinned to 10.0.20348 by its nodeSelector, but containers[app]: image " + img2022 + " (windows/amd64:10.0.17763.5830) cannot run on 10.0.20348",
		"build-not-in-image Pod/wincompat-required-2022: pinned to 10.0.20348 by its required node affinity, but containers[app]: image " + img2022 + " (windows/amd64:10.0.17763.5830) cannot run on 10.0.20348",
		"build-not-in-image Pod/namespace-pinned-2022: pinned to 10.0.20348 by its nodeSelector, but containers[app]: image " + img2022 + " (windows/amd64:10.0.17763.5830) cannot run on 10.0.20348",
		"linux-only-image Pod/sidecar: containers[log]: image busybox:1.36 (linux/amd64, linux/arm64) has no Windows entry",
	})
	for image, n := range res.asked {
		if n != 1 {
			t.Errorf("%s was asked of the registry %d times, want once per run", image, n)
		}
	}
	if len(res.asked) != 4 {
		t.Errorf("asked about %v; want the 4 images of Windows pods and templates", res.asked)
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "1 images could not be read") || !strings.Contains(rep.Notes[0], img2019) {
		t.Errorf("the image the registry did not answer for is noted: %q", rep.Notes)
	}
}

// TestImageFindingsFromAnnotation: a build asked for in wincompat.io/build, on a template or a pod
// wincompat has not admitted yet, is a pin too: wincompat will honour it.
func TestImageFindingsFromAnnotation(t *testing.T) {
	p := winPod("asks-2022", img2019)
	p.Annotations[policy.AnnotationBuild] = "ltsc2022"
	ok := winPod("asks-2019", img2019)
	ok.Annotations[policy.AnnotationBuild] = "2019"
	rep := run(t, Options{}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, p, ok)
	sameFindings(t, "annotation pins", findings(rep, BuildNotInImage), []string{
		"build-not-in-image Pod/asks-2022: pinned to 10.0.20348 by its wincompat.io/build annotation, but containers[app]: image " + img2019 + " (tag: Windows build 10.0.17763) cannot run on 10.0.20348",
	})
}

func TestHardPins(t *testing.T) {
	in := func(values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	zone := corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}
	spec := func(selector string, terms ...[]corev1.NodeSelectorRequirement) *corev1.PodSpec {
		s := &corev1.PodSpec{}
		if selector != "" {
			s.NodeSelector = map[string]string{corev1.LabelWindowsBuild: selector}
		}
		if len(terms) > 0 {
			ns := &corev1.NodeSelector{}
			for _, t := range terms {
				ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
			}
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}}
		}
		return s
	}
	for name, c := range map[string]struct {
		spec *corev1.PodSpec
		want []string
	}{
		"nothing":                      {spec(""), nil},
		"nodeSelector":                 {spec(b2019), []string{b2019}},
		"terms are alternatives":       {spec("", []corev1.NodeSelectorRequirement{in(b2019)}, []corev1.NodeSelectorRequirement{zone, in(b2022, b2025)}), []string{b2019, b2022, b2025}},
		"a term without the build":     {spec("", []corev1.NodeSelectorRequirement{in(b2019)}, []corev1.NodeSelectorRequirement{zone}), nil},
		"expressions of a term narrow": {spec("", []corev1.NodeSelectorRequirement{in(b2019, b2022), in(b2022, b2025)}), []string{b2022}},
		"nodeSelector and affinity":    {spec(b2022, []corev1.NodeSelectorRequirement{in(b2019, b2022)}), []string{b2022}},
		"contradicting pins":           {spec(b2025, []corev1.NodeSelectorRequirement{in(b2019)}), []string{}},
		"nodeSelector, open affinity":  {spec(b2022, []corev1.NodeSelectorRequirement{zone}), []string{b2022}},
	} {
		if got := policy.PinnedBuilds(c.spec); !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

// TestBuildsHyperV: --builds counts what Hyper-V isolation would keep running (images of older builds)
// and names the cluster's Hyper-V RuntimeClass, found by its handler, in the finding; without such a
// class it still counts, and the findings stay as process isolation makes them. A pod already Hyper-V
// isolated is judged by Hyper-V's rule, not reported as on a node that cannot run it.
func TestBuildsHyperV(t *testing.T) {
	isolated := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "isolated"}, Handler: policy.HyperVHandler}
	// Placed as admission places it: both ready builds, the Hyper-V class, on the 2022 node.
	placed := onNode(requireBuildsIn(recorded(winPod("placed-2019", img2019), b2022+","+b2025, policy.SourceImage), b2022, b2025), "win2022-0")
	placed.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions = placed.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[1:]
	placed.Spec.RuntimeClassName = ptr.To("isolated")
	newer := winPod("newer-2025", "mcr.microsoft.com/windows/servercore:ltsc2025")
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		node("win2022-0", b2022, true), node("win2025-0", b2025, true),
		winPod("2019", img2019), placed, newer,
		deployment("web-2019", winPod("", img2019).Spec),
	}
	rep := run(t, Options{Builds: []string{b2022}}, append(objs, isolated)...)
	const cannot = "cannot run on 10.0.20348"
	sameFindings(t, "with a Hyper-V class", findings(rep, CannotRunOnBuilds, BuildMismatch, BuildNotInImage), []string{
		"cannot-run-on-builds Pod/2019: containers[app]: image " + img2019 + " (tag: Windows build 10.0.17763) " + cannot + "; Hyper-V isolation would run it on 10.0.20348 (RuntimeClass isolated)",
		"cannot-run-on-builds Pod/placed-2019: containers[app]: image " + img2019 + " (tag: Windows build 10.0.17763) " + cannot + "; Hyper-V isolation would run it on 10.0.20348 (RuntimeClass isolated)",
		"cannot-run-on-builds Deployment/web-2019: containers[app]: image " + img2019 + " (tag: Windows build 10.0.17763) " + cannot + "; Hyper-V isolation would run it on 10.0.20348 (RuntimeClass isolated)",
		"cannot-run-on-builds Pod/newer-2025: containers[app]: image mcr.microsoft.com/windows/servercore:ltsc2025 (tag: Windows build 10.0.26100) " + cannot,
	})
	if s := rep.Builds; s.PodsHyperV != 2 || s.TemplatesHyperV != 1 || !slices.Equal(s.HyperVClasses, []string{"isolated"}) {
		t.Errorf("summary %+v", s)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out, ViewSummary); err != nil {
		t.Fatal(err)
	}
	if line := "  Hyper-V isolation would keep 2 pods and 1 template more running (RuntimeClass isolated)\n"; !strings.Contains(out.String(), line) {
		t.Errorf("the summary lacks %q:\n%s", line, out.String())
	}

	// No Hyper-V class: counted all the same, the findings as process isolation makes them.
	rep = run(t, Options{Builds: []string{b2022}}, objs...)
	for _, f := range findings(rep, CannotRunOnBuilds) {
		if strings.Contains(f, "Hyper-V") {
			t.Errorf("a finding names a class the cluster does not have: %s", f)
		}
	}
	// The placed pod names a class that no longer exists: it is not counted.
	if s := rep.Builds; s.PodsHyperV != 1 || s.TemplatesHyperV != 1 || len(s.HyperVClasses) != 0 {
		t.Errorf("summary without a class %+v", s)
	}
	// Without the class, the placed pod's 2019 image on the 2022 node is a mismatch again.
	if got := findings(rep, BuildNotInImage); len(got) != 1 {
		t.Errorf("build-not-in-image without the Hyper-V class: %q", got)
	}
}

// TestImageNewerRevision: a pod whose image, as the registry says, is of a newer revision than its node
// reports in status.nodeInfo.kernelVersion; not for a pod the node runs Hyper-V isolated.
func TestImageNewerRevision(t *testing.T) {
	n := node("win2022-0", b2022, true)
	n.Status.NodeInfo.KernelVersion = "10.0.20348.2762"
	isolated := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "isolated"}, Handler: policy.HyperVHandler}
	hv := onNode(winPod("isolated", tagless), "win2022-0")
	hv.Spec.RuntimeClassName = ptr.To("isolated")
	res := &fakeResolver{asked: map[string]int{}, images: map[string]policy.Image{
		tagless: {Platforms: []policy.Platform{win("10.0.20348.2900")}},
		img2022: {Platforms: []policy.Platform{win("10.0.20348.2700")}},
	}}
	rep := run(t, Options{Images: res}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, n, isolated,
		onNode(winPod("ahead", tagless), "win2022-0"), onNode(winPod("behind", img2022), "win2022-0"), hv)
	sameFindings(t, "revisions", findings(rep, ImageNewerRevision), []string{
		"image-newer-revision Pod/ahead: node win2022-0 runs 10.0.20348.2762; containers[app]: " + tagless + " (Windows 10.0.20348.2900): of a newer revision, reported failing to start until the node is updated",
	})
}
