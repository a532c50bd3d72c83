package audit

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

var webNamespace = policy.Namespace{Name: "web", Labels: map[string]string{policy.LabelEnabled: "true"}}

// readySpec is a Windows pod spec with run-time findings: two containers without a memory limit (one
// finding with a count), runAsNonRoot with no Windows user, and a subPath mount.
func readySpec() corev1.PodSpec {
	return corev1.PodSpec{
		OS:              &corev1.PodOS{Name: corev1.Windows},
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
		Containers: []corev1.Container{
			{Name: "app", Image: img2022, VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: `C:\app\app.conf`, SubPath: "app.conf"}}},
			{Name: "log", Image: img2022},
		},
		Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
}

// admit records on obj what the built-in policy decides, as the webhook would: the audit reads
// admission's own records, so a reason changed on one side alone fails here.
func admit(t *testing.T, obj any) {
	t.Helper()
	d, err := policy.Default().Decide(obj, policy.Facts{Operation: policy.Create, Version: "test", Namespace: webNamespace})
	if err != nil || d.Denied != "" || d.Skipped != "" {
		t.Fatalf("not admitted: %v %q %q", err, d.Denied, d.Skipped)
	}
}

func readyPod(t *testing.T, name string, owner *metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web"}, Spec: readySpec()}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	admit(t, p)
	return p
}

func readyDeployment(t *testing.T) (*appsv1.Deployment, *appsv1.ReplicaSet) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: meta("web", "uid-web"), Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: readySpec()}}}
	admit(t, d)
	recorded, err := policy.DecodeChanges(d.Spec.Template.Annotations[policy.AnnotationTemplateChanges])
	if err != nil || !slices.ContainsFunc(recorded, func(c policy.Change) bool { return c.Action == policy.Warn }) {
		t.Fatalf("no readiness warning recorded on the template (%v): %v", err, d.Spec.Template.Annotations)
	}
	// The Deployment controller copies the template, annotations and all.
	rs := &appsv1.ReplicaSet{ObjectMeta: owned(meta("web-1", "uid-rs"), "apps/v1", "Deployment", "web", "uid-web"),
		Spec: appsv1.ReplicaSetSpec{Template: *d.Spec.Template.DeepCopy()}}
	return d, rs
}

// readinessFindings are the report's readiness findings as "kind Object: field (and more)", the recorded
// reason left out: it is admission's text, checked by the classification itself.
func readinessFindings(rep *Report) []string {
	var out []string
	for _, f := range findings(rep, ReadinessKinds()...) {
		head, detail, _ := strings.Cut(f, ": ")
		field, _, _ := strings.Cut(detail, ": ")
		out = append(out, head+": "+field)
	}
	return out
}

