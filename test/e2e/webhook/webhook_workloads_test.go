package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// storedTemplate returns the pod template of a stored workload (the pod itself, as a template, for a Pod).
func storedTemplate(t *testing.T, u *unstructured.Unstructured) corev1.PodTemplateSpec {
	t.Helper()
	var m map[string]any
	if u.GetKind() == "Pod" {
		m = map[string]any{"metadata": u.Object["metadata"], "spec": u.Object["spec"]}
	} else {
		var found bool
		var err error
		m, found, err = unstructured.NestedMap(u.Object, e2eutil.TemplatePaths[u.GetKind()]...)
		if err != nil || !found {
			t.Fatalf("%s %s: no pod template (%v)", u.GetKind(), u.GetName(), err)
		}
	}
	var tpl corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &tpl); err != nil {
		t.Fatalf("%s %s: decoding its pod template: %v", u.GetKind(), u.GetName(), err)
	}
	return tpl
}

// linuxTemplate is a Windows pod template with a hardened Linux chart's security context.
func linuxTemplate(restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "tpl"}},
		Spec: corev1.PodSpec{
			OS:            &corev1.PodOS{Name: corev1.Windows},
			RestartPolicy: restart,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000), FSGroup: ptr.To[int64](2000),
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "app", Image: "mcr.microsoft.com/windows/servercore:ltsc2022",
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: ptr.To[int64](1000), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
		},
	}
}

