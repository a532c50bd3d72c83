// Package e2e checks wincompat against the real kube-apiserver (DESIGN §8): the API server, not our
// reading of its validation code, decides whether a mutated object is acceptable.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook"
)

// namespace is the one the corpus was rendered for (`helm template --namespace demo`).
const namespace = "demo"

// templatePaths says where each kept kind holds its pod template. A Pod has none: it is its own pod.
var templatePaths = map[string][]string{
	"Pod":                   nil,
	"PodTemplate":           {"template"},
	"ReplicationController": {"spec", "template"},
	"Deployment":            {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"StatefulSet":           {"spec", "template"},
	"DaemonSet":             {"spec", "template"},
	"Job":                   {"spec", "template"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template"},
}

// podSpecPath is where obj's pod spec sits.
func podSpecPath(kind string) []string {
	if kind == "Pod" {
		return []string{"spec"}
	}
	return append(slices.Clone(templatePaths[kind]), "spec")
}

// windowsBuilds mirrors the default policy's build catalog, as the scheduling helper would install it.
var windowsBuilds = map[string]string{
	"windows-2019": "10.0.17763",
	"windows-2022": "10.0.20348",
	"windows-2025": "10.0.26100",
}

// workload is one kept corpus document, already declared Windows.
type workload struct {
	file string
	obj  *unstructured.Unstructured
}

func (w workload) String() string {
	return fmt.Sprintf("%s: %s %s", w.file, w.obj.GetKind(), w.obj.GetName())
}

// tally is one row of the report.
type tally struct {
	workloads, before, after, pods, runtimeClassPods int
}

func TestCorpusAdmittedAfterMutation(t *testing.T) {
	workloads := loadCorpus(t)
	_, c := controlplane.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	setUpCluster(ctx, t, c, workloads)

	pol := policy.Default()
	facts := policy.Facts{
		Operation: policy.Create,
		Namespace: policy.Namespace{Name: namespace, Labels: map[string]string{policy.LabelEnabled: "true"}},
		Version:   "e2e",
	}
	serverFacts := facts
	serverFacts.Cluster = &policy.Cluster{Builds: []string{"10.0.20348"}, RuntimeClasses: map[string]policy.RuntimeClass{}}
	for name, build := range windowsBuilds {
		serverFacts.Cluster.RuntimeClasses[name] = policy.RuntimeClass{NodeSelector: map[string]string{
			corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: build,
		}}
	}

	var files []string
	byFile := map[string]*tally{}
	var total tally
	for _, w := range workloads {
		row := byFile[w.file]
		if row == nil {
			row = &tally{}
			byFile[w.file] = row
			files = append(files, w.file)
		}
		row.workloads++

		raw, err := w.obj.MarshalJSON()
		if err != nil {
			t.Fatalf("%v: %v", w, err)
		}

		// Before: what a cluster without wincompat says. Only reported: rejecting Linux-only fields
		// is what the API server is expected to do.
		if err := dryRunCreate(ctx, c, raw); err != nil {
			t.Logf("before, rejected: %v: %v", w, err)
		} else {
			row.before++
		}

		mutated, err := mutate(pol, raw, facts)
		if err != nil {
			t.Errorf("%v: mutating: %v", w, err)
			continue
		}
		if err := dryRunCreate(ctx, c, mutated); err != nil {
			t.Errorf("after wincompat, rejected: %v: %v", w, err)
			continue
		}
		row.after++

		// The pod a controller would create from the admitted template, which then meets the pod
		// webhook and the pod-only admission plugins (RuntimeClass, Priority, ServiceAccount). A corpus
		// Pod is its own pod, already admitted above.
		template := raw
		if w.obj.GetKind() != "Pod" {
			if template, err = podFromTemplate(w.obj.GetKind(), mutated); err != nil {
				t.Errorf("%v: building its pod: %v", w, err)
				continue
			}
			pod, err := mutate(pol, template, facts)
			if err != nil {
				t.Errorf("%v: mutating its pod: %v", w, err)
				continue
			}
			if err := dryRunCreate(ctx, c, pod); err != nil {
				t.Errorf("pod of %v, rejected after wincompat: %v", w, err)
				continue
			}
		}
		row.pods++
		// The same pod in server mode, where the cluster's only build decides and its RuntimeClass is
		// set: the RuntimeClass admission plugin merges the class's nodeSelector and tolerations with the
		// injected ones and rejects a conflicting key.
		pod, err := mutate(pol, template, serverFacts)
		if err != nil {
			t.Errorf("%v: mutating its pod in server mode: %v", w, err)
			continue
		}
		if !strings.Contains(string(pod), `"runtimeClassName"`) && !strings.Contains(string(pod), `"hostProcess":true`) {
			t.Errorf("pod of %v: server mode set no RuntimeClass: %s", w, pod)
		}
		if err := dryRunCreate(ctx, c, pod); err != nil {
			t.Errorf("pod of %v with its RuntimeClass, rejected after wincompat: %v", w, err)
			continue
		}
		row.runtimeClassPods++
	}

	var report strings.Builder
	tw := tabwriter.NewWriter(&report, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "file\tworkloads\tadmitted before\tadmitted after\tpods admitted after\twith RuntimeClass\t")
	for _, f := range files {
		row := byFile[f]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", f, row.workloads, row.before, row.after, row.pods, row.runtimeClassPods)
		total.workloads += row.workloads
		total.before += row.before
		total.after += row.after
		total.pods += row.pods
		total.runtimeClassPods += row.runtimeClassPods
	}
	fmt.Fprintf(tw, "total (%d files)\t%d\t%d\t%d\t%d\t%d\t\n", len(files), total.workloads, total.before, total.after, total.pods, total.runtimeClassPods)
	tw.Flush()
	t.Logf("corpus against the real API server, every pod spec declared spec.os.name=windows:\n%s", report.String())

	if total.before == total.workloads {
		t.Errorf("all %d workloads were admitted before wincompat: the corpus exercises nothing wincompat fixes, or the API server is not validating Windows pods", total.workloads)
	}
}

func TestRejectsLinuxFieldOnWindowsPod(t *testing.T) {
	_, c := controlplane.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ns := "oracle"
	create(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	// The ServiceAccount plugin would otherwise reject the pod before validation gets to see it.
	create(ctx, t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}})

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "linux-field", Namespace: ns},
		Spec: corev1.PodSpec{
			OS:              &corev1.PodOS{Name: corev1.Windows},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
			Containers:      []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}},
		},
	}
	err := c.Create(ctx, pod, client.DryRunAll)
	if err == nil {
		t.Fatal("a Windows pod with spec.securityContext.runAsUser was admitted: the API server is not the oracle DESIGN §8 relies on")
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot be set for a windows pod") {
		t.Fatalf("rejected for another reason than the Windows field check: %v", err)
	}
}

