package admissionpolicy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/wincompat/wincompat/policy"
)

// TestPoliciesBehaveAsPinned: what every policy does, for each of the renderings the other tests use,
// to every pod of the webhook's golden cases and the chart pod (as created and with the marker and OS
// label there already) and to the same pod specs as the templates of a Deployment, a CronJob and a PodTemplate, is
// pinned in testdata/behaviour.txt: per case, whether the matchConditions hold, what changes says and
// a digest of the patch. The file was written by the generator that rendered the policy's values into
// the CEL, before they became parameters; the fixed policies with each policy's parameters must do
// exactly the same (UPDATE_GOLDEN=1 rewrites it: only for a change of behaviour meant as one).
func TestPoliciesBehaveAsPinned(t *testing.T) {
	pods := goldenPods(t)
	c := newAdmissionCompiler(t)
	renderings := policiesShipped(t)
	var got bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(renderings)) {
		policies, params := renderedForEvaluation(t, renderings[name])
		for _, p := range policies {
			e := compilePolicy(t, c, p, params)
			ns := map[string]any{"metadata": map[string]any{"name": "web", "labels": bindingLabels(p.Name)}}
			for _, pod := range pods {
				for _, obj := range objectsFor(t, p.Name, pod.obj) {
					where := fmt.Sprintf("%s / %s / %s / %s", name, p.Name, pod.name, obj.name)
					ev := e.evaluate(t, where, obj.obj, ns, nil)
					patch, err := json.Marshal(ev.patch)
					if err != nil {
						t.Fatal(err)
					}
					sum := sha256.Sum256(patch)
					fmt.Fprintf(&got, "%s: matched=%v changes=%v ops=%d patch=%s\n", where, ev.matched, ev.changes, len(ev.patch), hex.EncodeToString(sum[:8]))
				}
			}
		}
	}
	path := filepath.Join("testdata", "behaviour.txt")
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gotLines, wantLines := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
	if len(gotLines) != len(wantLines) {
		t.Fatalf("%d cases, %s pins %d", len(gotLines), path, len(wantLines))
	}
	differ := 0
	for i := range gotLines {
		if gotLines[i] != wantLines[i] {
			if differ++; differ <= 20 {
				t.Errorf("behaves otherwise:\n got %s\nwant %s", gotLines[i], wantLines[i])
			}
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d cases differ from %s", differ, len(gotLines), path)
	}
}

// objectsFor are the objects the policy named name is evaluated on for the golden pod: the pod as
// created and with the marker and OS label of a first pass, or the pod's metadata and spec as the template of each
// kind the policy matches.
func objectsFor(t *testing.T, name string, pod map[string]any) []namedPod {
	t.Helper()
	template := func() map[string]any {
		return map[string]any{"metadata": deepCopyJSON(t, pod["metadata"]), "spec": deepCopyJSON(t, pod["spec"])}
	}
	meta := func() map[string]any { return map[string]any{"name": "w", "namespace": "web"} }
	switch {
	case strings.HasPrefix(name, "wincompat-pods"):
		marked := deepCopyJSON(t, pod).(map[string]any)
		m := marked["metadata"].(map[string]any)
		ann, _ := m["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		ann["wincompat.io/admission-policy"] = "v1.2.3"
		m["annotations"] = ann
		labels, _ := m["labels"].(map[string]any)
		if labels == nil {
			labels = map[string]any{}
		}
		labels[policy.LabelOS] = "windows"
		m["labels"] = labels
		return []namedPod{{"created", pod}, {"marked", marked}}
	case strings.HasPrefix(name, "wincompat-workloads"):
		return []namedPod{{"deployment", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(), "spec": map[string]any{"template": template()}}}}
	case strings.HasPrefix(name, "wincompat-cronjobs"):
		return []namedPod{{"cronjob", map[string]any{"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(),
			"spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": template()}}}}}}
	case strings.HasPrefix(name, "wincompat-podtemplates"):
		return []namedPod{{"podtemplate", map[string]any{"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta(), "template": template()}}}
	}
	t.Fatalf("no objects for policy %s", name)
	return nil
}

// renderedForEvaluation are the policies that do what pol says, and their params object as the API
// server passes it to CEL (an unstructured ConfigMap), with version v1.2.3.
func renderedForEvaluation(t testing.TB, pol *policy.Policy) ([]admissionregistrationv1.MutatingAdmissionPolicy, map[string]any) {
	t.Helper()
	r := Render(pol, Options{Version: "v1.2.3"})
	data := map[string]any{}
	for k, v := range r.Params.Data {
		data[k] = v
	}
	return r.Policies, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": r.Params.Name, "namespace": r.Params.Namespace}, "data": data}
}
