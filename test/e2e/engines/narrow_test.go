package engines

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// nsEngineMAPRestricted enforces Pod Security restricted, where only the admission policies act: the
// user for runAsNonRoot must follow the restricted adjustments of the same patch.
const nsEngineMAPRestricted = "engine-map-restricted"

// enginesPolicy is the policy the engines are compared under: the defaults with the rewrites that narrow
// turned on (they are off by default), so that the engines are compared on those too. Nothing else in
// it differs from the default.
func enginesPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	pol, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nuserForRunAsNonRoot: true\nmemoryLimits: {fromRequests: true, default: 512Mi}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

const narrowImage = "mcr.microsoft.com/windows/nanoserver:ltsc2022"

// narrowPods are Windows pods each narrowing rewrite acts on, and pods it must leave alone.
func narrowPods() []*corev1.Pod {
	mem := func(requests, limits string) corev1.ResourceRequirements {
		var r corev1.ResourceRequirements
		if requests != "" {
			r.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(requests)}
		}
		if limits != "" {
			r.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limits)}
		}
		return r
	}
	pod := func(name string, sc *corev1.PodSecurityContext, init []corev1.Container, containers ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, SecurityContext: sc, InitContainers: init, Containers: containers}}
	}
	c := func(name string, r corev1.ResourceRequirements, sc *corev1.SecurityContext) corev1.Container {
		return corev1.Container{Name: name, Image: narrowImage, Resources: r, SecurityContext: sc}
	}
	// A new one each time: the Go decision changes it in place, as it would a decoded pod's.
	nonRoot := func() *corev1.SecurityContext { return &corev1.SecurityContext{RunAsNonRoot: new(true)} }
	hostProcess := pod("narrow-hostprocess", &corev1.PodSecurityContext{RunAsNonRoot: new(true),
		WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: new(true), RunAsUserName: new(`NT AUTHORITY\Local service`)}}, nil,
		c("agent", mem("64Mi", ""), nil), c("helper", mem("", ""), nil))
	hostProcess.Spec.HostNetwork = true
	return []*corev1.Pod{
		// The pod asks for non-root: its user at pod level; limits from the request and the default.
		pod("narrow-pod-nonroot", &corev1.PodSecurityContext{RunAsNonRoot: new(true)}, []corev1.Container{c("init", mem("", ""), nil)},
			c("request-only", mem("256Mi", ""), nil), c("limited", mem("128Mi", "1Gi"), nil)),
		// Containers ask: each that names no user gets one; the others are left alone.
		pod("narrow-containers-nonroot", nil, []corev1.Container{c("init", mem("64Mi", ""), nonRoot())},
			c("asks", mem("", ""), nonRoot()), c("plain", mem("", "2Gi"), nil),
			c("named", mem("", ""), &corev1.SecurityContext{RunAsNonRoot: new(true), WindowsOptions: &corev1.WindowsSecurityContextOptions{RunAsUserName: new("ContainerUser")}})),
		// A user named and limits set: nothing to do.
		pod("narrow-untouched", &corev1.PodSecurityContext{RunAsNonRoot: new(true), WindowsOptions: &corev1.WindowsSecurityContextOptions{RunAsUserName: new("ContainerUser")}}, nil,
			c("app", mem("128Mi", "256Mi"), nil)),
		hostProcess,
	}
}

// narrowPodsIn are the narrowPods Pod Security lets into a namespace with labels: a namespace
// enforcing restricted refuses HostProcess pods.
func narrowPodsIn(labels map[string]string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range narrowPods() {
		if !p.Spec.HostNetwork || labels[policy.LabelPodSecurityEnforce] != "restricted" {
			out = append(out, p)
		}
	}
	return out
}

// narrowWorkloads are narrowPods as the engines test creates its objects.
func narrowWorkloads(t *testing.T) []e2eutil.Workload {
	t.Helper()
	var out []e2eutil.Workload
	for _, p := range narrowPods() {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e2eutil.Workload{File: "narrow_test.go", Obj: &unstructured.Unstructured{Object: m}})
	}
	return out
}

