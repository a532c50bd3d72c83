package audit

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/wincompat/wincompat/policy"
)

const busybox = "busybox:1.36"

var linuxOnly = policy.Image{Platforms: []policy.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}}

// admitted is the pod as the webhook leaves it when the registry said its sidecar has no Windows
// entry: the record is written by the policy itself, so that the audit reads admission's own words.
func admitted(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p := winPod(name, img2022)
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "log", Image: busybox})
	d, err := policy.Default().Decide(p, policy.Facts{Operation: policy.Create, Version: "test",
		Namespace: policy.Namespace{Name: "web", Labels: map[string]string{policy.LabelEnabled: "true"}},
		Images:    map[string]policy.Image{busybox: linuxOnly, img2022: {Platforms: []policy.Platform{win("10.0.20348.2227")}}}})
	if err != nil || d.Denied != "" || !strings.Contains(p.Annotations[policy.AnnotationChanges], "no Windows entry") {
		t.Fatalf("admission recorded no Linux-only image: %v %q %q", err, d.Denied, p.Annotations[policy.AnnotationChanges])
	}
	return p
}

// TestLinuxOnlyImageFromRecord: admission's record of an image with no Windows entry is a finding
// without --resolve-images; with it, the registry's answer of the run decides, and says it once.
func TestLinuxOnlyImageFromRecord(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{policy.LabelEnabled: "true"}}}
	// The image was changed after admission: the record speaks of another image.
	changed := admitted(t, "image-changed")
	changed.Spec.Containers[1].Image = "registry.example.com/log:2.0"
	objs := []client.Object{ns, admitted(t, "sidecar"), changed}
	const want = "linux-only-image Pod/sidecar: containers[log]: image " + busybox + " (linux/amd64, linux/arm64) has no Windows entry"

	sameFindings(t, "from the record", findings(run(t, Options{}, objs...), LinuxOnlyImage), []string{want})

	res := &fakeResolver{asked: map[string]int{}, images: map[string]policy.Image{busybox: linuxOnly}}
	sameFindings(t, "record and registry agree", findings(run(t, Options{Images: res}, objs...), LinuxOnlyImage), []string{want})

	// Rebuilt since with a Windows entry, under the same tag.
	res = &fakeResolver{asked: map[string]int{}, images: map[string]policy.Image{busybox: {Platforms: []policy.Platform{win("10.0.20348.2227")}}}}
	sameFindings(t, "the registry says otherwise now", findings(run(t, Options{Images: res}, objs...), LinuxOnlyImage), nil)

	// The registry does not answer: admission's record stands.
	res = &fakeResolver{asked: map[string]int{}, images: map[string]policy.Image{}}
	sameFindings(t, "the registry does not answer", findings(run(t, Options{Images: res}, objs...), LinuxOnlyImage), []string{want})
}

func owned(meta metav1.ObjectMeta, apiVersion, kind, name string, uid types.UID) metav1.ObjectMeta {
	meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	return meta
}

func linuxSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "ghcr.io/example/app:1.0"}}}
}

func meta(name string, uid types.UID) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "web", UID: uid}
}

// mixedObjects: an untainted Windows node (the AKS default) and Linux workloads and pods that choose no
// operating system, some controlled by others.
func mixedObjects() []client.Object {
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}, Spec: linuxSpec()}
	rs := func(m metav1.ObjectMeta) *appsv1.ReplicaSet {
		m.Labels = map[string]string{"app": "x"}
		return &appsv1.ReplicaSet{ObjectMeta: m, Spec: appsv1.ReplicaSetSpec{Template: tpl}}
	}
	job := func(m metav1.ObjectMeta) *batchv1.Job {
		m.Labels = map[string]string{"app": "x"}
		return &batchv1.Job{ObjectMeta: m, Spec: batchv1.JobSpec{Template: tpl}}
	}
	pod := func(m metav1.ObjectMeta) *corev1.Pod { return &corev1.Pod{ObjectMeta: m, Spec: linuxSpec()} }
	bound := pod(meta("bound", "p1"))
	bound.Spec.NodeName = "linux-0"
	pinnedPod := pod(meta("pinned", "p2"))
	pinnedPod.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
	done := pod(meta("done", "p3"))
	done.Status.Phase = corev1.PodSucceeded
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		node("win-0", b2022, true),
		// No labels: a selector on the template's labels picks its ReplicaSets and Jobs, not it.
		&appsv1.Deployment{ObjectMeta: meta("api", "d1"), Spec: appsv1.DeploymentSpec{Template: tpl}},
		rs(owned(meta("api-old", "r1"), "apps/v1", "Deployment", "api", "d1")),
		rs(owned(meta("api-new", "r2"), "apps/v1", "Deployment", "api", "d1")),
		rs(meta("orphan", "r3")),
		// Argo Rollouts' ReplicaSets: the audit does not read Rollouts.
		rs(owned(meta("canary-1", "r4"), "argoproj.io/v1alpha1", "Rollout", "canary", "x1")),
		&batchv1.CronJob{ObjectMeta: meta("report", "c1"), Spec: batchv1.CronJobSpec{Schedule: "@hourly", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}},
		job(owned(meta("report-1", "j1"), "batch/v1", "CronJob", "report", "c1")),
		pod(meta("bare", "p0")), bound, pinnedPod, done,
		pod(owned(meta("api-new-abc", "p4"), "apps/v1", "ReplicaSet", "api-new", "r2")),
		pod(owned(meta("wf-step", "p5"), "argoproj.io/v1alpha1", "Workflow", "wf", "x2")),
	}
}

