package webhook

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/grantstest"
)

// FuzzMutate feeds arbitrary objects and namespace facts through the whole pipeline and checks, for every
// input that decodes: the patch applies to the raw input, gives exactly the decided object, keeps fields
// our types do not know, is idempotent, and never widens privileges. The golden inputs are the seeds, so
// `go test` (and `make test`) runs them all on every run; `make fuzz` explores from there.
func FuzzMutate(f *testing.F) {
	inputs, _ := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	for _, in := range inputs {
		if strings.HasSuffix(in, ".out.yaml") {
			continue
		}
		c, _, _ := loadCase(&testing.T{}, in)
		f.Add([]byte(c.Object), c.Namespace.Labels[policy.LabelDefaultOS] == "windows", c.Namespace.Labels["pod-security.kubernetes.io/enforce"] == "restricted", c.Operation == "UPDATE", c.Cluster != nil)
	}
	pol := policy.Default()
	f.Fuzz(func(t *testing.T, raw []byte, defaultOS, restricted, update, server bool) {
		var tm struct{ APIVersion, Kind string }
		if json.Unmarshal(raw, &tm) != nil {
			return
		}
		gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
		if !Supported(gvk) {
			if _, err := mutate(pol, gvk, raw, policy.Facts{}); err == nil {
				t.Fatalf("unsupported kind %v accepted", gvk)
			}
			return
		}
		facts := policy.Facts{Operation: policy.Create, Version: "fuzz",
			Namespace: policy.Namespace{Name: "demo", Labels: map[string]string{policy.LabelEnabled: "true"}}}
		if defaultOS {
			facts.Namespace.Labels[policy.LabelDefaultOS] = "windows"
		}
		if restricted {
			facts.Namespace.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
		}
		if update {
			facts.Operation = policy.Update
		}
		if server {
			facts.Cluster = &policy.Cluster{Builds: []string{"10.0.20348"}, RuntimeClasses: map[string]policy.RuntimeClass{
				"windows-2022": {NodeSelector: map[string]string{"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"}},
			}}
		}
		res, err := mutate(pol, gvk, raw, facts)
		if err != nil {
			return // not an object of its kind: the webhook answers with an error, which is right
		}
		applied := applyPatch(t, raw, formatPatch(t, res.Patch))

		decided := typedJSON(t, gvk, raw, func(obj any) {
			if _, err := pol.Decide(obj, facts); err != nil {
				t.Fatal(err)
			}
		})
		if got := typedJSON(t, gvk, applied, nil); string(got) != string(decided) {
			t.Fatalf("patched raw input differs from the decided object\npatched: %s\ndecided: %s", got, decided)
		}
		checkUnknownFieldsSurvive(t, gvk, raw, applied, res.Patch)
		again, err := mutate(pol, gvk, applied, facts)
		if err != nil || len(again.Patch) != 0 {
			t.Fatalf("second pass not empty (err %v): %s", err, formatPatch(t, again.Patch))
		}
		assertNotWidened(t, gvk, raw, applied)
	})
}

// assertNotWidened fails when the patched object grants more than the input did.
func assertNotWidened(t *testing.T, gvk schema.GroupVersionKind, before, after []byte) {
	t.Helper()
	in, out := podSpecOfRaw(t, gvk, before), podSpecOfRaw(t, gvk, after)
	if in == nil || out == nil {
		return
	}
	if widened := grantstest.Widened(in, out); len(widened) > 0 {
		t.Fatalf("mutation widened privileges: %s", strings.Join(widened, "; "))
	}
}

// podSpecOfRaw decodes raw as its kind and returns its pod spec (nil for a workload without a template).
func podSpecOfRaw(t *testing.T, gvk schema.GroupVersionKind, raw []byte) *corev1.PodSpec {
	t.Helper()
	obj := kinds[gvk].newObject()
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, obj); err != nil {
		t.Fatal(err)
	}
	return podSpecOf(obj)
}
