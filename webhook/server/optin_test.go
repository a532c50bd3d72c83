package server

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/wincompat/wincompat/policy"
)

// TestOptInCheck: a Windows pod in a namespace whose opt-in label is mistyped gets a warning naming
// the label, its value and the fix; anything else, and anything it cannot read, is allowed in silence,
// and nothing is ever refused or changed.
func TestOptInCheck(t *testing.T) {
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	c := fake.NewClientBuilder().WithObjects(
		ns("yes", map[string]string{policy.LabelEnabled: "yes"}),
		ns("no", map[string]string{policy.LabelEnabled: "no"}),
		ns("kube-system", map[string]string{policy.LabelEnabled: "yes"}),
	).Build()
	pol := &atomic.Pointer[policy.Policy]{}
	pol.Store(policy.Default())
	check := optInCheck{policy: pol, namespaces: c}
	windows := &corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "app", Image: "nanoserver"}}}
	byAffinityNotWindows := &corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"windows"}}}}}}}},
		Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}
	const want = `wincompat: left this Windows pod unchanged: in namespace yes, label wincompat.io/enabled=yes does not opt the namespace in: only the value "true" does; set wincompat.io/enabled=true (kubectl label namespace yes wincompat.io/enabled=true --overwrite)`
	for _, tc := range []struct {
		name, ns string
		op       admissionv1.Operation
		labels   map[string]string
		spec     *corev1.PodSpec
		raw      string
		want     []string
	}{
		{"Windows pod, enabled=yes", "yes", admissionv1.Create, nil, windows, "", []string{want}},
		{"Linux pod", "yes", admissionv1.Create, nil, byAffinityNotWindows, "", nil},
		{"skip label", "yes", admissionv1.Create, map[string]string{policy.LabelSkip: "true"}, windows, "", nil},
		{"a deliberate no", "no", admissionv1.Create, nil, windows, "", nil},
		{"excluded by the policy", "kube-system", admissionv1.Create, nil, windows, "", nil},
		{"namespace not found", "gone", admissionv1.Create, nil, windows, "", nil},
		{"an update", "yes", admissionv1.Update, nil, windows, "", nil},
		{"not a pod", "yes", admissionv1.Create, nil, nil, `{"spec":{"os":"windows"}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(tc.raw)
			if tc.spec != nil {
				raw, _ = json.Marshal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: tc.ns, Labels: tc.labels}, Spec: *tc.spec})
			}
			resp := check.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: tc.ns, Operation: tc.op,
				Object: runtime.RawExtension{Raw: raw}}})
			if !resp.Allowed || len(resp.Patch) > 0 || len(resp.Patches) > 0 {
				t.Errorf("refused or changed: %+v", resp)
			}
			if !slices.Equal(resp.Warnings, tc.want) {
				t.Errorf("warnings %q, want %q", resp.Warnings, tc.want)
			}
		})
	}
}
