package placement

// The leader writes its decision onto a gated pod with one JSON patch. Kubernetes lets little change
// on a stored pod, and only while it is gated: nodeSelector keys added, requirements appended to the
// terms of required node affinity, tolerations added, gates removed. Every patch the leader's goldens
// pin (webhook/testdata/ungate) is sent here to the real API server as an update of the gated pod it was
// made for, and must be accepted, leaving no gate of wincompat's.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

const ungateGoldens = "../../../webhook/testdata/ungate"

func TestUngatePatchesAccepted(t *testing.T) {
	cases, _ := filepath.Glob(filepath.Join(ungateGoldens, "*.patch.json"))
	if len(cases) < 5 {
		t.Fatalf("found %d patches in %s, want at least 5", len(cases), ungateGoldens)
	}
	// No wincompat serves: the pods are created as the goldens store them, in a namespace no webhook
	// of wincompat's is called for.
	cl := e2eutil.NewCluster(t)
	ctx := context.Background()
	const ns = "ungate"
	cl.NewNamespace(t, ns, nil)
	for _, patchFile := range cases {
		name := strings.TrimSuffix(filepath.Base(patchFile), ".patch.json")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(ungateGoldens, name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				Object json.RawMessage `json:"object"`
			}
			if err := yaml.Unmarshal(in, &c); err != nil {
				t.Fatal(err)
			}
			var pod corev1.Pod
			if err := json.Unmarshal(c.Object, &pod); err != nil {
				t.Fatal(err)
			}
			// What the API server sets itself.
			pod.Namespace, pod.Name = ns, name
			pod.UID, pod.ResourceVersion, pod.CreationTimestamp, pod.Status = "", "", metav1.Time{}, corev1.PodStatus{}
			if !policy.Gated(&pod) {
				t.Fatalf("the case's pod carries no gate of wincompat's: %v", pod.Spec.SchedulingGates)
			}
			e2eutil.Create(ctx, t, cl.C, &pod)
			patch, err := os.ReadFile(patchFile)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.C.Patch(ctx, &pod, client.RawPatch(types.JSONPatchType, patch)); err != nil {
				t.Fatalf("the API server refused the leader's update of a gated pod: %v", err)
			}
			var stored corev1.Pod
			if err := cl.C.Get(ctx, client.ObjectKeyFromObject(&pod), &stored); err != nil {
				t.Fatal(err)
			}
			if policy.Gated(&stored) || stored.Labels[policy.LabelGated] != "" {
				t.Errorf("stored with gates %v, labels %v", stored.Spec.SchedulingGates, stored.Labels)
			}
		})
	}
}