// TestWebhookWorkloadTemplates: issue 3, requirement 3. The eight workload kinds, declared Windows with
// Linux-only fields in their templates, are stored with those fields stripped; a Pod made from each
// stored template is then mutated by the pod webhook.
func TestWebhookWorkloadTemplates(t *testing.T) {
	cl := e2eutil.StartCluster(t)
	const ns = "workloads"
	cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})

	meta := func(kind string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "tpl-" + strings.ToLower(kind), Namespace: ns}
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "tpl"}}
	always, never := linuxTemplate(corev1.RestartPolicyAlways), linuxTemplate(corev1.RestartPolicyNever)
	for _, tc := range []struct {
		kind string
		obj  client.Object
	}{
		{"Deployment", &appsv1.Deployment{ObjectMeta: meta("Deployment"), Spec: appsv1.DeploymentSpec{Selector: selector, Template: always}}},
		{"StatefulSet", &appsv1.StatefulSet{ObjectMeta: meta("StatefulSet"), Spec: appsv1.StatefulSetSpec{Selector: selector, Template: always}}},
		{"DaemonSet", &appsv1.DaemonSet{ObjectMeta: meta("DaemonSet"), Spec: appsv1.DaemonSetSpec{Selector: selector, Template: always}}},
		{"Job", &batchv1.Job{ObjectMeta: meta("Job"), Spec: batchv1.JobSpec{Template: never}}},
		{"CronJob", &batchv1.CronJob{ObjectMeta: meta("CronJob"), Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: never}}}}},
		{"ReplicaSet", &appsv1.ReplicaSet{ObjectMeta: meta("ReplicaSet"), Spec: appsv1.ReplicaSetSpec{Selector: selector, Template: always}}},
		{"ReplicationController", &corev1.ReplicationController{ObjectMeta: meta("ReplicationController"),
			Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"app": "tpl"}, Template: &always}}},
		{"PodTemplate", &corev1.PodTemplate{ObjectMeta: meta("PodTemplate"), Template: always}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			cl.Warnings.Take()
			if err := cl.C.Create(context.Background(), tc.obj); err != nil {
				t.Fatalf("%s with a Windows template rejected: %v", tc.kind, err)
			}
			if len(e2eutil.WincompatWarnings(cl.Warnings.Take())) == 0 {
				t.Errorf("no wincompat warning when creating the %s", tc.kind)
			}
			stored := cl.GetStored(t, tc.kind, ns, tc.obj.GetName())
			tpl := storedTemplate(t, stored)

			// The strip table, applied to the template.
			sc := tpl.Spec.SecurityContext
			wantPodSC := corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), WindowsOptions: &corev1.WindowsSecurityContextOptions{RunAsUserName: ptr.To("ContainerUser")}}
			if sc == nil || !equality.Semantic.DeepEqual(*sc, wantPodSC) {
				t.Errorf("template spec.securityContext = %+v, want runAsNonRoot kept and the non-root intent as runAsUserName %+v", sc, wantPodSC)
			}
			if csc := tpl.Spec.Containers[0].SecurityContext; csc != nil && !equality.Semantic.DeepEqual(*csc, corev1.SecurityContext{}) {
				t.Errorf("template container securityContext = %+v, want empty", csc)
			}
			if tpl.Spec.OS == nil || tpl.Spec.OS.Name != corev1.Windows {
				t.Errorf("template spec.os = %+v", tpl.Spec.OS)
			}
			// Scheduling waits for the Pod: templates get only what validation needs.
			if len(tpl.Spec.NodeSelector) > 0 || e2eutil.CountToleration(&corev1.Pod{Spec: tpl.Spec}, e2eutil.WindowsToleration) > 0 || tpl.Spec.RuntimeClassName != nil {
				t.Errorf("template got scheduling: nodeSelector=%v tolerations=%v", tpl.Spec.NodeSelector, tpl.Spec.Tolerations)
			}
			changes := e2eutil.DecodeChanges(t, tpl.Annotations, policy.AnnotationTemplateChanges)
			for _, path := range []string{
				"spec.securityContext.runAsUser", "spec.securityContext.runAsGroup", "spec.securityContext.fsGroup",
				"spec.securityContext.seccompProfile", "spec.containers[app].securityContext.capabilities",
				"spec.containers[app].securityContext.allowPrivilegeEscalation", "spec.containers[app].securityContext.runAsUser",
			} {
				if !e2eutil.HasChange(changes, policy.Strip, path) {
					t.Errorf("%s does not record the strip of %s", policy.AnnotationTemplateChanges, path)
				}
			}

			pod, err := cl.CreatePodOf(t, stored)
			if err != nil {
				t.Fatalf("the Pod of the stored %s template was rejected: %v", tc.kind, err)
			}
			if pod.Annotations[policy.AnnotationVersion] != "e2e" {
				t.Errorf("the Pod of the %s was not processed by the pod webhook: annotations %v", tc.kind, pod.Annotations)
			}
			wantSelector := map[string]string{corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: "10.0.20348"}
			if !equality.Semantic.DeepEqual(pod.Spec.NodeSelector, wantSelector) {
				t.Errorf("the Pod of the %s: nodeSelector = %v, want %v", tc.kind, pod.Spec.NodeSelector, wantSelector)
			}
			if e2eutil.CountToleration(pod, e2eutil.WindowsToleration) != 1 {
				t.Errorf("the Pod of the %s: tolerations = %+v", tc.kind, pod.Spec.Tolerations)
			}
		})
	}
}

