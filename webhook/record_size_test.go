package webhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// recordBudget is issue 29's goal for the change record of the perf pod: 1 KiB.
const recordBudget = 1024

// The change record of the pod of the benchmarks (benchPod(2)) and of `make perf` (test/lab/perf's
// ChartPod(2), copied to policy/admissionpolicy/testdata/chartpod.json, which test/lab/perf keeps equal to
// it): the same pod but for its namespace. Offline and with a cluster of no Windows node (as `make perf`
// runs it), its record is at most 1 KiB, it reads back as every change, and the audit annotation is the
// annotation's own string, rendered once.
func TestChangeRecordOfTheBenchPod(t *testing.T) {
	perf, err := os.ReadFile(filepath.Join("..", "policy", "admissionpolicy", "testdata", "chartpod.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bench, chart corev1.Pod
	if err := json.Unmarshal(benchPod(2), &bench); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(perf, &chart); err != nil {
		t.Fatal(err)
	}
	chart.Namespace = bench.Namespace
	if !reflect.DeepEqual(bench, chart) {
		t.Fatal("benchPod(2) is no longer the pod of make perf: measure both")
	}
	for name, cluster := range map[string]*policy.Cluster{"offline": nil, "no Windows node": {}} {
		pod := bench.DeepCopy()
		facts := benchFacts
		facts.Cluster = cluster
		d, err := policy.Default().Decide(pod, facts)
		if err != nil {
			t.Fatal(err)
		}
		record := pod.Annotations[policy.AnnotationChanges]
		t.Logf("%s: %d changes, %d bytes: %s", name, len(d.Changes), len(record), record)
		if len(record) > recordBudget {
			t.Errorf("%s: the record is %d bytes, more than %d", name, len(record), recordBudget)
		}
		if a := d.ChangesJSON(); a != record || unsafe.StringData(a) != unsafe.StringData(record) {
			t.Errorf("%s: the audit annotation's record is rendered again", name)
		}
		back, err := policy.DecodeChanges(record)
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