// loadCorpus reads every chart rendering and returns its workloads, each in namespace demo with
// spec.os.name=windows. The objects stay unstructured so that fields our k8s.io/api does not know
// reach the API server untouched.
func loadCorpus(t *testing.T) []workload {
	t.Helper()
	out := loadCorpusAsRendered(t)
	for _, w := range out {
		w.obj.SetNamespace(namespace)
		declareWindows(t, w)
	}
	return out
}

// declareWindows sets spec.os.name=windows on the workload's pod spec.
func declareWindows(t *testing.T, w workload) {
	t.Helper()
	if err := unstructured.SetNestedField(w.obj.Object, "windows", append(podSpecPath(w.obj.GetKind()), "os", "name")...); err != nil {
		t.Fatalf("%v: %v", w, err)
	}
}

// loadCorpusAsRendered reads every chart rendering and returns its workloads exactly as rendered (in
// namespace demo, no spec.os), each a fresh copy.
func loadCorpusAsRendered(t *testing.T) []workload {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "..", "shared", "corpus", "charts")
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no chart renderings (*.yaml) in %s: the corpus is required", dir)
	}
	var out []workload
	for _, path := range paths {
		docs, err := fixtures.ReadDocuments(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, obj := range docs {
			if _, ok := templatePaths[obj.GetKind()]; !ok {
				continue
			}
			out = append(out, workload{file: filepath.Base(path), obj: obj})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no workloads in %s", dir)
	}
	return out
}

// distinct keeps the first of workloads of the same kind and name: two renderings of a chart may hold
// the same workload (csi-driver-smb with and without its Windows part), which one namespace cannot hold
// twice.
func distinct(workloads []workload) []workload {
	var out []workload
	seen := map[string]bool{}
	for _, w := range workloads {
		if id := w.obj.GetKind() + "/" + w.obj.GetName(); !seen[id] {
			seen[id] = true
			out = append(out, w)
		}
	}
	return out
}

// setUpCluster creates what the corpus expects of a cluster and no controller provides under envtest:
// the opted-in namespace demo and, through setUpClusterWide, the catalog's RuntimeClasses and the
// PriorityClasses the pods name.
func setUpCluster(ctx context.Context, t *testing.T, c client.Client, workloads []workload) {
	t.Helper()
	setUpNamespace(ctx, t, c, namespace, map[string]string{policy.LabelEnabled: "true"}, workloads)
	setUpClusterWide(ctx, t, c, workloads)
}

// setUpNamespace creates namespace ns with labels, and in it the ServiceAccount "default" and every
// ServiceAccount the workloads' pods name: no controller-manager runs to create "default", and the
// ServiceAccount admission plugin rejects pods that name a missing one.
func setUpNamespace(ctx context.Context, t *testing.T, c client.Client, ns string, labels map[string]string, workloads []workload) {
	t.Helper()
	create(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})
	accounts := map[string]bool{"default": true}
	for _, w := range workloads {
		spec, _, err := unstructured.NestedMap(w.obj.Object, podSpecPath(w.obj.GetKind())...)
		if err != nil {
			t.Fatalf("%v: %v", w, err)
		}
		// serviceAccount is the deprecated spelling; the API server still honours it.
		for _, key := range []string{"serviceAccountName", "serviceAccount"} {
			if name, _ := spec[key].(string); name != "" {
				accounts[name] = true
			}
		}
	}
	for name := range accounts {
		create(ctx, t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
}

// setUpClusterWide creates the cluster-scoped objects the corpus expects: the catalog's RuntimeClasses
// and the PriorityClasses the pods name (the Priority plugin rejects pods that name a missing one).
func setUpClusterWide(ctx context.Context, t *testing.T, c client.Client, workloads []workload) {
	t.Helper()
	for name, build := range windowsBuilds {
		create(ctx, t, c, &nodev1.RuntimeClass{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Handler:    "runhcs-wcow-process",
			Scheduling: &nodev1.Scheduling{
				NodeSelector: map[string]string{
					corev1.LabelOSStable:     "windows",
					corev1.LabelWindowsBuild: build,
				},
				Tolerations: []corev1.Toleration{{
					Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule,
				}},
			},
		})
	}
	priorities := map[string]bool{}
	for _, w := range workloads {
		spec, _, err := unstructured.NestedMap(w.obj.Object, podSpecPath(w.obj.GetKind())...)
		if err != nil {
			t.Fatalf("%v: %v", w, err)
		}
		if name, _ := spec["priorityClassName"].(string); name != "" {
			priorities[name] = true
		}
	}
	for name := range priorities {
		// system-node-critical and system-cluster-critical are built in.
		err := c.Get(ctx, client.ObjectKey{Name: name}, &schedulingv1.PriorityClass{})
		if apierrors.IsNotFound(err) {
			create(ctx, t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000})
		} else if err != nil {
			t.Fatalf("looking up PriorityClass %s: %v", name, err)
		}
	}
}

func create(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// dryRunCreate asks the API server to admit and validate raw without storing it.
func dryRunCreate(ctx context.Context, c client.Client, raw []byte) error {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return err
	}
	return c.Create(ctx, obj, client.DryRunAll)
}

// mutate runs raw through wincompat's admission pipeline and applies the patch it answers with, as the
// API server does with a webhook's response.
func mutate(pol *policy.Policy, raw []byte, facts policy.Facts) ([]byte, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, err
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	res, err := webhook.MutateResolving(context.Background(), pol, gvk, raw, facts, nil)
	if err != nil {
		return nil, err
	}
	// Every input is declared Windows in an opted-in namespace: a skip would leave the object as it was
	// and hide a trigger bug behind a rejection, or worse, behind nothing.
	if !res.Decision.Windows {
		return nil, fmt.Errorf("wincompat left it alone: %s", res.Decision.Skipped)
	}
	if len(res.Patch) == 0 {
		return raw, nil
	}
	ops, err := json.Marshal(res.Patch)
	if err != nil {
		return nil, err
	}
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		return nil, fmt.Errorf("decoding patch %s: %w", ops, err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		return nil, fmt.Errorf("applying patch %s: %w", ops, err)
	}
	return out, nil
}

// podFromTemplate builds the Pod a controller would create from a workload's pod template, in the
// workload's namespace (demo when it has none).
func podFromTemplate(kind string, raw []byte) ([]byte, error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	tpl, found, err := unstructured.NestedMap(obj.Object, templatePaths[kind]...)
	if err != nil || !found {
		return nil, fmt.Errorf("no pod template at %s (%v)", strings.Join(templatePaths[kind], "."), err)
	}
	spec, _, err := unstructured.NestedMap(tpl, "spec")
	if err != nil {
		return nil, err
	}
	if kind == "StatefulSet" {
		if err := addClaimVolumes(obj, spec); err != nil {
			return nil, err
		}
	}
	pod := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	pod.SetAPIVersion("v1")
	pod.SetKind("Pod")
	pod.SetName(obj.GetName() + "-pod")
	ns := obj.GetNamespace()
	if ns == "" {
		ns = namespace
	}
	pod.SetNamespace(ns)
	labels, _, _ := unstructured.NestedStringMap(tpl, "metadata", "labels")
	pod.SetLabels(labels)
	annotations, _, _ := unstructured.NestedStringMap(tpl, "metadata", "annotations")
	pod.SetAnnotations(annotations)
	return pod.MarshalJSON()
}

// addClaimVolumes gives a StatefulSet's pod the volumes its volumeClaimTemplates stand for, as the
// StatefulSet controller does; without them the containers' volumeMounts name volumes that do not exist.
func addClaimVolumes(sts *unstructured.Unstructured, spec map[string]any) error {
	claims, _, err := unstructured.NestedSlice(sts.Object, "spec", "volumeClaimTemplates")
	if err != nil {
		return err
	}
	volumes, _, err := unstructured.NestedSlice(spec, "volumes")
	if err != nil {
		return err
	}
	for _, claim := range claims {
		name, _, _ := unstructured.NestedString(claim.(map[string]any), "metadata", "name")
		if slices.ContainsFunc(volumes, func(v any) bool { return v.(map[string]any)["name"] == name }) {
			continue // a pod volume of the same name wins, as in the controller
		}
		volumes = append(volumes, map[string]any{
			"name": name,
			"persistentVolumeClaim": map[string]any{
				"claimName": fmt.Sprintf("%s-%s-0", name, sts.GetName()),
			},
		})
	}
	if len(volumes) > 0 {
		spec["volumes"] = volumes
	}
	return nil
}
