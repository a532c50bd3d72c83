package webhook

// End-to-end tests of issue 3: the real kube-apiserver calls wincompat over TLS through wincompat's
// real MutatingWebhookConfiguration (deploy/webhook), and its answer, not our reading of validation
// code, decides. Each test function gets its own control plane and in-process `wincompat serve`, and
// each case its own namespace.

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// admissionReviews is the sum of wincompat_admission_total over all its label values: how many reviews
// wincompat has answered in this process. The in-process server registers its series in
// controller-runtime's registry, the one its /metrics endpoint serves.
func admissionReviews(t *testing.T) float64 {
	return e2eutil.InProcessCounter(t, "wincompat_admission_total", "")
}

// webhookRequests is how many reviews the in-process server was sent on path, as controller-runtime's
// instrumentation of each registered path counts them.
func webhookRequests(t *testing.T, path string) float64 {
	return e2eutil.InProcessCounter(t, "controller_runtime_webhook_requests_total", "webhook", path)
}

// Every field of the strip table (policy/strip.go), set on a pod, its security context, a container and an
// init container; plus the rewrites (policy/rewrite.go) that this pod exercises.
var (
	strippedPodFields = []string{
		"spec.hostPID", "spec.hostIPC", "spec.shareProcessNamespace", "spec.hostUsers", "spec.resources",
	}
	strippedPodSecurityContextFields = []string{
		"seLinuxOptions", "seccompProfile", "appArmorProfile", "fsGroup", "fsGroupChangePolicy", "runAsUser",
		"runAsGroup", "supplementalGroups", "supplementalGroupsPolicy", "seLinuxChangePolicy", "sysctls",
	}
	strippedContainerFields = []string{
		"seLinuxOptions", "seccompProfile", "appArmorProfile", "capabilities", "readOnlyRootFilesystem",
		"privileged", "allowPrivilegeEscalation", "procMount", "runAsUser", "runAsGroup",
	}
)

// containerResources request huge pages, which need a cpu or memory request next to them and requests
// equal to limits.
func containerResources() corev1.ResourceRequirements {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("64Mi"),
		"hugepages-2Mi":       resource.MustParse("4Mi"),
	}
	return corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
}

// everyLinuxFieldPod is a Windows pod carrying every field of the strip table. Where the field takes
// a boolean, the container says true and the init container false: both are rejected.
func everyLinuxFieldPod(ns, name string) *corev1.Pod {
	containerSC := func(b bool) *corev1.SecurityContext {
		return &corev1.SecurityContext{
			SELinuxOptions:           &corev1.SELinuxOptions{Level: "s0:c123,c456"},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			AppArmorProfile:          &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
			Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
			ReadOnlyRootFilesystem:   ptr.To(b),
			Privileged:               ptr.To(b),
			AllowPrivilegeEscalation: ptr.To(b),
			ProcMount:                ptr.To(corev1.DefaultProcMount),
			RunAsUser:                ptr.To[int64](1000),
			RunAsGroup:               ptr.To[int64](3000),
			RunAsNonRoot:             ptr.To(true), // kept
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			OS:                    &corev1.PodOS{Name: corev1.Windows},
			HostPID:               true,
			HostIPC:               true,
			ShareProcessNamespace: ptr.To(true),
			// The user-namespace request (UserNamespacesSupport, on by default in v1.36). It is invalid
			// together with hostPID/hostIPC, but validation only ever sees the mutated pod, where all
			// three are gone.
			HostUsers: ptr.To(false),
			// Pod-level resources (PodLevelResources, on by default since v1.34).
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
			SecurityContext: &corev1.PodSecurityContext{
				SELinuxOptions:           &corev1.SELinuxOptions{Level: "s0:c123,c456"},
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				AppArmorProfile:          &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
				FSGroup:                  ptr.To[int64](2000),
				FSGroupChangePolicy:      ptr.To(corev1.FSGroupChangeOnRootMismatch),
				RunAsUser:                ptr.To[int64](1000),
				RunAsGroup:               ptr.To[int64](3000),
				SupplementalGroups:       []int64{4000},
				SupplementalGroupsPolicy: ptr.To(corev1.SupplementalGroupsPolicyStrict),
				SELinuxChangePolicy:      ptr.To(corev1.SELinuxChangePolicyMountOption),
				Sysctls:                  []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}},
				RunAsNonRoot:             ptr.To(true),                                                                  // kept
				WindowsOptions:           &corev1.WindowsSecurityContextOptions{RunAsUserName: ptr.To("ContainerUser")}, // kept
			},
			InitContainers: []corev1.Container{{
				Name: "init", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022",
				SecurityContext: containerSC(false),
			}},
			Containers: []corev1.Container{{
				Name: "app", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022",
				SecurityContext: containerSC(true),
				Resources:       containerResources(),
				VolumeMounts:    []corev1.VolumeMount{{Name: "cache", MountPath: `C:\cache`}},
			}},
			Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("64Mi")),
			}}}},
		},
	}
}

