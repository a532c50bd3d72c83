package policy

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestImagesToLookUp(t *testing.T) {
	enabled := Namespace{Name: "shop", Labels: map[string]string{LabelEnabled: "true"}}
	windowsSpec := func() corev1.PodSpec {
		return corev1.PodSpec{
			OS:               &corev1.PodOS{Name: corev1.Windows},
			InitContainers:   []corev1.Container{{Name: "init", Image: "example.com/init:1"}},
			Containers:       []corev1.Container{{Name: "app", Image: "example.com/app:1"}, {Name: "again", Image: "example.com/app:1"}, {Name: "log", Image: "example.com/log:2"}},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}},
		}
	}
	pod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: windowsSpec()}
		if edit != nil {
			edit(p)
		}
		return p
	}
	all := []string{"example.com/init:1", "example.com/app:1", "example.com/log:2"}
	hostProcess := true

	for _, tc := range []struct {
		name       string
		obj        any
		ns         Namespace
		op         Operation
		podSecrets bool
		want       ImageLookup
	}{
		{"a Windows pod waits, each image once, init containers too", pod(nil), enabled, Create, false, ImageLookup{Images: all, Wait: true}},
		{"its pull secrets only with podImagePullSecrets", pod(nil), enabled, Create, true, ImageLookup{Images: all, PullSecrets: []string{"regcred"}, Wait: true}},
		{"a workload template warms, never waits", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: windowsSpec()}}}, enabled, Create, false, ImageLookup{Images: all}},
		{"a namespace not opted in", pod(nil), Namespace{Name: "other"}, Create, false, ImageLookup{}},
		{"an excluded namespace", pod(nil), Namespace{Name: "kube-system", Labels: map[string]string{LabelEnabled: "true"}}, Create, false, ImageLookup{}},
		{"an object labelled skip", pod(func(p *corev1.Pod) { p.Labels = map[string]string{LabelSkip: "true"} }), enabled, Create, false, ImageLookup{}},
		{"a Linux pod", pod(func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Linux} }), enabled, Create, false, ImageLookup{}},
		{"a HostProcess pod runs on any build", pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: &hostProcess}}
		}), enabled, Create, false, ImageLookup{}},
		{"a build recorded by an earlier pass", pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnnotationBuild: "10.0.20348", AnnotationBuildSource: SourceImageManifest}
		}), enabled, Create, false, ImageLookup{}},
		{"an update (ephemeral containers) never chooses a build", pod(nil), enabled, Update, false, ImageLookup{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Default()
			p.PodImagePullSecrets = tc.podSecrets
			got := p.ImagesToLookUp(tc.obj, Facts{Operation: tc.op, Namespace: tc.ns})
			if !slices.Equal(got.Images, tc.want.Images) || !slices.Equal(got.PullSecrets, tc.want.PullSecrets) || got.Wait != tc.want.Wait {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDenyHoldsUnderLoad: with imagesWithoutWindows: deny, an image the resolver did not check because
// of its own bounds (Image.Busy) refuses the pod with a message to retry, as a Linux-only image would
// be refused; a registry's own failure, and warn, still fall back as before.
func TestDenyHoldsUnderLoad(t *testing.T) {
	facts := func(img Image) Facts {
		return Facts{Operation: Create, Namespace: Namespace{Name: "shop", Labels: map[string]string{LabelEnabled: "true"}},
			Images: map[string]Image{"example.com/app:ltsc2022": img}}
	}
	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: corev1.PodSpec{
			OS:         &corev1.PodOS{Name: corev1.Windows},
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app:ltsc2022"}}}}
	}
	busy := Image{Err: "wincompat's registry lookups are at capacity, try again shortly", Busy: true}
	failed := Image{Err: "example.com: registry unreachable"}
	linuxOnly := Image{Platforms: []Platform{{OS: "linux", Architecture: "amd64"}}}
	for _, tc := range []struct {
		name   string
		mode   string
		img    Image
		denied string
	}{
		{"deny, busy", ImagesWithoutWindowsDeny, busy, "could not be checked for a Windows entry now"},
		{"deny, Linux-only", ImagesWithoutWindowsDeny, linuxOnly, "has no Windows entry"},
		{"deny, the registry failed", ImagesWithoutWindowsDeny, failed, ""},
		{"warn, busy", ImagesWithoutWindowsWarn, busy, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Default()
			p.ImagesWithoutWindows = tc.mode
			d, err := p.Decide(pod(), facts(tc.img))
			if err != nil {
				t.Fatal(err)
			}
			if tc.denied == "" && d.Denied != "" || !strings.Contains(d.Denied, tc.denied) {
				t.Errorf("Denied %q, want %q", d.Denied, tc.denied)
			}
		})
	}
}