// TestNoOSPinOwners: a ReplicaSet or Job whose Deployment or CronJob was read is reported through it;
// pods are reported while the scheduler may still place them, unless a workload the audit reads
// controls them.
func TestNoOSPinOwners(t *testing.T) {
	objs := mixedObjects()
	objects := func(rep *Report) []string {
		var out []string
		for _, f := range rep.Findings {
			if f.Kind == NoOSPin {
				out = append(out, f.Object)
			}
		}
		return out
	}
	rep := run(t, Options{}, objs...)
	sameFindings(t, "no-os-pin", objects(rep), []string{
		"CronJob/report", "Deployment/api", "Pod/bare", "Pod/wf-step", "ReplicaSet/canary-1", "ReplicaSet/orphan",
	})
	for _, f := range rep.Findings {
		if f.Object == "Pod/bare" && !strings.Contains(f.Detail, "not scheduled yet, may be placed onto Windows node win-0") {
			t.Errorf("Pod/bare: %q", f.Detail)
		}
	}

	// The selector picks the ReplicaSets and the Job but not their controllers: they speak for themselves.
	sel := labels.SelectorFromSet(labels.Set{"app": "x"})
	sameFindings(t, "with a selector", objects(run(t, Options{Selector: sel}, objs...)), []string{
		"Job/report-1", "ReplicaSet/api-new", "ReplicaSet/api-old", "ReplicaSet/canary-1", "ReplicaSet/orphan",
	})

	// Deployments could not be listed: their ReplicaSets are all the report can say.
	c := fake.NewClientBuilder().WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*appsv1.DeploymentList); ok {
				return apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", nil)
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	rep, err := Run(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameFindings(t, "deployments forbidden", objects(rep), []string{
		"CronJob/report", "Pod/bare", "Pod/wf-step", "ReplicaSet/api-new", "ReplicaSet/api-old", "ReplicaSet/canary-1", "ReplicaSet/orphan",
	})
}

// TestNoOSPinRuntimeClass: a RuntimeClass outside the catalog whose nodeSelector names the OS chooses
// it, as the webhook judges it; read from the cluster, and noted when it cannot be.
func TestNoOSPinRuntimeClass(t *testing.T) {
	withClass := func(name, class string) *appsv1.Deployment {
		spec := linuxSpec()
		spec.RuntimeClassName = ptr.To(class)
		return &appsv1.Deployment{ObjectMeta: meta(name, types.UID(name)), Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		node("win-0", b2022, true),
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc",
			Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{corev1.LabelOSStable: "linux"}}},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata"},
		withClass("sandboxed", "gvisor"),
		withClass("kata", "kata"),
	}
	sameFindings(t, "cluster RuntimeClasses", findings(run(t, Options{}, objs...), NoOSPin), []string{
		"no-os-pin Deployment/kata: chooses no operating system and its pods may be scheduled onto Windows node win-0; " + linuxFix,
	})

	c := fake.NewClientBuilder().WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*nodev1.RuntimeClassList); ok {
				return apierrors.NewForbidden(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, "", nil)
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	rep, err := Run(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := findings(rep, NoOSPin); len(got) != 2 || len(rep.Notes) != 1 || !strings.HasPrefix(rep.Notes[0], "RuntimeClasses: forbidden") {
		t.Errorf("without RuntimeClasses both are reported, with a note: %q, notes %q", got, rep.Notes)
	}
}