// checkNarrowed reads back the narrow pods each engine stored in ns and holds them to the Go decision
// for a namespace with labels: every container's Windows user and memory limit as decided, and the
// memory request the API server defaults from a limit set where there was no request. The first two pods
// must have been narrowed at all, so that a decision that did nothing cannot pass.
func checkNarrowed(ctx context.Context, t *testing.T, c client.Client, pol *policy.Policy, ns string, labels map[string]string) {
	t.Helper()
	for _, want := range narrowPodsIn(labels) {
		raw := want.DeepCopy()
		if _, err := pol.Decide(want, policy.Facts{Operation: policy.Create, Version: "e2e", Namespace: policy.Namespace{Name: ns, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: want.Name}, got); err != nil {
			t.Errorf("%s/%s: %v", ns, want.Name, err)
			continue
		}
		if a, b := narrowRecord(t, got), narrowRecord(t, want); !slices.Equal(a, b) {
			t.Errorf("%s/%s: recorded narrowing changes\n  %s\nthe Go decision's\n  %s", ns, want.Name, strings.Join(a, "\n  "), strings.Join(b, "\n  "))
		}
		if a, b := podUser(got.Spec.SecurityContext), podUser(want.Spec.SecurityContext); a != b {
			t.Errorf("%s/%s: stored pod user %q, decided %q", ns, want.Name, a, b)
		}
		narrowed := podUser(got.Spec.SecurityContext) != podUser(raw.Spec.SecurityContext)
		for i, lists := range [][2][]corev1.Container{{got.Spec.InitContainers, want.Spec.InitContainers}, {got.Spec.Containers, want.Spec.Containers}} {
			rawList := raw.Spec.Containers
			if i == 0 {
				rawList = raw.Spec.InitContainers
			}
			for j, gc := range lists[0] {
				wc, rc := lists[1][j], rawList[j]
				if a, b := containerUser(gc.SecurityContext), containerUser(wc.SecurityContext); a != b {
					t.Errorf("%s/%s %s: stored user %q, decided %q", ns, want.Name, gc.Name, a, b)
				}
				gl, wl := gc.Resources.Limits[corev1.ResourceMemory], wc.Resources.Limits[corev1.ResourceMemory]
				if gl.Cmp(wl) != 0 {
					t.Errorf("%s/%s %s: stored memory limit %s, decided %s", ns, want.Name, gc.Name, gl.String(), wl.String())
				}
				_, hadRequest := rc.Resources.Requests[corev1.ResourceMemory]
				if gr := gc.Resources.Requests[corev1.ResourceMemory]; !hadRequest && !wl.IsZero() && gr.Cmp(wl) != 0 {
					t.Errorf("%s/%s %s: had no memory request and was given limit %s; stored request %s, but the API server defaults a missing request to the limit", ns, want.Name, gc.Name, wl.String(), gr.String())
				}
				rl := rc.Resources.Limits[corev1.ResourceMemory]
				narrowed = narrowed || gl.Cmp(rl) != 0 || containerUser(gc.SecurityContext) != containerUser(rc.SecurityContext)
			}
		}
		if mustNarrow := want.Name == "narrow-pod-nonroot" || want.Name == "narrow-containers-nonroot"; mustNarrow && !narrowed {
			t.Errorf("%s/%s: stored as it came; the narrowing rewrites did nothing", ns, want.Name)
		}
	}
}

// narrowRecord is what pod's change record says the narrowing rewrites did, sorted.
func narrowRecord(t *testing.T, pod *corev1.Pod) []string {
	t.Helper()
	changes, err := policy.DecodeChanges(pod.Annotations[policy.AnnotationChanges])
	if err != nil && pod.Annotations[policy.AnnotationChanges] != "" {
		t.Errorf("%s: record does not parse: %v", pod.Name, err)
	}
	var out []string
	for _, c := range changes {
		switch c.Reason {
		case policy.ReasonRunAsNonRootUser, policy.ReasonMemoryLimitFromRequest, policy.ReasonMemoryLimitDefault:
			out = append(out, changeKey(c)+": "+c.Reason)
		}
	}
	slices.Sort(out)
	return out
}

func podUser(sc *corev1.PodSecurityContext) string {
	if sc == nil || sc.WindowsOptions == nil || sc.WindowsOptions.RunAsUserName == nil {
		return ""
	}
	return *sc.WindowsOptions.RunAsUserName
}

func containerUser(sc *corev1.SecurityContext) string {
	if sc == nil || sc.WindowsOptions == nil || sc.WindowsOptions.RunAsUserName == nil {
		return ""
	}
	return *sc.WindowsOptions.RunAsUserName
}
