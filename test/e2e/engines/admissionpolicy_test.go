package engines

// Issue 15, the admission-policy engine: the MutatingAdmissionPolicies `wincompat policy export`
// renders, applied to the real kube-apiserver with no webhook at all. Every corpus chart workload,
// declared Windows, and every pod and workload of the golden cases in an opted-in namespace must be
// admitted (the API server's own Windows validation is the judge) and recorded; the changes the CEL made
// must be the ones the Go decision makes for the same object in what both engines do (spec.os, the
// non-root intent, the strip table, the rewrites and injector opt-outs it renders, the OS nodeSelector and the policy's tolerations), and a second pass
// must change nothing.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

const (
	nsMAP               = "map-only"
	nsMAPDefaultWindows = "map-default-windows"
	nsMAPRestricted     = "map-restricted"
)

// notForAdmissionPolicy are the golden cases the admission policy alone cannot admit or record as the
// webhook does, and why. Each is the webhook's on purpose (see policy/admissionpolicy/README.md).
var notForAdmissionPolicy = map[string]string{
	"rewrite-deprecated-annotations.yaml": "the input carries an annotation key the API server refuses whatever mutates it (example.com/keep~this: it tests JSON pointer escaping in the patch)",
	"workload-job.yaml":                   "the golden input has no restartPolicy, which the API server requires of a Job",
	"build-runtime-class-unknown.yaml":    "it names a RuntimeClass this cluster does not have",
}

// comparedElsewhere are golden cases whose record here cannot equal the Go decision on the raw input,
// though both engines agree on the object the API server hands them (TestEnginesStoreTheSameObject).
var comparedElsewhere = map[string]string{
	"rewrite-hugepages.yaml": "the API server defaults requests from limits before any admission, so both engines see (and remove) huge page requests the raw input lacks",
}

// sharedChange says whether a change of the Go decision is one the admission policy makes too.
// asRecordedByCEL is c as the admission policies record it: CEL cannot render lists and objects as
// JSON, so "from" is kept for scalars only, and the record says the others were not kept.
func asRecordedByCEL(c policy.Change) policy.Change { return policy.AsRecordedInCEL(c) }

func sharedChange(c policy.Change) bool {
	switch {
	case c.Action == policy.Warn:
		return false // warnings, the readiness checks' among them, are the webhook's: an admission policy cannot warn
	case c.Action == policy.Strip:
		return true
	case c.Action == policy.Inject && (c.Path == "spec.os.name" || strings.HasSuffix(c.Path, "windowsOptions.runAsUserName") ||
		c.Path == "spec.nodeSelector[kubernetes.io/os]" || c.Path == "spec.tolerations"):
		return true
	case c.Action == policy.Rewrite && (c.Path == "spec.nodeSelector[kubernetes.io/os]" || strings.HasSuffix(c.Path, ".mountPropagation") ||
		strings.HasSuffix(c.Path, ".lifecycle.stopSignal") || strings.HasSuffix(c.Path, ".emptyDir.medium") || c.Path == "spec.dnsPolicy"):
		return true
	case c.Action == policy.Inject && (c.Path == "metadata.labels" || c.Path == "metadata.annotations"):
		return true // the injector opt-outs
	case strings.HasSuffix(c.Path, ".runAsNonRoot"):
		return true // Pod Security restricted
	case c.Action == policy.Rewrite && (strings.Contains(c.Path, ".resources.limits[hugepages-") || strings.Contains(c.Path, ".resources.requests[hugepages-") ||
		strings.HasPrefix(c.Path, "metadata.annotations[")):
		return true // huge pages, deprecated Linux security annotations
	}
	return false
}

