package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// TestPodGateAsTheWebhookGates: the pods policies gate (policy.SchedulingGate and the label
// policy.LabelGated=true) exactly the Windows pods the Go decision gates when none of their images is
// answered (Facts.Gate, every image pending), for every golden pod and the chart pod, in each pods
// policy's namespaces; but for a pod with a wincompat.io/build annotation the catalog does not know,
// which the Go decision gates and the policies, which have no catalog, leave to the build annotation.
// With params' gate "false", and on a pod the webhook has decided (wincompat.io/version), they add no
// gate, and changes stays exact.
func TestPodGateAsTheWebhookGates(t *testing.T) {
	pods := goldenPods(t)
	c := newAdmissionCompiler(t)
	pol := policy.Default()
	policies, params := renderedForEvaluation(t, pol)
	off := deepCopyJSON(t, params).(map[string]any)
	off["data"].(map[string]any)[paramGate] = "false"
	gated, ungated, unknownBuild, checked := 0, 0, 0, 0
	for _, p := range policies {
		if !strings.HasPrefix(p.Name, "wincompat-pods") {
			continue
		}
		on, noGate := compilePolicy(t, c, p, params), compilePolicy(t, c, p, off)
		nsLabels := bindingLabels(p.Name)
		ns := map[string]any{"metadata": map[string]any{"name": "web", "labels": nsLabels}}
		for _, pod := range pods {
			where := fmt.Sprintf("%s, %s", p.Name, pod.name)
			ev := on.evaluate(t, where, pod.obj, ns, nil)
			if !ev.matched {
				continue
			}
			checked++
			var typed corev1.Pod
			raw, err := json.Marshal(pod.obj)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &typed); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			facts := policy.Facts{Operation: policy.Create, Version: "v1.2.3", Gate: true, Images: map[string]policy.Image{},
				Namespace: policy.Namespace{Name: "web", Labels: map[string]string{}}}
			for k, v := range nsLabels {
				facts.Namespace.Labels[k] = v.(string)
			}
			for _, cs := range [][]corev1.Container{typed.Spec.InitContainers, typed.Spec.Containers} {
				for _, ct := range cs {
					facts.Images[ct.Image] = policy.Image{Err: "not answered yet", Pending: true}
				}
			}
			d, err := pol.Decide(&typed, facts)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if d.Denied != "" || !d.Windows {
				continue
			}
			patched := applyOps(t, where, pod.obj, ev.patch)
			cel := gatedObject(patched)
			if labelled := labelOf(patched, policy.LabelGated) == "true"; labelled != cel {
				t.Errorf("%s: the policies leave the gate %v and the label %s=true %v", where, cel, policy.LabelGated, labelled)
			}
			switch {
			case cel == d.Gated && cel:
				gated++
			case cel == d.Gated:
				ungated++
			case d.Gated && !knownBuild(pol, typed.Annotations):
				unknownBuild++
			default:
				t.Errorf("%s: the policies gate it %v, the Go decision with every image pending %v", where, cel, d.Gated)
			}
			// Gating off, and after the webhook: nothing of the gate's, and changes still exact.
			versioned := deepCopyJSON(t, pod.obj).(map[string]any)
			meta := versioned["metadata"].(map[string]any)
			ann, _ := meta["annotations"].(map[string]any)
			if ann == nil {
				ann = map[string]any{}
			}
			ann[policy.AnnotationVersion] = "v1.2.3"
			meta["annotations"] = ann
			for _, run := range []struct {
				name string
				obj  map[string]any
				e    *compiledPolicy
			}{{"gate off", pod.obj, noGate}, {"after the webhook", versioned, on}} {
				ev := run.e.evaluate(t, where+", "+run.name, run.obj, ns, nil)
				if ev.changes != (len(ev.patch) > 0) {
					t.Errorf("%s, %s: the changes matchCondition is %v, the patch has %d operations", where, run.name, ev.changes, len(ev.patch))
				}
				for _, op := range ev.patch {
					if path := op["path"].(string); strings.HasPrefix(path, "/spec/schedulingGates") || strings.HasSuffix(path, "/wincompat.io~1gated") {
						t.Errorf("%s, %s: the policies %s %s", where, run.name, op["op"], path)
					}
				}
			}
		}
	}
	if gated < 20 || ungated < 10 {
		t.Fatalf("%d Windows pods through a pods policy: %d gated, %d not: the golden cases are not what this test expects", checked, gated, ungated)
	}
	t.Logf("%d Windows pods through a pods policy: %d gated as the Go decision gates them, %d ungated as it leaves them, %d with an unknown build annotation gated by it alone", checked, gated, ungated, unknownBuild)
}

// gatedObject: the pod (as JSON) carries wincompat's scheduling gate.
func gatedObject(pod map[string]any) bool {
	spec, _ := pod["spec"].(map[string]any)
	gates, _ := spec["schedulingGates"].([]any)
	for _, g := range gates {
		if m, _ := g.(map[string]any); m["name"] == policy.SchedulingGate {
			return true
		}
	}
	return false
}

func labelOf(pod map[string]any, key string) string {
	meta, _ := pod["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	v, _ := labels[key].(string)
	return v
}

// knownBuild: the pod's wincompat.io/build annotation names a build of the catalog.
func knownBuild(pol *policy.Policy, annotations map[string]string) bool {
	v, set := annotations[policy.AnnotationBuild]
	if !set {
		return false
	}
	_, ok := pol.ResolveBuild(v)
	return ok
}
