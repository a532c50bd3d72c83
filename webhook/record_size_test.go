package webhook

import (
	"encoding/json"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// The change record of the pod of the benchmarks and `make perf` (benchPod(2)), offline and with a
// cluster of no Windows node: version 2 is at most 55% of what version 1 wrote for the same changes
// (json.Marshal of them, which is what version 1 was), it reads back as every change, and the audit
// annotation is the annotation's own string, rendered once.
func TestChangeRecordOfTheBenchPod(t *testing.T) {
	for name, cluster := range map[string]*policy.Cluster{"offline": nil, "no Windows node": {}} {
		var pod corev1.Pod
		if err := json.Unmarshal(benchPod(2), &pod); err != nil {
			t.Fatal(err)
		}
		facts := benchFacts
		facts.Cluster = cluster
		d, err := policy.Default().Decide(&pod, facts)
		if err != nil {
			t.Fatal(err)
		}
		v1, err := json.Marshal(d.Changes)
		if err != nil {
			t.Fatal(err)
		}
		v2 := pod.Annotations[policy.AnnotationChanges]
		t.Logf("%s: %d changes, version 1 %d bytes, version 2 %d bytes (%d%%)", name, len(d.Changes), len(v1), len(v2), 100*len(v2)/len(v1))
		if len(v2)*100 > len(v1)*55 {
			t.Errorf("%s: version 2 is %d bytes, more than 55%% of version 1's %d", name, len(v2), len(v1))
		}
		if a := d.ChangesJSON(); a != v2 || unsafe.StringData(a) != unsafe.StringData(v2) {
			t.Errorf("%s: the audit annotation's record is rendered again", name)
		}
		back, err := policy.DecodeChanges(v2)
		if err != nil || len(back) != len(d.Changes) {
			t.Fatalf("%s: reads back as %d changes (%v), %d made", name, len(back), err, len(d.Changes))
		}
		for i, c := range d.Changes {
			if b := back[i]; b.Action != c.Action || b.Path != c.Path || b.Reason != c.Reason || b.Rule != c.Rule ||
				string(b.From) != string(c.From) || string(b.To) != string(c.To) {
				t.Errorf("%s: change %d reads back as %+v, was %+v", name, i, b, c)
			}
		}
	}
}
