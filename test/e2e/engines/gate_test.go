package engines

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// testEnginesGateAlike: the scheduling gate, in the three engines of TestEnginesStoreTheSameObject (its
// namespaces and control plane). wincompat is restarted reading a registry on loopback within a budget
// of 500ms, and one Windows chart pod is created in each engine's namespace twice:
//   - with an image the registry answers: the webhook decides the build and stores the pod ungated;
//     in hybrid it removes the gate the admission policies added, and stores the same object;
//   - with an image the registry answers 6s late: the webhook stores the pod behind the gate with its
//     label, no build and one build-gate record entry; hybrid stores the same object (the policies'
//     gate kept, recorded once).
//
// The admission policies alone gate both, recording nothing of it. Compared as the main test compares:
// hybrid byte for byte against the webhook alone (record order and the policies' marker aside), the
// policies alone where mapOnlyDifferences says why.
func testEnginesGateAlike(t *testing.T, cl *e2eutil.Cluster, served *policy.Policy) {
	ctx := context.Background()
	reg := registrytest.Start()
	// Registered before the restart's StopServing, so run after it: Close then waits only for the late
	// answers still sleeping.
	t.Cleanup(reg.Close)
	answered, err := reg.PushIndex("engines/answered", "v1", types.OCIImageIndex, registrytest.Windows("10.0.20348.2227"))
	if err != nil {
		t.Fatal(err)
	}
	late, err := reg.PushIndex("engines/late", "v1", types.OCIImageIndex, registrytest.Windows("10.0.20348.2227"))
	if err != nil {
		t.Fatal(err)
	}
	cl.StopServing()
	cl.Serve(t, func(o *server.Options) {
		o.Policy = served
		// The registry is on loopback, which wincompat reaches only when allowed.
		o.Images = &server.ImageOptions{Timeout: 500 * time.Millisecond, AllowPrivateNetworks: true}
	})
	// The first read of the registry, and the cache, before the pods.
	cl.WaitForAdmission(t, nsEngineWebhook, chartPodOf(nsEngineWebhook, "gate-probe", answered), "the registry's answer", func(p *corev1.Pod, _ []string) bool {
		return p.Annotations[policy.AnnotationBuild] != "" && !policy.Gated(p)
	})

	for _, c := range []struct {
		name, image string
		gated       bool
	}{{"gate-answered", answered, false}, {"gate-not-answered", late, true}} {
		if c.gated {
			// Well past the budget, so that the second creation still finds the first one's lookup pending on a
			// loaded machine; it joins that lookup.
			reg.SetDelay(6 * time.Second)
		}
		stored, warned := map[string]*unstructured.Unstructured{}, map[string][]string{}
		for _, ns := range []string{nsEngineWebhook, nsEngineHybrid, nsEngineMAP} {
			obj := unstructuredPod(t, chartPodOf(ns, c.name, c.image))
			cl.Warnings.Take()
			if err := cl.C.Create(ctx, obj); err != nil {
				t.Fatalf("%s in %s: %v", c.name, ns, err)
			}
			warned[ns], stored[ns] = wincompatWarnings(cl.Warnings.Take()), obj
		}
		reg.SetDelay(0)
		for ns, obj := range stored {
			gated, labelled, entries, build := gateOf(t, obj)
			want := c.gated || ns == nsEngineMAP
			// The webhook records the gate it keeps, once; the admission policies record none.
			wantEntries := 0
			if c.gated && ns != nsEngineMAP {
				wantEntries = 1
			}
			if gated != want || labelled != want || entries != wantEntries || (build != "") == want {
				t.Errorf("%s in %s: gated %v, labelled %s=true %v, %d build-gate record entries, build %q; want gated and labelled %v, %d entries, a build %v",
					c.name, ns, gated, policy.LabelGated, labelled, entries, build, want, wantEntries, !want)
			}
		}
		if d := warningsDiffer(warned[nsEngineWebhook], warned[nsEngineHybrid]); d != "" {
			t.Errorf("%s: %s", c.name, d)
		}
		if diffs := hybridDiffers(t, stored[nsEngineWebhook], stored[nsEngineHybrid]); len(diffs) > 0 {
			t.Errorf("%s: hybrid stored another object than the webhook alone:\n  %s", c.name, strings.Join(diffs, "\n  "))
		}
		for _, d := range objectDiffs(comparable(stored[nsEngineWebhook]), comparable(stored[nsEngineMAP])) {
			if path, _, _ := strings.Cut(d, ": "); listedDifference(genericPath(path)) == "" {
				t.Errorf("%s: the admission policies alone store another %s than the webhook, with no reason listed: %s", c.name, path, d)
			}
		}
		t.Logf("%s: the webhook alone and hybrid stored the same pod (gated: %v), the admission policies alone a gated one", c.name, c.gated)
	}
}

// chartPodOf is a Windows chart pod of one container running image.
func chartPodOf(ns, name, image string) *corev1.Pod {
	return e2eutil.WindowsChartPod(ns, name, image, "app")
}

func unstructuredPod(t *testing.T, pod *corev1.Pod) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: m}
	obj.SetAPIVersion("v1")
	obj.SetKind("Pod")
	return obj
}

// gateOf says whether the stored pod carries wincompat's gate and its label, how many build-gate
// entries its record holds, and its build (annotation or nodeSelector pin).
func gateOf(t *testing.T, obj *unstructured.Unstructured) (gated, labelled bool, entries int, build string) {
	t.Helper()
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pod); err != nil {
		t.Fatal(err)
	}
	for _, c := range e2eutil.DecodeChanges(t, pod.Annotations, policy.AnnotationChanges) {
		if c.Rule == policy.RuleBuildGate {
			entries++
		}
	}
	return policy.Gated(&pod), pod.Labels[policy.LabelGated] == "true", entries,
		pod.Annotations[policy.AnnotationBuild] + pod.Spec.NodeSelector[corev1.LabelWindowsBuild]
}

// hybridDiffers lists how the object hybrid stored differs from the webhook's alone, as the main test
// compares them: the record as a set, the admission policies' marker set aside, then every byte.
func hybridDiffers(t *testing.T, webhookObj, hybridObj *unstructured.Unstructured) []string {
	t.Helper()
	a, b := webhookObj.DeepCopy(), hybridObj.DeepCopy()
	am, bm := templateMeta(a), templateMeta(b)
	var out []string
	if x, y := recordSet(t, am, policy.AnnotationChanges), recordSet(t, bm, policy.AnnotationChanges); fmt.Sprint(x) != fmt.Sprint(y) {
		out = append(out, fmt.Sprintf("record: hybrid\n    %s\n  the webhook alone\n    %s", strings.Join(y, "\n    "), strings.Join(x, "\n    ")))
	}
	for _, m := range []map[string]any{am, bm} {
		ann := m["annotations"].(map[string]any)
		delete(ann, policy.AnnotationChanges)
		delete(ann, policy.AnnotationAdmissionPolicy)
	}
	return append(out, objectDiffs(comparable(a), comparable(b))...)
}
