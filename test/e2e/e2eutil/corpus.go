package e2eutil

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook"
)

// Namespace is the one the corpus was rendered for (`helm template --namespace demo`).
const Namespace = "demo"

// TemplatePaths says where each kept kind holds its pod template. A Pod has none: it is its own pod.
var TemplatePaths = map[string][]string{
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

// PodSpecPath is where obj's pod spec sits.
func PodSpecPath(kind string) []string {
	if kind == "Pod" {
		return []string{"spec"}
	}
	return append(slices.Clone(TemplatePaths[kind]), "spec")
}

// WindowsBuilds mirrors the default policy's build catalog, as the scheduling helper would install it.
var WindowsBuilds = map[string]string{
	"windows-2019": "10.0.17763",
	"windows-2022": "10.0.20348",
	"windows-2025": "10.0.26100",
}

// Workload is one kept corpus document, already declared Windows.
type Workload struct {
	File string
	Obj  *unstructured.Unstructured
}

func (w Workload) String() string {
	return fmt.Sprintf("%s: %s %s", w.File, w.Obj.GetKind(), w.Obj.GetName())
}

// LoadCorpus reads every chart rendering and returns its workloads, each in namespace demo with
// spec.os.name=windows. The objects stay unstructured so that fields our k8s.io/api does not know
// reach the API server untouched.
func LoadCorpus(t *testing.T) []Workload {
	t.Helper()
	out := LoadCorpusAsRendered(t)
	for _, w := range out {
		w.Obj.SetNamespace(Namespace)
		DeclareWindows(t, w)
	}
	return out
}

// DeclareWindows sets spec.os.name=windows on the workload's pod spec.
func DeclareWindows(t *testing.T, w Workload) {
	t.Helper()
	if err := unstructured.SetNestedField(w.Obj.Object, "windows", append(PodSpecPath(w.Obj.GetKind()), "os", "name")...); err != nil {
		t.Fatalf("%v: %v", w, err)
	}
}

// LoadCorpusAsRendered reads every chart rendering and returns its workloads exactly as rendered (in
// namespace demo, no spec.os), each a fresh copy.
func LoadCorpusAsRendered(t *testing.T) []Workload {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "..", "shared", "corpus", "charts")
	out := loadWorkloads(t, dir)
	if len(out) == 0 {
		t.Fatalf("no workloads in %s: the corpus of chart renderings is required", dir)
	}
	return out
}

// loadWorkloads reads dir's *.yaml files and returns their Pods and workloads as written, each a fresh
// copy, in file order.
func loadWorkloads(t *testing.T, dir string) []Workload {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []Workload
	for _, path := range paths {
		docs, err := fixtures.ReadDocuments(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, obj := range docs {
			if _, ok := TemplatePaths[obj.GetKind()]; ok {
				out = append(out, Workload{File: filepath.Base(path), Obj: obj})
			}
		}
	}
	return out
}

// Distinct keeps the first of workloads of the same kind and name: two renderings of a chart may hold
// the same workload (csi-driver-smb with and without its Windows part), which one namespace cannot hold
// twice.
func Distinct(workloads []Workload) []Workload {
	var out []Workload
	seen := map[string]bool{}
	for _, w := range workloads {
		if id := w.Obj.GetKind() + "/" + w.Obj.GetName(); !seen[id] {
			seen[id] = true
			out = append(out, w)
		}
	}
	return out
}

// SetUpNamespace creates namespace ns with labels, and in it the ServiceAccount "default" and every
// ServiceAccount the workloads' pods name: no controller-manager runs to create "default", and the
// ServiceAccount admission plugin rejects pods that name a missing one.
func SetUpNamespace(ctx context.Context, t *testing.T, c client.Client, ns string, labels map[string]string, workloads []Workload) {
	t.Helper()
	Create(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})
	accounts := map[string]bool{"default": true}
	for _, w := range workloads {
		spec, _, err := unstructured.NestedMap(w.Obj.Object, PodSpecPath(w.Obj.GetKind())...)
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
		Create(ctx, t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
}

// SetUpClusterWide creates the cluster-scoped objects the corpus expects: the catalog's RuntimeClasses
// and the PriorityClasses the pods name (the Priority plugin rejects pods that name a missing one).
func SetUpClusterWide(ctx context.Context, t *testing.T, c client.Client, workloads []Workload) {
	t.Helper()
	for name, build := range WindowsBuilds {
		Create(ctx, t, c, &nodev1.RuntimeClass{
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
		spec, _, err := unstructured.NestedMap(w.Obj.Object, PodSpecPath(w.Obj.GetKind())...)
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
			Create(ctx, t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000})
		} else if err != nil {
			t.Fatalf("looking up PriorityClass %s: %v", name, err)
		}
	}
}

func Create(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// DryRunCreate asks the API server to admit and validate raw without storing it.
func DryRunCreate(ctx context.Context, c client.Client, raw []byte) error {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return err
	}
	return c.Create(ctx, obj, client.DryRunAll)
}

// Mutate runs raw through wincompat's admission pipeline and applies the patch it answers with, as the
// API server does with a webhook's response.
func Mutate(pol *policy.Policy, raw []byte, facts policy.Facts) ([]byte, error) {
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

// PodFromTemplate builds the Pod a controller would create from a workload's pod template, in the
// workload's namespace (demo when it has none).
func PodFromTemplate(kind string, raw []byte) ([]byte, error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	tpl, found, err := unstructured.NestedMap(obj.Object, TemplatePaths[kind]...)
	if err != nil || !found {
		return nil, fmt.Errorf("no pod template at %s (%v)", strings.Join(TemplatePaths[kind], "."), err)
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
		ns = Namespace
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
