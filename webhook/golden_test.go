package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/patch"
	"github.com/wincompat/wincompat/policy"
)

// Golden cases live in testdata/golden as <case>.yaml. For each, the test pins the JSON patch
// (<case>.patch.json) and what the user sees (<case>.out.yaml: warnings and the patched object), and
// checks that the patch applied to the raw input gives exactly the decided object, that fields unknown to
// our types survive, and that a second pass changes nothing. UPDATE_GOLDEN=1 rewrites the goldens.

const goldenDir = "testdata/golden"

const goldenVersion = "v0.0.0-golden"

// goldenCase is the input file of a case: the object and the facts around it.
type goldenCase struct {
	Namespace struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"namespace"`
	Operation string `json:"operation"`
	Cluster   *struct {
		Builds []string `json:"builds"`
		// RuntimeClasses maps each existing class to its scheduling.nodeSelector.
		RuntimeClasses map[string]map[string]string `json:"runtimeClasses"`
		// Taints are the taints of ready Windows nodes, as the inventory reports them.
		Taints []corev1.Taint `json:"taints"`
		// Classes are RuntimeClasses with more than a nodeSelector (a handler, tolerations, overhead),
		// added to RuntimeClasses.
		Classes map[string]struct {
			Handler      string              `json:"handler"`
			NodeSelector map[string]string   `json:"nodeSelector"`
			Tolerations  []corev1.Toleration `json:"tolerations"`
			Overhead     corev1.ResourceList `json:"overhead"`
		} `json:"classes"`
		// Revisions are the highest revision of each build among ready nodes.
		Revisions map[string]int `json:"revisions"`
	} `json:"cluster"`
	// Images is what the registry says of each image, as the resolver would report it.
	Images map[string]goldenImage `json:"images"`
	Policy string                 `json:"policy"`
	Object json.RawMessage        `json:"object"`
	// Overdue, in the leader's cases (testdata/ungate), says why the gate goes without every answer.
	Overdue string `json:"overdue"`
}

type goldenImage struct {
	Platforms []struct {
		OS           string   `json:"os"`
		Architecture string   `json:"architecture"`
		OSVersion    string   `json:"osVersion"`
		OSFeatures   []string `json:"osFeatures"`
	} `json:"platforms"`
	Err string `json:"err"`
	// Pending: the answer may still come (a timeout, or wincompat's bounds when Busy); a pod waits
	// behind the scheduling gate for it.
	Pending bool `json:"pending"`
	Busy    bool `json:"busy"`
	// Mirror answered for MirrorFor, the registry the reference names (policy registryMirrors).
	Mirror    string `json:"mirror"`
	MirrorFor string `json:"mirrorFor"`
}

type goldenOutput struct {
	Denied   string          `json:"denied,omitempty"`
	Warnings []string        `json:"warnings"`
	Object   json.RawMessage `json:"object"`
}

func (c *goldenCase) facts() policy.Facts {
	f := policy.Facts{
		Operation: policy.Create,
		Namespace: policy.Namespace{Name: c.Namespace.Name, Labels: c.Namespace.Labels, Annotations: c.Namespace.Annotations},
		Version:   goldenVersion,
	}
	if f.Namespace.Name == "" {
		f.Namespace.Name = "demo"
	}
	if c.Operation != "" {
		f.Operation = policy.Operation(c.Operation)
	}
	for ref, img := range c.Images {
		if f.Images == nil {
			f.Images = map[string]policy.Image{}
		}
		pi := policy.Image{Err: img.Err, Mirror: img.Mirror, MirrorFor: img.MirrorFor, Pending: img.Pending, Busy: img.Busy}
		// As the server: where a registry is read, a pod whose images are pending may be gated.
		f.Gate = true
		for _, pl := range img.Platforms {
			pi.Platforms = append(pi.Platforms, policy.Platform{OS: pl.OS, Architecture: pl.Architecture, OSVersion: pl.OSVersion, OSFeatures: pl.OSFeatures})
		}
		f.Images[ref] = pi
	}
	if c.Cluster != nil {
		f.Cluster = &policy.Cluster{Builds: c.Cluster.Builds, RuntimeClasses: map[string]policy.RuntimeClass{}, WindowsTaints: c.Cluster.Taints}
		for name, selector := range c.Cluster.RuntimeClasses {
			f.Cluster.RuntimeClasses[name] = policy.RuntimeClass{NodeSelector: selector}
		}
		for name, rc := range c.Cluster.Classes {
			f.Cluster.RuntimeClasses[name] = policy.RuntimeClass{Handler: rc.Handler, NodeSelector: rc.NodeSelector, Tolerations: rc.Tolerations, Overhead: rc.Overhead}
		}
		f.Cluster.Revisions = c.Cluster.Revisions
	}
	return f
}

// reviewCase reviews a golden case's object raw (old the stored one on UPDATE) with its policy and
// facts, in enforce mode.
func reviewCase(t *testing.T, c *goldenCase, pol *policy.Policy, gvk schema.GroupVersionKind, op admissionv1.Operation, raw, old []byte) admission.Response {
	t.Helper()
	resp, _ := reviewCaseIn(t, c, pol, gvk, c.facts().Namespace.Labels, op, raw, old)
	return resp
}

// reviewCaseIn is reviewCase in a namespace of the given labels, with the metrics the review recorded.
func reviewCaseIn(t *testing.T, c *goldenCase, pol *policy.Policy, gvk schema.GroupVersionKind, labels map[string]string, op admissionv1.Operation, raw, old []byte) (admission.Response, *Metrics) {
	t.Helper()
	facts := c.facts()
	current := &atomic.Pointer[policy.Policy]{}
	current.Store(pol)
	m := NewMetrics(prometheus.NewRegistry())
	cfg := Config{Policy: current, Namespaces: namespaces{facts.Namespace.Name: labels}, Version: goldenVersion,
		Metrics: m, Log: logr.Discard()}
	if facts.Cluster != nil {
		cfg.Cluster = func(context.Context) (*policy.Cluster, error) { return facts.Cluster, nil }
	}
	if facts.Images != nil {
		cfg.Images = caseImages(facts.Images)
	}
	newHandler, resource := NewWorkloadHandler, strings.ToLower(gvk.Kind)+"s"
	if gvk.Kind == "Pod" {
		newHandler, resource = NewPodHandler, "pods"
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid", Namespace: facts.Namespace.Name, Operation: op,
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
		Object:    runtime.RawExtension{Raw: raw},
		OldObject: runtime.RawExtension{Raw: old},
	}}
	return newHandler(cfg).Handle(context.Background(), req), m
}

// forEachCreateCase runs f as a subtest of every golden case reviewed as a CREATE; the UPDATE cases
// (of ephemeral containers) are skipped, saying why for the caller.
func forEachCreateCase(t *testing.T, whyNotUpdate string, f func(t *testing.T, c *goldenCase, pol *policy.Policy, gvk schema.GroupVersionKind)) {
	cases, err := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range cases {
		if strings.HasSuffix(in, ".out.yaml") {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(in), ".yaml"), func(t *testing.T) {
			c, pol, gvk := loadCase(t, in)
			if c.facts().Operation != policy.Create {
				t.Skip("an UPDATE of ephemeral containers: " + whyNotUpdate)
			}
			f(t, c, pol, gvk)
		})
	}
}

func loadCase(t *testing.T, path string) (*goldenCase, *policy.Policy, schema.GroupVersionKind) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c goldenCase
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatalf("case %s: %v", path, err)
	}
	pol, err := policy.Load([]byte(c.Policy))
	if err != nil {
		t.Fatalf("case policy: %v", err)
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(c.Object, &tm); err != nil {
		t.Fatal(err)
	}
	return &c, pol, schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
}

func TestGolden(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for _, c := range cases {
		if !strings.HasSuffix(c, ".out.yaml") {
			inputs = append(inputs, c)
		}
	}
	if len(inputs) < 30 {
		t.Fatalf("found %d golden cases in %s, want at least 30", len(inputs), goldenDir)
	}
	unknownChecked := 0
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			c, pol, gvk := loadCase(t, in)
			raw := c.Object
			facts := c.facts()
			res, err := mutate(pol, gvk, raw, facts)
			if err != nil {
				t.Fatalf("mutate: %v", err)
			}
			patchJSON := formatPatch(t, res.Patch)
			applied := applyPatch(t, raw, patchJSON)

			out := goldenOutput{Denied: res.Decision.DeniedMessage(), Warnings: res.Decision.Warnings(), Object: applied}
			if out.Warnings == nil {
				out.Warnings = []string{}
			}
			outJSON, err := json.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			outYAML, err := yaml.JSONToYAML(outJSON)
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join(goldenDir, name+".patch.json"), patchJSON)
			compareGolden(t, filepath.Join(goldenDir, name+".out.yaml"), outYAML)

			t.Run("every change has a rule", func(t *testing.T) {
				for _, c := range res.Decision.Changes {
					// The code the change was made with, not what its path or reason suggest.
					if c.Rule == "" || res.Decision.Rule(c) == "" {
						t.Errorf("%s %s (%s) was made with rule %q, which the rules table does not explain: set a code of policy/rules.go where the change is made", c.Action, c.Path, c.Reason, c.Rule)
					}
				}
			})
			t.Run("round trip", func(t *testing.T) {
				// The patch applied to the raw input must give the object the policy decided, field for field.
				decided := typedJSON(t, gvk, raw, func(obj any) {
					if _, err := pol.Decide(obj, facts); err != nil {
						t.Fatal(err)
					}
				})
				if got := typedJSON(t, gvk, applied, nil); !bytes.Equal(got, decided) {
					t.Errorf("patched raw input differs from the decided object\npatched: %s\ndecided: %s", got, decided)
				}
			})
			t.Run("unknown fields survive", func(t *testing.T) {
				if checkUnknownFieldsSurvive(t, gvk, raw, applied, res.Patch) > 0 {
					unknownChecked++
				}
			})
			t.Run("idempotent", func(t *testing.T) {
				again, err := mutate(pol, gvk, applied, facts)
				if err != nil {
					t.Fatal(err)
				}
				if len(again.Patch) != 0 {
					t.Errorf("second pass is not empty: %s", formatPatch(t, again.Patch))
				}
			})
		})
	}
	if !t.Failed() && unknownChecked < 3 {
		t.Errorf("only %d cases carry fields unknown to k8s.io/api; the survival check needs inputs that have them", unknownChecked)
	}
	t.Run("no stale goldens", func(t *testing.T) {
		outputs, _ := filepath.Glob(filepath.Join(goldenDir, "*"))
		for _, o := range outputs {
			base := filepath.Base(o)
			caseName := strings.TrimSuffix(strings.TrimSuffix(base, ".patch.json"), ".out.yaml")
			if caseName == base || caseName == strings.TrimSuffix(base, ".yaml") {
				continue
			}
			if _, err := os.Stat(filepath.Join(goldenDir, caseName+".yaml")); err != nil {
				if updateGolden() {
					_ = os.Remove(o)
					continue
				}
				t.Errorf("%s has no case %s.yaml: delete it or run UPDATE_GOLDEN=1 go test ./...", o, caseName)
			}
		}
	})
}

func updateGolden() bool { return os.Getenv("UPDATE_GOLDEN") == "1" }

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if updateGolden() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden %s (run UPDATE_GOLDEN=1 go test ./... and review it): %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale (run UPDATE_GOLDEN=1 go test ./... and review the diff)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// formatPatch renders a patch one operation per line, so golden diffs read like the change.
func formatPatch(t *testing.T, p patch.Patch) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("[")
	for i, op := range p {
		line, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  ")
		b.Write(line)
	}
	if len(p) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	return b.Bytes()
}

func applyPatch(t *testing.T, raw, patchJSON []byte) []byte {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		t.Fatalf("decoding patch: %v", err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("patch does not apply to the raw input: %v\n%s", err, patchJSON)
	}
	return out
}

// typedJSON decodes raw as its kind, optionally changes it, and marshals it: the view of the object our
// types have.
func typedJSON(t *testing.T, gvk schema.GroupVersionKind, raw []byte, change func(any)) []byte {
	t.Helper()
	obj := kinds[gvk].newObject()
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, obj); err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(obj)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unknownLeaves returns the leaves of raw that a typed round trip drops: the fields our k8s.io/api does
// not know, keyed by JSON pointer.
func unknownLeaves(t *testing.T, gvk schema.GroupVersionKind, raw []byte) map[string]any {
	t.Helper()
	var rawDoc, typedDoc any
	if err := json.Unmarshal(raw, &rawDoc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(typedJSON(t, gvk, raw, nil), &typedDoc); err != nil {
		t.Fatal(err)
	}
	leaves := map[string]any{}
	var walk func(ptr string, r any)
	walk = func(ptr string, r any) {
		switch v := r.(type) {
		case map[string]any:
			for k, child := range v {
				walk(ptr+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k), child)
			}
		case []any:
			for i, child := range v {
				walk(fmt.Sprintf("%s/%d", ptr, i), child)
			}
		default:
			if _, known := leafAt(typedDoc, ptr); !known && v != nil {
				leaves[ptr] = v
			}
		}
	}
	walk("", rawDoc)
	return leaves
}

// checkUnknownFieldsSurvive fails when a field unknown to our types is missing or changed in applied,
// unless it sat inside a field the patch removed or replaced on purpose (a stripped capabilities object
// goes with whatever it held). It returns how many unknown fields it checked.
func checkUnknownFieldsSurvive(t *testing.T, gvk schema.GroupVersionKind, raw, applied []byte, p patch.Patch) int {
	t.Helper()
	var appliedDoc any
	if err := json.Unmarshal(applied, &appliedDoc); err != nil {
		t.Fatal(err)
	}
	unknown := unknownLeaves(t, gvk, raw)
	checked := 0
next:
	for ptr, want := range unknown {
		for _, op := range p {
			if op.Op != "add" && (ptr == op.Path || strings.HasPrefix(ptr, op.Path+"/")) {
				continue next
			}
		}
		checked++
		if got, ok := leafAt(appliedDoc, ptr); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("unknown field %s = %v was lost or changed (now %v)", ptr, want, got)
		}
	}
	return checked
}

// leafAt follows a JSON pointer through a decoded document.
func leafAt(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	for _, seg := range strings.Split(ptr[1:], "/") {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		switch v := doc.(type) {
		case map[string]any:
			child, ok := v[seg]
			if !ok {
				return nil, false
			}
			doc = child
		case []any:
			var i int
			if _, err := fmt.Sscan(seg, &i); err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// TestGoldenCasesCoverStripTable fails when a row of the strip table has no golden case that strips it
// from each kind of container, so that a new row cannot land without a case, and when a case's change
// has a field outside the metric's closed set.
func TestGoldenCasesCoverStripTable(t *testing.T) {
	inputs, _ := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	stripped := map[string]bool{}
	for _, in := range inputs {
		if strings.HasSuffix(in, ".out.yaml") {
			continue
		}
		c, pol, gvk := loadCase(t, in)
		res, err := mutate(pol, gvk, c.Object, c.facts())
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		for _, ch := range res.Decision.Changes {
			if ch.Action == policy.Strip {
				stripped[ch.Field()] = true
			}
			// The metric's closed set of fields must hold every field a decision produces.
			if ch.MetricField() == policy.OtherField {
				t.Errorf("%s: %s is not among the fields of its rule %q (policy/rules.go), so its metric says %q", in, ch.Path, ch.Rule, policy.OtherField)
			}
		}
	}
	var missing []string
	for _, f := range policy.LinuxOnlyFields() {
		paths := []string{f.Path()}
		if f.Level == policy.ContainerSecurityContextLevel {
			paths = nil
			for _, list := range []string{"containers", "initContainers", "ephemeralContainers"} {
				paths = append(paths, "spec."+list+"[*].securityContext."+f.Name)
			}
		}
		for _, p := range paths {
			if !stripped[p] {
				missing = append(missing, p)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("no golden case strips: %s", strings.Join(missing, "; "))
	}
}
