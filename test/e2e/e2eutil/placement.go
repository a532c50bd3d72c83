package e2eutil

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/test/fixtures"
)

const (
	Build2019 = "10.0.17763"
	Build2022 = "10.0.20348"
	Build2025 = "10.0.26100"

	ManagedByLabel = "app.kubernetes.io/managed-by"
)

// NoReadyNode is the start of the warning wincompat gives when no ready node runs the chosen build.
func NoReadyNode(build string) string { return "no ready node runs Windows build " + build }

// A node as the test creates it: os "linux" or "windows", and for Windows its build.
type TestNode struct{ Name, OS, Build string }

// AddNode creates a Ready, fake node with room for every pod the tests create (see fixtures.AddNode).
func (cl *Cluster) AddNode(t *testing.T, n TestNode) {
	t.Helper()
	if err := fixtures.AddNode(context.Background(), cl.C, fixtures.Node{Name: n.Name, OS: n.OS, Build: n.Build}, 250); err != nil {
		t.Fatal(err)
	}
}

// Place is where a pod of a category belongs.
type Place int

const (
	OnBuild      Place = iota // a Windows node of the category's build
	OnAnyWindows              // any Windows node (HostProcess)
	OnLinux                   // a Linux node
	Unbound                   // nowhere: no node runs the build, so the pod must stay Pending
)

// Category is one kind of pod of the random mix.
type Category struct {
	Name  string
	Want  Place
	Build string // the build wincompat must choose; "" when it must choose none
}

func (c Category) Windows() bool { return c.Want != OnLinux }

// MixPod is one pod of the mix: its category and the pod as a chart would render it, with no namespace.
type MixPod struct {
	Cat *Category
	Pod *corev1.Pod
}

// Images per category. The 2019 and 2022 ones are real Microsoft tags in the forms charts use; the
// tag-less ones name no build, so only the annotation can choose one (one has a registry port, which
// must not be read as a tag).
var (
	Images2019    = []string{"mcr.microsoft.com/windows/servercore:ltsc2019", "mcr.microsoft.com/windows/nanoserver:1809", "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2019"}
	Images2022    = []string{"mcr.microsoft.com/windows/nanoserver:ltsc2022", "mcr.microsoft.com/windows/servercore:10.0.20348.2031", "mcr.microsoft.com/dotnet/framework/aspnet:4.8-windowsservercore-ltsc2022"}
	Images2025    = []string{"mcr.microsoft.com/windows/servercore:ltsc2025", "mcr.microsoft.com/windows/nanoserver:ltsc2025"}
	ImagesTagless = []string{"registry.example.com/shop/api", "registry.example.com:5000/shop/worker"}
	ImagesHost    = []string{"mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image:v1.0.0", "mcr.microsoft.com/windows/nanoserver:ltsc2022", "mcr.microsoft.com/windows/servercore:ltsc2019"}
	ImagesLinux   = []string{"registry.k8s.io/pause:3.10", "docker.io/library/nginx:1.27", "ghcr.io/example/agent:2.3.1"}
	// The annotation forms of the issue: a year, and an LTSC name.
	AnnotationOfCat = map[string]string{"annotation 2019": "2019", "annotation ltsc2022": "ltsc2022"}
)

// Placed is one created pod and what happened to it.
type Placed struct {
	MixPod
	Stored   *corev1.Pod // as admitted (the response to the create), then as last listed
	Warnings []string    // the API server's warnings for its create
}

// CreateMix creates every pod of mix in ns for real, one at a time so that each create's warnings are
// its own. render turns the chart's pod into the one to create.
func (cl *Cluster) CreateMix(t *testing.T, ns string, mix []MixPod, render func(*corev1.Pod) *corev1.Pod) []*Placed {
	t.Helper()
	ctx := context.Background()
	cl.Warnings.Take()
	out := make([]*Placed, 0, len(mix))
	for _, m := range mix {
		pod := render(m.Pod)
		pod.Namespace = ns
		if err := cl.C.Create(ctx, pod); err != nil {
			t.Fatalf("%s (%s) rejected in namespace %s: %v", pod.Name, m.Cat.Name, ns, err)
		}
		out = append(out, &Placed{MixPod: m, Stored: pod, Warnings: cl.Warnings.Take()})
	}
	return out
}

// Settle waits until the scheduler has decided on every pod of ns: bound (spec.nodeName) or marked
// PodScheduled=False; done may ask for more (such as which pods must be bound). It refreshes each
// placed pod's stored copy and returns how long it waited. It does not fail on timeout: the
// placement table that follows shows what was left undecided.
func (cl *Cluster) Settle(t *testing.T, ns string, pods []*Placed, done func(*Placed) bool) time.Duration {
	t.Helper()
	start := time.Now()
	byName := map[string]*Placed{}
	for _, p := range pods {
		byName[p.Stored.Name] = p
	}
	for {
		var list corev1.PodList
		if err := cl.C.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatalf("listing pods of %s: %v", ns, err)
		}
		for i := range list.Items {
			if p := byName[list.Items[i].Name]; p != nil {
				p.Stored = &list.Items[i]
			}
		}
		if !slices.ContainsFunc(pods, func(p *Placed) bool { return !Decided(p.Stored) || (done != nil && !done(p)) }) {
			return time.Since(start)
		}
		if time.Since(start) > 90*time.Second {
			t.Errorf("the scheduler had not decided on every pod of %s after %v", ns, time.Since(start).Round(time.Second))
			return time.Since(start)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Decided: bound, or found unschedulable.
func Decided(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" || Unschedulable(pod)
}

func Unschedulable(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return true
		}
	}
	return false
}

// WaitForAdmission repeats a dry-run create of pod in ns until ok accepts wincompat's answer (the
// mutated pod and the warnings): wincompat reads Nodes and RuntimeClasses from its informer cache, so
// the API server's state reaches admission a moment later.
func (cl *Cluster) WaitForAdmission(t *testing.T, ns string, pod *corev1.Pod, what string, ok func(*corev1.Pod, []string) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		try := pod.DeepCopy()
		try.Namespace = ns
		cl.Warnings.Take()
		err := cl.C.Create(context.Background(), try, client.DryRunAll)
		warned := cl.Warnings.Take()
		if err == nil && ok(try, warned) {
			return time.Since(start)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("admission never showed %s: err %v, runtimeClassName %v, warnings %q", what, err, try.Spec.RuntimeClassName, warned)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitForManagedRuntimeClasses waits until the reconciler has created the catalog's classes.
func (cl *Cluster) WaitForManagedRuntimeClasses(t *testing.T, n int) []nodev1.RuntimeClass {
	t.Helper()
	for i := 0; ; i++ {
		var list nodev1.RuntimeClassList
		if err := cl.C.List(context.Background(), &list, client.MatchingLabels{ManagedByLabel: "wincompat"}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == n {
			return list.Items
		}
		if i == 300 {
			t.Fatalf("%d RuntimeClasses labelled %s=wincompat after 30s, want %d", len(list.Items), ManagedByLabel, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func HasWarning(warnings []string, sub string) bool {
	return slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, sub) })
}

// ProbePod is a Windows pod of one image, for dry-run probes.
func ProbePod(image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: corev1.PodSpec{
			OS:         &corev1.PodOS{Name: corev1.Windows},
			Containers: []corev1.Container{{Name: "app", Image: image}},
		},
	}
}