// TestWebhookStripsEveryLinuxOnlyField: issue 3, requirement 1.
func TestWebhookStripsEveryLinuxOnlyField(t *testing.T) {
	cl := e2eutil.StartCluster(t)
	const ns = "strip"
	cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})

	var pod corev1.Pod
	if err := cl.CreateAndGet(t, everyLinuxFieldPod(ns, "every-field"), &pod); err != nil {
		t.Fatalf("the Windows pod with every Linux-only field was not admitted: %v", err)
	}
	warned := cl.Warnings.Take()
	spec := pod.Spec

	// Pod level: every stripped field is gone.
	if spec.HostPID || spec.HostIPC || spec.ShareProcessNamespace != nil || spec.HostUsers != nil || spec.Resources != nil {
		t.Errorf("pod-level Linux fields survived: hostPID=%v hostIPC=%v shareProcessNamespace=%v hostUsers=%v resources=%v",
			spec.HostPID, spec.HostIPC, spec.ShareProcessNamespace, spec.HostUsers, spec.Resources)
	}
	// The pod security context is exactly what Windows keeps.
	wantPodSC := corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), WindowsOptions: &corev1.WindowsSecurityContextOptions{RunAsUserName: ptr.To("ContainerUser")}}
	if spec.SecurityContext == nil || !equality.Semantic.DeepEqual(*spec.SecurityContext, wantPodSC) {
		t.Errorf("spec.securityContext = %+v, want only runAsNonRoot and windowsOptions: %+v", spec.SecurityContext, wantPodSC)
	}
	// Container and init container: only runAsNonRoot is left.
	wantSC := corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		if c.SecurityContext == nil || !equality.Semantic.DeepEqual(*c.SecurityContext, wantSC) {
			t.Errorf("container %s securityContext = %+v, want %+v", c.Name, c.SecurityContext, wantSC)
		}
	}
	// Huge pages go; cpu and memory stay.
	want := containerResources()
	delete(want.Requests, "hugepages-2Mi")
	delete(want.Limits, "hugepages-2Mi")
	if got := spec.Containers[0].Resources; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("container resources = %+v, want %+v", got, want)
	}
	// emptyDir: node disk, sizeLimit kept.
	if ed := spec.Volumes[0].EmptyDir; ed == nil || ed.Medium != corev1.StorageMediumDefault || ed.SizeLimit == nil || ed.SizeLimit.Cmp(resource.MustParse("64Mi")) != 0 {
		t.Errorf("emptyDir = %+v, want medium \"\" and sizeLimit 64Mi", ed)
	}
	// Scheduling: the image's build, the Windows taint, and no RuntimeClass since none exists here.
	wantSelector := map[string]string{corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: "10.0.20348"}
	if !equality.Semantic.DeepEqual(spec.NodeSelector, wantSelector) {
		t.Errorf("nodeSelector = %v, want %v", spec.NodeSelector, wantSelector)
	}
	if n := e2eutil.CountToleration(&pod, e2eutil.WindowsToleration); n != 1 {
		t.Errorf("the os=windows:NoSchedule toleration appears %d times, want once: %+v", n, spec.Tolerations)
	}
	if spec.RuntimeClassName != nil {
		t.Errorf("runtimeClassName = %q, but no RuntimeClass exists in this cluster", *spec.RuntimeClassName)
	}
	if spec.OS == nil || spec.OS.Name != corev1.Windows {
		t.Errorf("spec.os = %+v, want windows", spec.OS)
	}

	// Annotations.
	for key, want := range map[string]string{
		policy.AnnotationVersion:     "e2e",
		policy.AnnotationBuild:       "10.0.20348",
		policy.AnnotationBuildSource: "image",
	} {
		if got := pod.Annotations[key]; got != want {
			t.Errorf("annotation %s = %q, want %q", key, got, want)
		}
	}
	changes := e2eutil.DecodeChanges(t, pod.Annotations, policy.AnnotationChanges)
	var wantStrips []string
	wantStrips = append(wantStrips, strippedPodFields...)
	for _, f := range strippedPodSecurityContextFields {
		wantStrips = append(wantStrips, "spec.securityContext."+f)
	}
	for _, c := range []string{"spec.containers[app]", "spec.initContainers[init]"} {
		for _, f := range strippedContainerFields {
			wantStrips = append(wantStrips, c+".securityContext."+f)
		}
	}
	for _, path := range wantStrips {
		if !e2eutil.HasChange(changes, policy.Strip, path) {
			t.Errorf("%s does not record the strip of %s", policy.AnnotationChanges, path)
		}
	}
	for _, path := range []string{
		"spec.volumes[cache].emptyDir.medium",
		"spec.containers[app].resources.requests[hugepages-2Mi]",
		"spec.containers[app].resources.limits[hugepages-2Mi]",
	} {
		if !e2eutil.HasChange(changes, policy.Rewrite, path) {
			t.Errorf("%s does not record the rewrite of %s", policy.AnnotationChanges, path)
		}
	}

	// Warnings: wincompat's, in the API server's response, one per change class.
	ours := e2eutil.WincompatWarnings(warned)
	if len(ours) == 0 {
		t.Fatalf("no wincompat warnings in the API server's response; warnings: %q", warned)
	}
	for _, word := range []string{"runAsUser", "capabilities", "hugepages-2Mi", "emptyDir.medium"} {
		if !slices.ContainsFunc(ours, func(w string) bool { return strings.Contains(w, word) }) {
			t.Errorf("no wincompat warning mentions %s: %q", word, ours)
		}
	}
	for i, w := range ours {
		if slices.Contains(ours[i+1:], w) {
			t.Errorf("warning repeated: %q", w)
		}
	}
}