func TestAdmissionPolicyEngine(t *testing.T) {
	ctx := context.Background()
	cfg, c := controlplane.Start(t)
	e2eutil.RequireAdmissionPolicies(t, cfg)
	pol := policy.Default()
	e2eutil.InstallAdmissionPolicies(ctx, t, c, admissionpolicy.Render(pol, admissionpolicy.Options{Version: "e2e-map"}))
	workloads := e2eutil.Distinct(e2eutil.LoadCorpus(t)) // declared Windows
	for _, w := range workloads {
		w.Obj.SetNamespace(nsMAP)
	}
	workloads = append(workloads, goldenWorkloads(t)...)
	// The corpus as rendered (no spec.os) in a namespace labelled default-os=windows: the admission
	// policy must take exactly those the Go decision takes, with the namespace's reason.
	defaultWindows := e2eutil.Distinct(e2eutil.LoadCorpusAsRendered(t))
	for _, w := range defaultWindows {
		w.Obj.SetNamespace(nsMAPDefaultWindows)
	}
	defaultLabels := map[string]string{policy.LabelEnabled: "true", policy.LabelDefaultOS: "windows"}
	// The pods of the corpus's templates and the golden pods in a namespace that enforces Pod Security
	// restricted: the admission policy's adjustments must be the Go decision's.
	var restrictedPods []e2eutil.Workload
	for _, w := range workloads {
		raw, err := w.Obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if w.Obj.GetKind() != "Pod" {
			if raw, err = e2eutil.PodFromTemplate(w.Obj.GetKind(), raw); err != nil {
				continue // CronJobs and the like: their Jobs' pods are the same template
			}
		}
		pod := &unstructured.Unstructured{}
		if err := pod.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		pod.SetNamespace(nsMAPRestricted)
		pod.SetName(strings.ToLower(w.Obj.GetKind()) + "-" + w.Obj.GetName())
		restrictedPods = append(restrictedPods, e2eutil.Workload{File: w.File, Obj: pod})
	}
	restrictedLabels := map[string]string{policy.LabelEnabled: "true", policy.LabelPodSecurityEnforce: "restricted"}
	e2eutil.SetUpNamespace(ctx, t, c, nsMAP, map[string]string{policy.LabelEnabled: "true"}, workloads)
	e2eutil.SetUpNamespace(ctx, t, c, nsMAPDefaultWindows, defaultLabels, defaultWindows)
	e2eutil.SetUpNamespace(ctx, t, c, nsMAPRestricted, restrictedLabels, restrictedPods)
	e2eutil.SetUpClusterWide(ctx, t, c, append(workloads, defaultWindows...))
	e2eutil.WaitForAdmissionPolicy(t, c, nsMAP)

	type mapCase struct {
		w     e2eutil.Workload
		facts policy.Facts
	}
	var cases []mapCase
	for _, w := range workloads {
		cases = append(cases, mapCase{w, policy.Facts{Operation: policy.Create, Version: "e2e-map",
			Namespace: policy.Namespace{Name: nsMAP, Labels: map[string]string{policy.LabelEnabled: "true"}}}})
	}
	for _, w := range defaultWindows {
		cases = append(cases, mapCase{w, policy.Facts{Operation: policy.Create, Version: "e2e-map",
			Namespace: policy.Namespace{Name: nsMAPDefaultWindows, Labels: defaultLabels}}})
	}
	for _, w := range restrictedPods {
		cases = append(cases, mapCase{w, policy.Facts{Operation: policy.Create, Version: "e2e-map",
			Namespace: policy.Namespace{Name: nsMAPRestricted, Labels: restrictedLabels}}})
	}
	considered, admitted, same, notWindows := 0, 0, 0, 0
	for _, mc := range cases {
		w, facts := mc.w, mc.facts
		if why, ok := comparedElsewhere[w.File]; ok {
			t.Logf("%v: %s", w, why)
			continue
		}
		if why, ok := notForAdmissionPolicy[w.File]; ok && w.File != "" {
			t.Logf("%v: left to the webhook: %s", w, why)
			continue
		}
		kind := w.Obj.GetKind()
		raw, err := w.Obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		// What the Go decision does with the same object, limited to what both engines do.
		res, err := webhook.MutateResolving(context.Background(), pol, w.Obj.GroupVersionKind(), raw, facts, nil)
		if err != nil {
			t.Fatalf("%v: %v", w, err)
		}
		if !res.Decision.Windows {
			// Not a Windows object for Go: the admission policy must leave it alone too.
			obj := w.Obj.DeepCopy()
			if err := c.Create(ctx, obj); err != nil {
				// Skipped on purpose (wincompat.io/skip) and invalid as written: refused by the API
				// server's own validation, as with no wincompat at all.
				t.Logf("%v: not Windows for Go (%s), refused as written: %v", w, res.Decision.Skipped, err)
				continue
			}
			notWindows++
			meta, _, _ := unstructured.NestedStringMap(obj.Object, append(metaPath(kind), "annotations")...)
			if rec := meta[policy.AnnotationChanges] + meta[policy.AnnotationTemplateChanges]; rec != "" {
				t.Errorf("%v: not a Windows object (%s), yet the admission policy recorded %s", w, res.Decision.Skipped, rec)
			}
			continue
		}
		considered++
		var want []string
		for _, ch := range res.Decision.Changes {
			if ch.Path == "spec.securityContext.supplementalGroups" && string(ch.From) == "[]" {
				// An empty list reaches the admission policy as absent (the API server's object,
				// rendered for CEL, has no empty lists): nothing to remove, and the stored pod is the
				// same.
				continue
			}
			if unstructuredHas(w.Obj, append(e2eutil.PodSpecPath(kind), "runtimeClassName")) && (ch.Path == "spec.nodeSelector[kubernetes.io/os]" || ch.Path == "spec.tolerations") {
				// The RuntimeClass admission plugin, which runs before admission policies and webhooks
				// alike, merged the class's nodeSelector and tolerations already.
				continue
			}
			if sharedChange(ch) {
				want = append(want, changeKey(asRecordedByCEL(ch)))
			}
		}

		obj := w.Obj.DeepCopy()
		if err := c.Create(ctx, obj); err != nil {
			// Pod Security may refuse what neither engine can change (host ports, volumes): then the
			// webhook's result must be refused too.
			if goObj, gerr := e2eutil.Mutate(pol, raw, facts); gerr == nil && facts.Namespace.Labels[policy.LabelPodSecurityEnforce] != "" && e2eutil.DryRunCreate(ctx, c, goObj) != nil {
				t.Logf("%v: refused by Pod Security whichever engine mutates it: %v", w, err)
				considered--
				continue
			}
			t.Errorf("%v: refused through the admission policy: %v", w, err)
			continue
		}
		admitted++
		recordKey := policy.AnnotationChanges
		if kind != "Pod" {
			recordKey = policy.AnnotationTemplateChanges
		}
		meta, _, _ := unstructured.NestedStringMap(obj.Object, append(metaPath(kind), "annotations")...)
		recorded, err := policy.DecodeChanges(meta[recordKey])
		if meta[recordKey] == "" {
			recorded, err = nil, nil // nothing to change
		}
		if err != nil {
			t.Errorf("%v: the record %s does not parse: %v\n%s", w, recordKey, err, meta[recordKey])
			continue
		}
		before, _, _ := unstructured.NestedStringMap(w.Obj.Object, append(metaPath(kind), "annotations")...)
		earlier, _ := policy.DecodeChanges(before[recordKey])
		var got []string
		for _, ch := range recorded[min(len(earlier), len(recorded)):] {
			got = append(got, changeKey(ch))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: the admission policy recorded\n  %s\nthe Go decision\n  %s", w, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		} else {
			same++
		}
		if kind == "Pod" && meta[policy.AnnotationAdmissionPolicy] != "e2e-map" {
			t.Errorf("%v: wincompat.io/admission-policy %q", w, meta[policy.AnnotationAdmissionPolicy])
		}
		// The leader watches only pods so labelled, whichever engine admitted them.
		if l := obj.GetLabels()[policy.LabelOS]; kind == "Pod" && l != string(corev1.Windows) {
			t.Errorf("%v: labelled %s=%q, want windows", w, policy.LabelOS, l)
		}
		// Idempotence: the input with the stored pod spec and record, created again (dry run), comes
		// back unchanged. The stored object itself is not re-created: a Job's defaulted selector and
		// labels would not validate again.
		storedSpec, _, _ := unstructured.NestedMap(obj.Object, e2eutil.PodSpecPath(kind)...)
		again := w.Obj.DeepCopy()
		again.SetName(obj.GetName() + "-again")
		if err := unstructured.SetNestedMap(again.Object, storedSpec, e2eutil.PodSpecPath(kind)...); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedStringMap(again.Object, meta, append(metaPath(kind), "annotations")...); err != nil {
			t.Fatal(err)
		}
		// The injector opt-outs the first pass set as labels (not the rest: a Job's controller-uid must
		// not follow).
		stored, _, _ := unstructured.NestedStringMap(obj.Object, append(metaPath(kind), "labels")...)
		labels, _, _ := unstructured.NestedStringMap(again.Object, append(metaPath(kind), "labels")...)
		for _, in := range policy.Injectors() {
			if v, ok := stored[in.Key]; ok && in.Label {
				if labels == nil {
					labels = map[string]string{}
				}
				labels[in.Key] = v
			}
		}
		if labels != nil {
			if err := unstructured.SetNestedStringMap(again.Object, labels, append(metaPath(kind), "labels")...); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Create(ctx, again, client.DryRunAll); err != nil {
			t.Errorf("%v: its stored spec is refused when created again: %v", w, err)
			continue
		}
		specAfter, _, _ := unstructured.NestedMap(again.Object, e2eutil.PodSpecPath(kind)...)
		metaAfter, _, _ := unstructured.NestedStringMap(again.Object, append(metaPath(kind), "annotations")...)
		if js(storedSpec) != js(specAfter) || metaAfter[recordKey] != meta[recordKey] {
			t.Errorf("%v: a second pass changed it:\nspec %s\n  -> %s\nrecord %s\n  -> %s", w, js(storedSpec), js(specAfter), meta[recordKey], metaAfter[recordKey])
		}
	}
	t.Logf("admission policy only: %d of %d Windows workloads and pods (corpus charts declared Windows, golden cases, the corpus as rendered in a default-os=windows namespace, and their pods in a namespace enforcing Pod Security restricted, less those it refuses whichever engine mutates them) admitted; %d recorded exactly the changes the Go decision makes in what both engines do; %d not Windows for Go left alone by the policy too; %d golden cases left to the webhook", admitted, considered, same, notWindows, len(notForAdmissionPolicy))
	if admitted == 0 {
		t.Fatal("nothing was admitted through the admission policy")
	}
}

func unstructuredHas(obj *unstructured.Unstructured, path []string) bool {
	_, found, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
	return found
}

func changeKey(c policy.Change) string {
	k := string(c.Action) + " " + c.Path
	if len(c.To) > 0 {
		k += " = " + string(c.To)
	}
	if len(c.From) > 0 {
		k += " (from " + string(c.From) + ")"
	}
	return k
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

// metaPath is where the record of an object of kind lives: the pod's metadata or its template's.
func metaPath(kind string) []string {
	if kind == "Pod" {
		return []string{"metadata"}
	}
	return append(slices.Clone(e2eutil.TemplatePaths[kind]), "metadata")
}

// goldenWorkloads are the objects of the golden cases whose namespace is opted in and that need no
// cluster or registry facts, in namespace nsMAP.
func goldenWorkloads(t *testing.T) []e2eutil.Workload {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join(root, "webhook", "testdata", "golden", "*.yaml"))
	var out []e2eutil.Workload
	for _, path := range paths {
		if strings.HasSuffix(path, ".out.yaml") {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var gc struct {
			Namespace struct {
				Labels map[string]string `json:"labels"`
			} `json:"namespace"`
			Operation string          `json:"operation"`
			Policy    string          `json:"policy"`
			Cluster   any             `json:"cluster"`
			Images    any             `json:"images"`
			Object    json.RawMessage `json:"object"`
		}
		if err := yaml.Unmarshal(data, &gc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if gc.Namespace.Labels[policy.LabelEnabled] != "true" || gc.Namespace.Labels[policy.LabelDefaultOS] != "" ||
			gc.Operation != "" || gc.Policy != "" || gc.Cluster != nil || gc.Images != nil {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(gc.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, ok := e2eutil.TemplatePaths[obj.GetKind()]; !ok {
			continue
		}
		obj.SetNamespace(nsMAP)
		obj.SetName(strings.TrimSuffix(filepath.Base(path), ".yaml"))
		out = append(out, e2eutil.Workload{File: filepath.Base(path), Obj: obj})
	}
	return out
}