// pinnedToLinux reports whether a pod spec (unstructured, as rendered) can only run on Linux nodes: its
// nodeSelector says linux, or every term of its required node affinity rules Windows out. Written
// independently of policy's trigger, as the oracle for what wincompat must leave alone.
func pinnedToLinux(spec map[string]any) bool {
	for _, key := range []string{corev1.LabelOSStable, "beta.kubernetes.io/os"} {
		if v, _, _ := unstructured.NestedString(spec, "nodeSelector", key); v == "linux" {
			return true
		}
	}
	terms, _, _ := unstructured.NestedSlice(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	if len(terms) == 0 {
		return false
	}
	for _, term := range terms {
		exprs, _, _ := unstructured.NestedSlice(term.(map[string]any), "matchExpressions")
		excludesWindows := false
		for _, e := range exprs {
			expr := e.(map[string]any)
			if key := expr["key"]; key != corev1.LabelOSStable && key != "beta.kubernetes.io/os" {
				continue
			}
			values, _, _ := unstructured.NestedStringSlice(expr, "values")
			hasWindows := false
			for _, v := range values {
				hasWindows = hasWindows || v == "windows"
			}
			switch expr["operator"] {
			case "In":
				excludesWindows = excludesWindows || !hasWindows
			case "NotIn":
				excludesWindows = excludesWindows || hasWindows
			case "DoesNotExist":
				excludesWindows = true
			}
		}
		if !excludesWindows {
			return false
		}
	}
	return true
}

// corpusRow is one line of TestWebhookCorpus's report.
type corpusRow struct {
	workloads, admitted, pods, withRuntimeClass                        int
	defaultOSAdmitted, defaultOSPods, defaultOSWindows, defaultOSLinux int
}

// TestWebhookCorpus: issue 3, requirement 5. Every corpus workload and its Pod, created for real through
// the webhook: first declared Windows, then as rendered in a namespace that defaults to Windows.
func TestWebhookCorpus(t *testing.T) {
	cl := e2eutil.StartCluster(t)
	ctx := context.Background()
	declared, asRendered := e2eutil.LoadCorpusAsRendered(t), e2eutil.LoadCorpusAsRendered(t)
	e2eutil.SetUpClusterWide(ctx, t, cl.C, declared)

	// One namespace per chart, as Helm installs them: several charts share workload names.
	var files []string
	byFile := map[string][2][]e2eutil.Workload{}
	for i := range declared {
		f := declared[i].File
		if _, ok := byFile[f]; !ok {
			files = append(files, f)
		}
		pair := byFile[f]
		pair[0] = append(pair[0], declared[i])
		pair[1] = append(pair[1], asRendered[i])
		byFile[f] = pair
	}
	nsName := func(prefix, file string) string { return prefix + strings.TrimSuffix(file, ".yaml") }
	for _, f := range files {
		dns, ons := nsName("declared-", f), nsName("default-os-", f)
		for _, w := range byFile[f][0] {
			w.Obj.SetNamespace(dns)
			e2eutil.DeclareWindows(t, w)
		}
		for _, w := range byFile[f][1] {
			w.Obj.SetNamespace(ons)
		}
		e2eutil.SetUpNamespace(ctx, t, cl.C, dns, map[string]string{policy.LabelEnabled: "true"}, byFile[f][0])
		e2eutil.SetUpNamespace(ctx, t, cl.C, ons, map[string]string{policy.LabelEnabled: "true", policy.LabelDefaultOS: "windows"}, byFile[f][1])
		cl.WaitUntilMutating(t, dns)
		cl.WaitUntilMutating(t, ons)
	}
	// A Ready ltsc2022 node makes the cluster the build source for pods whose images name no build, and
	// the catalog's RuntimeClasses (setUpClusterWide) let wincompat set runtimeClassName, so that the
	// RuntimeClass admission plugin takes part as in a real cluster.
	cl.AddWindowsNode(t, "win-ltsc2022", "10.0.20348")
	cl.WaitForRuntimeClass(t, nsName("declared-", files[0]), "windows-2022")

	rows := map[string]*corpusRow{}
	for _, f := range files {
		row := &corpusRow{}
		rows[f] = row
		for _, w := range byFile[f][0] {
			row.workloads++
			stored, err := cl.CreateWorkload(t, w)
			if err != nil {
				t.Errorf("declared Windows, rejected: %v: %v", w, err)
				continue
			}
			row.admitted++
			pod, err := cl.CreatePodOf(t, stored)
			if err != nil {
				t.Errorf("pod of %v (declared Windows), rejected: %v", w, err)
				continue
			}
			if pod.Annotations[policy.AnnotationVersion] != "e2e" || pod.Spec.NodeSelector[corev1.LabelOSStable] != "windows" {
				t.Errorf("pod of %v (declared Windows) was not mutated: annotations %v nodeSelector %v", w, pod.Annotations, pod.Spec.NodeSelector)
				continue
			}
			row.pods++
			if pod.Spec.RuntimeClassName != nil {
				row.withRuntimeClass++
			}
		}

		for _, w := range byFile[f][1] {
			spec, _, _ := unstructured.NestedMap(w.Obj.Object, e2eutil.PodSpecPath(w.Obj.GetKind())...)
			if _, has := spec["os"]; has {
				t.Fatalf("%v: the corpus now sets spec.os; this case needs workloads without it", w)
			}
			linux := pinnedToLinux(spec)
			stored, err := cl.CreateWorkload(t, w)
			if err != nil {
				t.Errorf("default-os namespace, rejected: %v: %v", w, err)
				continue
			}
			row.defaultOSAdmitted++
			tpl := storedTemplate(t, stored)
			pod, err := cl.CreatePodOf(t, stored)
			if err != nil {
				t.Errorf("pod of %v (default-os namespace), rejected: %v", w, err)
				continue
			}
			row.defaultOSPods++
			if linux {
				row.defaultOSLinux++
				for what, meta := range map[string]metav1.ObjectMeta{"template": tpl.ObjectMeta, "pod": pod.ObjectMeta} {
					if got := e2eutil.WincompatAnnotations(meta.Annotations); len(got) > 0 {
						t.Errorf("%v is pinned to Linux, but its %s carries %v", w, what, got)
					}
				}
				if tpl.Spec.OS != nil || pod.Spec.OS != nil {
					t.Errorf("%v is pinned to Linux, but got spec.os %v (pod %v)", w, tpl.Spec.OS, pod.Spec.OS)
				}
				continue
			}
			row.defaultOSWindows++
			if tpl.Spec.OS == nil || tpl.Spec.OS.Name != corev1.Windows {
				t.Errorf("%v is not pinned to Linux, but wincompat did not set spec.os.name=windows on it: %v", w, tpl.Spec.OS)
			}
			if pod.Spec.OS == nil || pod.Spec.OS.Name != corev1.Windows || pod.Annotations[policy.AnnotationVersion] != "e2e" {
				t.Errorf("pod of %v was not mutated as Windows: os %v annotations %v", w, pod.Spec.OS, pod.Annotations)
			}
		}
	}

	var report strings.Builder
	tw := tabwriter.NewWriter(&report, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "file\tworkloads\tadmitted\tpods admitted\twith RuntimeClass\tdefault-os: admitted\tpods admitted\tmutated as windows\tleft linux\t")
	var total corpusRow
	for _, f := range files {
		r := rows[f]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", f, r.workloads, r.admitted, r.pods, r.withRuntimeClass,
			r.defaultOSAdmitted, r.defaultOSPods, r.defaultOSWindows, r.defaultOSLinux)
		total.workloads += r.workloads
		total.admitted += r.admitted
		total.pods += r.pods
		total.withRuntimeClass += r.withRuntimeClass
		total.defaultOSAdmitted += r.defaultOSAdmitted
		total.defaultOSPods += r.defaultOSPods
		total.defaultOSWindows += r.defaultOSWindows
		total.defaultOSLinux += r.defaultOSLinux
	}
	fmt.Fprintf(tw, "total (%d files)\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", len(files), total.workloads, total.admitted, total.pods,
		total.withRuntimeClass, total.defaultOSAdmitted, total.defaultOSPods, total.defaultOSWindows, total.defaultOSLinux)
	tw.Flush()
	t.Logf("corpus through the real API server and wincompat's webhook (real creates):\n%s", report.String())
	if total.withRuntimeClass == 0 {
		t.Errorf("no corpus pod got a RuntimeClass although the catalog's RuntimeClasses exist")
	}
}
