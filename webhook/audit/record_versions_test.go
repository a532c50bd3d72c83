package audit

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// asVersion1 is pod with its record as a wincompat before issue 29 wrote it: a JSON list of the same
// changes in prose (Change's json tags are version 1's), as old pods in clusters keep it.
func asVersion1(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	changes, err := policy.DecodeChanges(p.Annotations[policy.AnnotationChanges])
	if err != nil {
		t.Fatal(err)
	}
	v1, err := json.Marshal(changes)
	if err != nil {
		t.Fatal(err)
	}
	old := p.DeepCopy()
	old.Annotations[policy.AnnotationChanges] = string(v1)
	return old
}

// The audit reports the same of a pod whatever the version of its record: the change rows, the
// Linux-only image and every run-time readiness finding.
func TestRecordVersionsReadAlike(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{policy.LabelEnabled: "true"}}}
	pods := []*corev1.Pod{admitted(t, "sidecar"), readyPod(t, "ready", nil)}
	if !strings.HasPrefix(pods[0].Annotations[policy.AnnotationChanges], policy.RecordPrefix) {
		t.Fatalf("admission wrote no version 2 record: %s", pods[0].Annotations[policy.AnnotationChanges])
	}
	v2, v1 := []client.Object{ns}, []client.Object{ns.DeepCopy()}
	for _, p := range pods {
		v2, v1 = append(v2, p), append(v1, asVersion1(t, p))
	}
	kinds := append([]string{LinuxOnlyImage, BadAnnotation}, ReadinessKinds()...)
	got2, got1 := run(t, Options{}, v2...), run(t, Options{}, v1...)
	f2, f1 := findings(got2, kinds...), findings(got1, kinds...)
	if len(f2) < 3 || !slices.Equal(f2, f1) {
		t.Errorf("findings of version 2 records:\n %q\nof version 1:\n %q", f2, f1)
	}
	if len(got2.Changes) < 5 || !slices.Equal(got2.Changes, got1.Changes) {
		t.Errorf("change rows of version 2 records:\n %+v\nof version 1:\n %+v", got2.Changes, got1.Changes)
	}
}

// `wincompat audit --audit-log` counts the same changes from an audit log written before version 2 (the
// audit annotations held version 1) as from one written since.
func TestAuditLogReadsBothVersions(t *testing.T) {
	p := readyPod(t, "ready", nil)
	v2 := p.Annotations[policy.AnnotationChanges]
	v1 := asVersion1(t, p).Annotations[policy.AnnotationChanges]
	summary := func(record string) *LogReport {
		t.Helper()
		var log strings.Builder
		for i := range 2 {
			ev, err := json.Marshal(map[string]any{"auditID": "id-" + string(rune('a'+i)), "stage": "ResponseComplete", "verb": "create",
				"requestURI": "/api/v1/namespaces/web/pods", "responseStatus": map[string]int{"code": 201},
				"objectRef":   map[string]string{"resource": "pods", "namespace": "web", "name": "p"},
				"annotations": map[string]string{"pods.wincompat.io/changes": record}})
			if err != nil {
				t.Fatal(err)
			}
			log.Write(append(ev, '\n'))
		}
		rep, err := SummariseLog(strings.NewReader(log.String()))
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	got2, got1 := summary(v2), summary(v1)
	if got2.BadAnnotations+got1.BadAnnotations != 0 || len(got2.Changes) < 3 || !slices.Equal(got2.Changes, got1.Changes) {
		t.Errorf("from version 2: %+v\nfrom version 1: %+v", got2, got1)
	}
}