// TestWebhookScope: issue 3, requirement 2. Outside an opted-in namespace wincompat does nothing (so the
// API server rejects a Windows pod with Linux fields), and Linux pods never reach it at all.
func TestWebhookScope(t *testing.T) {
	cl := e2eutil.StartCluster(t)
	ctx := context.Background()
	const labelled, unlabelled, mistyped, optedOut = "scope-enabled", "scope-unlabelled", "scope-yes", "scope-false"
	cl.NewNamespace(t, labelled, map[string]string{policy.LabelEnabled: "true"})
	cl.NewNamespace(t, unlabelled, nil)
	cl.NewNamespace(t, mistyped, map[string]string{policy.LabelEnabled: "yes"})
	cl.NewNamespace(t, optedOut, map[string]string{policy.LabelEnabled: "false"})

	// A mistyped opt-in: the pod is not changed and the API server refuses it, as without wincompat, but
	// the warning of pods-opt-in.wincompat.io comes back with the refusal: the API server's warning
	// recorder writes each warning into the response's headers as admission adds it
	// (k8s.io/apiserver pkg/endpoints/filters/warning.go), before validation fails, and client-go,
	// as kubectl, reads the warnings of an error response too (rest.Request.transformResponse).
	t.Run("mistyped opt-in label: refused, with a warning naming the label and the fix", func(t *testing.T) {
		before, optIn := admissionReviews(t), webhookRequests(t, server.OptInPath)
		cl.Warnings.Take()
		err := cl.C.Create(ctx, everyLinuxFieldPod(mistyped, "every-field"))
		if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot be set for a windows pod") {
			t.Fatalf("want the API server's own refusal of a Windows pod with Linux-only fields, got %v", err)
		}
		want := []string{`wincompat: left this Windows pod unchanged: in namespace scope-yes, label wincompat.io/enabled=yes does not opt the namespace in: only the value "true" does; set wincompat.io/enabled=true (kubectl label namespace scope-yes wincompat.io/enabled=true --overwrite)`}
		if got := e2eutil.WincompatWarnings(cl.Warnings.Take()); !slices.Equal(got, want) {
			t.Errorf("warnings with the refusal:\n got %q\nwant %q", got, want)
		}
		if d := webhookRequests(t, server.OptInPath) - optIn; d != 1 {
			t.Errorf("the opt-in check was sent %v reviews, want 1", d)
		}
		if d := admissionReviews(t) - before; d != 0 {
			t.Errorf("wincompat's mutating webhooks answered %v reviews in a namespace that is not opted in", d)
		}
	})
	// Nothing else reaches the check: a Linux pod there, a Windows pod where the label says no.
	t.Run("Linux pods and a deliberate no never reach the opt-in check", func(t *testing.T) {
		optIn := webhookRequests(t, server.OptInPath)
		cl.Warnings.Take()
		var pod corev1.Pod
		if err := cl.CreateAndGet(t, e2eutil.LinuxPod(mistyped, "linux", nil), &pod); err != nil {
			t.Fatalf("Linux pod rejected: %v", err)
		}
		if err := cl.C.Create(ctx, everyLinuxFieldPod(optedOut, "every-field")); !apierrors.IsInvalid(err) {
			t.Errorf("want the API server's refusal where the label says false, got %v", err)
		}
		if err := cl.C.Create(ctx, everyLinuxFieldPod(unlabelled, "every-field-2")); !apierrors.IsInvalid(err) {
			t.Errorf("want the API server's refusal in an unlabelled namespace, got %v", err)
		}
		if got := e2eutil.WincompatWarnings(cl.Warnings.Take()); len(got) > 0 {
			t.Errorf("wincompat warned: %q", got)
		}
		if d := webhookRequests(t, server.OptInPath) - optIn; d != 0 {
			t.Errorf("the opt-in check was sent %v reviews, want none", d)
		}
	})

	t.Run("unlabelled namespace rejects the Windows pod", func(t *testing.T) {
		before := admissionReviews(t)
		err := cl.C.Create(ctx, everyLinuxFieldPod(unlabelled, "every-field"))
		if err == nil {
			t.Fatal("a Windows pod with Linux-only fields was admitted in a namespace without " + policy.LabelEnabled)
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot be set for a windows pod") {
			t.Errorf("rejected, but not by Windows validation: %v", err)
		}
		if d := admissionReviews(t) - before; d != 0 {
			t.Errorf("wincompat answered %v reviews for a pod in an unlabelled namespace; the namespaceSelector should keep it away", d)
		}
	})

	for _, tc := range []struct {
		name string
		os   *corev1.PodOS
	}{
		{"linux-declared", &corev1.PodOS{Name: corev1.Linux}},
		{"no-os", nil},
	} {
		t.Run("Linux pod "+tc.name+" never reaches wincompat", func(t *testing.T) {
			before := admissionReviews(t)
			var pod corev1.Pod
			if err := cl.CreateAndGet(t, e2eutil.LinuxPod(labelled, tc.name, tc.os), &pod); err != nil {
				t.Fatalf("Linux pod rejected: %v", err)
			}
			if d := admissionReviews(t) - before; d != 0 {
				t.Errorf("wincompat_admission_total moved by %v for a Linux pod: matchConditions should keep it away", d)
			}
			if got := e2eutil.WincompatAnnotations(pod.Annotations); len(got) > 0 {
				t.Errorf("Linux pod carries wincompat annotations %v", got)
			}
			sc := pod.Spec.SecurityContext
			if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.SeccompProfile == nil ||
				pod.Spec.Containers[0].SecurityContext.Capabilities == nil {
				t.Errorf("Linux pod's security context changed: %+v", sc)
			}
			if !equality.Semantic.DeepEqual(pod.Spec.OS, tc.os) || len(pod.Spec.NodeSelector) > 0 || e2eutil.CountToleration(&pod, e2eutil.WindowsToleration) > 0 {
				t.Errorf("Linux pod rescheduled: os=%v nodeSelector=%v tolerations=%v", pod.Spec.OS, pod.Spec.NodeSelector, pod.Spec.Tolerations)
			}
		})
	}

	// The counter that stayed still above is live: a Windows pod moves it.
	t.Run("Windows pod reaches wincompat", func(t *testing.T) {
		before := admissionReviews(t)
		var pod corev1.Pod
		if err := cl.CreateAndGet(t, e2eutil.WindowsPod(labelled, "windows"), &pod); err != nil {
			t.Fatal(err)
		}
		if d := admissionReviews(t) - before; d < 1 {
			t.Errorf("wincompat_admission_total moved by %v for a Windows pod, want at least 1", d)
		}
		if pod.Annotations[policy.AnnotationVersion] != "e2e" {
			t.Errorf("Windows pod not mutated: annotations %v", pod.Annotations)
		}
	})
}

