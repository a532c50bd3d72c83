package e2eutil

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
)

// InstallAdmissionPolicies creates what the chart installs for engine hybrid, as it orders it: the params
// first (a binding without them refuses what it selects), then each policy before its binding.
func InstallAdmissionPolicies(ctx context.Context, t *testing.T, c client.Client, r admissionpolicy.Rendering) {
	t.Helper()
	Create(ctx, t, c, &r.Params)
	for i := range r.Policies {
		Create(ctx, t, c, &r.Policies[i])
		Create(ctx, t, c, &r.Bindings[i])
	}
}

// WaitForAdmissionPolicy waits until the API server applies every admission policy: it loads them from
// its informer a moment after they are created, each on its own. One probe per shape of object, in ns,
// where no webhook may act.
func WaitForAdmissionPolicy(t *testing.T, c client.Client, nsMAP string) {
	t.Helper()
	spec := func() corev1.PodSpec {
		return corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows},
			Containers: []corev1.Container{{Name: "probe", Image: "probe", SecurityContext: &corev1.SecurityContext{RunAsGroup: new(int64(1))}}}}
	}
	labels := map[string]string{"app": "probe"}
	tpl := func() corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec()}
	}
	jobTpl := func() corev1.PodTemplateSpec {
		t := tpl()
		t.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		return t
	}
	probes := []struct {
		make        func() client.Object
		annotations func(client.Object) map[string]string
	}{
		{func() client.Object {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: nsMAP}, Spec: spec()}
		},
			func(o client.Object) map[string]string { return o.GetAnnotations() }},
		{func() client.Object {
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: nsMAP},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tpl()}}
		}, func(o client.Object) map[string]string { return o.(*appsv1.Deployment).Spec.Template.Annotations }},
		{func() client.Object {
			return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: nsMAP},
				Spec: batchv1.CronJobSpec{Schedule: "0 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTpl()}}}}
		}, func(o client.Object) map[string]string {
			return o.(*batchv1.CronJob).Spec.JobTemplate.Spec.Template.Annotations
		}},
		{func() client.Object {
			return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: nsMAP}, Template: tpl()}
		}, func(o client.Object) map[string]string { return o.(*corev1.PodTemplate).Template.Annotations }},
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range probes {
		for {
			obj := p.make()
			err := c.Create(context.Background(), obj, client.DryRunAll)
			if a := p.annotations(obj); err == nil && (a[policy.AnnotationChanges] != "" || a[policy.AnnotationTemplateChanges] != "") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the admission policy does not mutate a Windows %T after 30s: %v", obj, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