func TestReadinessFindingsFromRecords(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: webNamespace.Labels}}
	d, rs := readyDeployment(t)
	rsRef := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "uid-rs", Controller: ptr.To(true)}
	// A StatefulSet whose template wincompat never recorded on (created before it was installed): its pods
	// speak for it.
	sts := &appsv1.StatefulSet{ObjectMeta: meta("db", "uid-db"), Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{Spec: readySpec()}}}
	stsRef := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "uid-db", Controller: ptr.To(true)}
	finished := readyPod(t, "done", nil)
	finished.Status.Phase = corev1.PodSucceeded
	objs := []client.Object{ns, d, rs, sts, readyPod(t, "bare", nil), readyPod(t, "web-1-a", rsRef), readyPod(t, "web-1-b", rsRef),
		readyPod(t, "db-0", stsRef), readyPod(t, "db-1", stsRef), finished}

	perObject := func(obj, suffix string) []string {
		return []string{
			"run-time-memory-no-limit " + obj + ": spec.containers[app].resources.limits.memory (and 1 more)" + suffix,
			"run-time-non-root-no-user " + obj + ": spec.containers[app].securityContext.runAsNonRoot = true (and 1 more)" + suffix,
			`run-time-subpath ` + obj + `: spec.containers[app].volumeMounts[C:\app\app.conf].subPath = "app.conf"` + suffix,
		}
	}
	want := slices.Concat(perObject("Pod/bare", ""), perObject("Deployment/web", ""),
		perObject("Pod/db-0", " in 2 pods of StatefulSet/db, whose template was not read or records no such warning"))
	sameFindings(t, "readiness", readinessFindings(run(t, Options{}, objs...)), want)

	// A selector that leaves the Deployment out: its ReplicaSet speaks for the template and its pods.
	selected := map[string]string{"app": "web"}
	rs.Labels = selected
	a, b := readyPod(t, "web-1-a", rsRef), readyPod(t, "web-1-b", rsRef)
	a.Labels, b.Labels = selected, selected
	objs = []client.Object{ns, d, rs, a, b}
	sameFindings(t, "ReplicaSet without its Deployment", readinessFindings(run(t, Options{Selector: labels.SelectorFromSet(selected)}, objs...)),
		perObject("ReplicaSet/web-1", ""))

	// Without any workload read, the pods speak: one finding per controller and rule.
	objs = []client.Object{ns, readyPod(t, "web-1-a", rsRef), readyPod(t, "web-1-b", rsRef)}
	sameFindings(t, "pods alone", readinessFindings(run(t, Options{}, objs...)),
		perObject("Pod/web-1-a", " in 2 pods of ReplicaSet/web-1, whose template was not read or records no such warning"))
}

// Every row of the readiness table is a finding kind of its own, and the audit classifies each row's
// recorded warning back to it: a new row needs no edit here.
func TestReadinessKindsFromTable(t *testing.T) {
	rules := policy.ReadinessRules()
	kinds := ReadinessKinds()
	if len(rules) == 0 || len(kinds) != len(rules) {
		t.Fatalf("rules %v, kinds %v", rules, kinds)
	}
	r := newReadiness(newControllers(nil), newSink())
	for i, rule := range rules {
		if kinds[i] != "run-time-"+string(rule) || !r.isReadiness(rule) {
			t.Errorf("rule %s: kind %s", rule, kinds[i])
		}
	}
	if r.isReadiness(policy.RuleWindowsOS) {
		t.Error("a rewrite's rule taken for a readiness warning")
	}
}

// Thousands of containers with one finding are one finding, and a long recorded value is cut.
func TestReadinessBounded(t *testing.T) {
	spec := readySpec()
	spec.SecurityContext = nil
	spec.Containers[0].VolumeMounts[0].SubPath = strings.Repeat("é", 5000)
	for i := range 10000 {
		spec.Containers = append(spec.Containers, corev1.Container{Name: "c" + strconv.Itoa(i), Image: img2022})
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "web"}, Spec: spec}
	admit(t, p)
	// A record edited by hand: a path as long as an annotation allows, still of a readiness rule.
	edited := readyPod(t, "edited", nil)
	changes, err := policy.DecodeChanges(edited.Annotations[policy.AnnotationChanges])
	if err != nil {
		t.Fatal(err)
	}
	for i := range changes {
		changes[i].Path = strings.Replace(changes[i].Path, "[app]", "["+strings.Repeat("a", 200000)+"]", 1)
	}
	edited.Annotations[policy.AnnotationChanges] = policy.EncodeChanges(changes)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: webNamespace.Labels}}
	got := findings(run(t, Options{}, ns, p, edited), ReadinessKinds()...)
	if len(got) != 5 {
		t.Fatalf("want a memory and a subPath finding on one pod, and three on the other, got %d", len(got))
	}
	for _, f := range got {
		if len(f) > 1000 {
			t.Errorf("detail not bounded: %d bytes", len(f))
		}
	}
	if !slices.ContainsFunc(got, func(f string) bool {
		// The record keeps 32 findings of one rule: the first, and 31 more.
		return strings.Contains(f, "Pod/big: ") && strings.Contains(f, "(and 31 more)")
	}) {
		t.Errorf("no count of the big pod's containers: %q", got)
	}
}