// TestWebhookPodSecurityRestricted: issue 3, requirement 4. Pod Security "restricted" still requires
// runAsNonRoot of Windows pods; wincompat keeps it and sets it where it is missing.
func TestWebhookPodSecurityRestricted(t *testing.T) {
	cl := e2eutil.StartCluster(t)
	ctx := context.Background()
	const opted, baseline = "restricted-wincompat", "restricted-only"
	restricted := map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
	cl.NewNamespace(t, opted, map[string]string{policy.LabelEnabled: "true", "pod-security.kubernetes.io/enforce": "restricted"})
	cl.NewNamespace(t, baseline, restricted)

	// chartStyle is the security context of a typical hardened Linux chart.
	chartStyle := func(ns string) *corev1.Pod {
		pod := e2eutil.WindowsPod(ns, "chart-style")
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsUser: ptr.To[int64](1000), RunAsNonRoot: ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
			RunAsUser: ptr.To[int64](1000), RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		return pod
	}
	// runAsUserOnly names a Linux user and nothing else: no runAsNonRoot.
	runAsUserOnly := func(ns string) *corev1.Pod { return e2eutil.WindowsPod(ns, "run-as-user-only") }
	// bare has no security context at all: valid for Windows as it is, but not restricted.
	bare := func(ns string) *corev1.Pod {
		pod := e2eutil.WindowsPod(ns, "bare")
		pod.Spec.SecurityContext = nil
		return pod
	}

	for _, tc := range []struct {
		name string
		pod  func(ns string) *corev1.Pod
		// baselineErr is what the API server says without wincompat.
		baselineErr string
	}{
		{"chart-style", chartStyle, "cannot be set for a windows pod"},
		{"runAsUser only", runAsUserOnly, "cannot be set for a windows pod"},
		{"no securityContext", bare, "violates PodSecurity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pod corev1.Pod
			if err := cl.CreateAndGet(t, tc.pod(opted), &pod); err != nil {
				t.Fatalf("rejected in a restricted namespace with wincompat: %v", err)
			}
			sc := pod.Spec.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Errorf("stored spec.securityContext.runAsNonRoot is not true: %+v", sc)
			}
			if sc != nil && sc.RunAsUser != nil {
				t.Errorf("runAsUser survived: %d", *sc.RunAsUser)
			}
			if csc := pod.Spec.Containers[0].SecurityContext; csc != nil && csc.RunAsNonRoot != nil && !*csc.RunAsNonRoot {
				t.Errorf("container runAsNonRoot turned false")
			}
			if tc.name == "chart-style" {
				if csc := pod.Spec.Containers[0].SecurityContext; csc == nil || csc.RunAsNonRoot == nil || !*csc.RunAsNonRoot {
					t.Errorf("container runAsNonRoot: true was not kept: %+v", csc)
				}
			}

			err := cl.C.Create(ctx, tc.pod(baseline))
			if err == nil {
				t.Fatalf("admitted in a restricted namespace without wincompat: the baseline is wrong")
			}
			if !strings.Contains(err.Error(), tc.baselineErr) {
				t.Errorf("without wincompat, rejected for another reason than %q: %v", tc.baselineErr, err)
			}
		})
	}
}

// TestWebhookDown: issue 3, requirement 7. failurePolicy Fail holds Windows pods in opted-in namespaces
// when wincompat is down, and only them.
func TestWebhookDown(t *testing.T) {
	cl := e2eutil.StartCluster(t)
	ctx := context.Background()
	const ns = "down"
	cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
	cl.StopServing()

	err := cl.C.Create(ctx, e2eutil.WindowsPod(ns, "windows"))
	if err == nil {
		t.Fatal("a Windows pod was admitted while wincompat was down")
	}
	for _, want := range []string{"failed calling webhook", "pods.wincompat.io"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q: %v", want, err)
		}
	}
	if err := cl.C.Create(ctx, e2eutil.LinuxPod(ns, "linux", &corev1.PodOS{Name: corev1.Linux})); err != nil {
		t.Errorf("a Linux pod was held by the missing webhook: %v", err)
	}
	if err := cl.C.Create(ctx, e2eutil.LinuxPod(ns, "no-os", nil)); err != nil {
		t.Errorf("a pod without spec.os was held by the missing webhook: %v", err)
	}
}
