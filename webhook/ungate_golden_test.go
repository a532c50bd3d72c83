package webhook

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
)

// The leader's cases live in testdata/ungate: a stored pod wincompat gated, the facts when the leader
// decides, and what it writes. As for admission: the patch and the result are pinned, the patch applied
// to the raw pod gives exactly the decided pod, and a second pass changes nothing. That Kubernetes
// accepts each patch as an update of a gated pod is proven on the API server (test/e2e/placement).
const ungateDir = "testdata/ungate"

// ungateOutput is what the leader's pass leaves: no admission warnings reach anyone, so the record and
// the pod are the result; Skipped says why a pod was only released.
type ungateOutput struct {
	Skipped string          `json:"skipped,omitempty"`
	Build   string          `json:"build,omitempty"`
	Source  string          `json:"source,omitempty"`
	Object  json.RawMessage `json:"object"`
}

func TestGoldenUngate(t *testing.T) {
	cases, _ := filepath.Glob(filepath.Join(ungateDir, "*.yaml"))
	n := 0
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for _, in := range cases {
		if strings.HasSuffix(in, ".out.yaml") {
			continue
		}
		n++
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			c, pol, _ := loadCase(t, in)
			facts := c.facts()
			res, err := Ungate(pol, c.Object, facts, c.Overdue)
			if err != nil {
				t.Fatal(err)
			}
			patchJSON := formatPatch(t, res.Patch)
			applied := applyPatch(t, c.Object, patchJSON)
			out, err := json.Marshal(ungateOutput{Skipped: res.Decision.Skipped, Build: res.Decision.Build, Source: res.Decision.BuildSource, Object: applied})
			if err != nil {
				t.Fatal(err)
			}
			outYAML, err := yaml.JSONToYAML(out)
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join(ungateDir, name+".patch.json"), patchJSON)
			compareGolden(t, filepath.Join(ungateDir, name+".out.yaml"), outYAML)

			for _, ch := range res.Decision.Changes {
				if ch.Rule == "" || res.Decision.Rule(ch) == "" {
					t.Errorf("%s %s (%s) has no rule the rules table explains", ch.Action, ch.Path, ch.Reason)
				}
			}
			decided := typedJSON(t, pod, c.Object, func(obj any) { pol.Ungate(obj.(*corev1.Pod), facts, c.Overdue) })
			if got := typedJSON(t, pod, applied, nil); !bytes.Equal(got, decided) {
				t.Errorf("patched raw pod differs from the decided pod\npatched: %s\ndecided: %s", got, decided)
			}
			var after corev1.Pod
			if err := json.Unmarshal(applied, &after); err != nil {
				t.Fatal(err)
			}
			if policy.Gated(&after) || after.Labels[policy.LabelGated] != "" {
				t.Errorf("the pod keeps wincompat's gate or its label: %v %v", after.Spec.SchedulingGates, after.Labels)
			}
			again, err := Ungate(pol, applied, facts, c.Overdue)
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Patch) != 0 {
				t.Errorf("second pass is not empty: %s", formatPatch(t, again.Patch))
			}
		})
	}
	if n < 5 {
		t.Fatalf("found %d cases in %s, want at least 5", n, ungateDir)
	}
}
