package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/wincompat/wincompat/policy"
)

// namespaces is a NamespaceReader over a fixed set, standing in for the informer cache.
type namespaces map[string]map[string]string

func (n namespaces) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	labels, ok := n[key.Name]
	if !ok {
		return apierrors.NewNotFound(corev1.Resource("namespaces"), key.Name)
	}
	if labels == nil {
		return errors.New("cache unavailable")
	}
	obj.(*corev1.Namespace).Labels = labels
	return nil
}

func newTestHandler(t *testing.T, newHandler func(Config) *Handler) (*Handler, *Metrics) {
	t.Helper()
	current := &atomic.Pointer[policy.Policy]{}
	current.Store(policy.Default())
	m := NewMetrics(prometheus.NewRegistry())
	h := newHandler(Config{
		Policy:     current,
		Namespaces: namespaces{"demo": {policy.LabelEnabled: "true"}, "broken": nil},
		Version:    "unit",
		Metrics:    m,
		Log:        logr.Discard(),
	})
	return h, m
}

func podRequest(ns string, pod string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "uid-1",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: ns,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: []byte(pod)},
	}}
}

const windowsPodJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-"},"spec":{"os":{"name":"windows"},
"securityContext":{"runAsUser":1000},"containers":[{"name":"web","image":"mcr.microsoft.com/windows/nanoserver:ltsc2019"}]}}`

func TestHandlerMutatesWindowsPod(t *testing.T) {
	h, m := newTestHandler(t, NewPodHandler)
	resp := h.Handle(context.Background(), podRequest("demo", windowsPodJSON))
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch || len(resp.Patch) == 0 {
		t.Fatalf("response: %+v", resp.AdmissionResponse)
	}
	var ops []map[string]any
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatalf("patch is not JSON: %v", err)
	}
	if len(resp.Warnings) == 0 || !strings.HasPrefix(resp.Warnings[0], "wincompat: ") {
		t.Errorf("warnings: %q", resp.Warnings)
	}
	changes, err := policy.DecodeChanges(resp.AuditAnnotations["changes"])
	if err != nil || len(changes) == 0 || resp.AuditAnnotations["build"] != "10.0.17763" || resp.AuditAnnotations["build-source"] != "image" {
		t.Errorf("audit annotations: %v (%v)", resp.AuditAnnotations, err)
	}
	if got := testutil.ToFloat64(m.admissions.WithLabelValues("pods", "CREATE", "mutated", policy.ModeEnforce)); got != 1 {
		t.Errorf("admission counter = %v", got)
	}
	if got := testutil.ToFloat64(m.changes.WithLabelValues("strip", "spec.securityContext.runAsUser", policy.ModeEnforce)); got != 1 {
		t.Errorf("changes counter = %v", got)
	}
	if got := testutil.ToFloat64(m.builds.WithLabelValues("10.0.17763", "image", policy.ModeEnforce)); got != 1 {
		t.Errorf("build counter = %v", got)
	}
}

func TestHandlerAnswers(t *testing.T) {
	linux := strings.Replace(windowsPodJSON, `"windows"`, `"linux"`, 1)
	for name, tc := range map[string]struct {
		req       admission.Request
		pod       bool
		allowed   bool
		code      int32
		message   string
		warning   string
		result    string
		wantPatch bool
		patch     string // the exact patch, when it matters
	}{
		"linux pod":            {req: podRequest("demo", linux), pod: true, allowed: true, result: "skipped"},
		"unlabelled namespace": {req: podRequest("other", windowsPodJSON), pod: true, allowed: true, result: "skipped"},
		"namespace unreadable": {req: podRequest("broken", windowsPodJSON), pod: true, code: http.StatusInternalServerError, message: "reading namespace broken", result: "error"},
		"null object":          {req: podRequest("demo", "null"), pod: true, code: http.StatusBadRequest, message: "no object", result: "error"},
		"no object":            {req: podRequest("demo", ""), pod: true, code: http.StatusBadRequest, message: "no object", result: "error"},
		"wrong type in a field": {req: podRequest("demo", strings.Replace(windowsPodJSON, "1000", `"x"`, 1)), pod: true, code: http.StatusBadRequest,
			message: "decoding Pod", result: "error"},
		"workload on the pod path": {req: func() admission.Request {
			r := podRequest("demo", `{}`)
			r.Resource.Resource, r.Kind.Kind = "deployments", "Deployment"
			return r
		}(), pod: true, allowed: true, warning: "does not handle deployments", result: "ignored"},
		"unknown kind on the workload path": {req: func() admission.Request {
			r := podRequest("demo", `{"kind":"Widget"}`)
			r.Resource.Resource, r.Kind = "deployments", metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
			return r
		}(), allowed: true, warning: "unsupported object", result: "ignored"},
		"delete is not ours": {req: func() admission.Request {
			r := podRequest("demo", windowsPodJSON)
			r.Operation = admissionv1.Delete
			return r
		}(), pod: true, allowed: true, result: "ignored"},
		"nothing to change": {req: podRequest("demo", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a",
			"labels":{"admission.datadoghq.com/enabled":"false","instana-autotrace":"false","kuma.io/sidecar-injection":"disabled","sidecar.istio.io/inject":"false","wincompat.io/os":"windows"},
			"annotations":{"wincompat.io/version":"unit","appmesh.k8s.aws/sidecarInjectorWebhook":"disabled","consul.hashicorp.com/connect-inject":"false",
				"dynatrace.com/inject":"false","linkerd.io/inject":"disabled","openservicemesh.io/sidecar-injection":"disabled"}},
			"spec":{"os":{"name":"windows"},"nodeSelector":{"kubernetes.io/os":"windows"},"tolerations":[{"key":"os","operator":"Exists"}],"containers":[{"name":"a","image":"a","resources":{"limits":{"memory":"64Mi"}}}]}}`),
			// Still a patch, one that changes nothing: it makes the API server decode the object again
			// from JSON, dropping empty Linux-only lists it would otherwise validate.
			pod: true, allowed: true, result: "unchanged", wantPatch: true, patch: `[{"op":"test","path":"/kind","value":"Pod"}]`},
	} {
		t.Run(name, func(t *testing.T) {
			newHandler := NewWorkloadHandler
			if tc.pod {
				newHandler = NewPodHandler
			}
			h, m := newTestHandler(t, newHandler)
			resp := h.Handle(context.Background(), tc.req)
			if resp.Allowed != tc.allowed {
				t.Errorf("allowed = %v, want %v (%+v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if tc.code != 0 && (resp.Result == nil || resp.Result.Code != tc.code || !strings.Contains(resp.Result.Message, tc.message)) {
				t.Errorf("result = %+v, want code %d with %q", resp.Result, tc.code, tc.message)
			}
			if (len(resp.Patch) > 0) != tc.wantPatch || tc.patch != "" && string(resp.Patch) != tc.patch {
				t.Errorf("patch = %s", resp.Patch)
			}
			if tc.warning != "" && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tc.warning)) {
				t.Errorf("warnings = %q, want one with %q", resp.Warnings, tc.warning)
			}
			total := 0.0
			for _, resource := range []string{"pods", "deployments", "other"} {
				total += testutil.ToFloat64(m.admissions.WithLabelValues(resource, string(tc.req.Operation), tc.result, policy.ModeEnforce))
			}
			if total != 1 {
				t.Errorf("no admission counted with result %q", tc.result)
			}
		})
	}
}

func TestHandlerEphemeralContainers(t *testing.T) {
	h, _ := newTestHandler(t, NewPodHandler)
	req := podRequest("demo", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"os":{"name":"windows"},
	"containers":[{"name":"a","image":"a"}],"ephemeralContainers":[{"name":"debug","image":"a","securityContext":{"capabilities":{"add":["SYS_PTRACE"]}}}]}}`)
	req.Operation, req.SubResource = admissionv1.Update, "ephemeralcontainers"
	resp := h.Handle(context.Background(), req)
	if !resp.Allowed || string(resp.Patch) != `[{"op":"remove","path":"/spec/ephemeralContainers/0/securityContext/capabilities"}]` {
		t.Errorf("response: allowed %v patch %s", resp.Allowed, resp.Patch)
	}
}

func TestHandlerReadsANamespaceTheCacheHasNotSeen(t *testing.T) {
	h, _ := newTestHandler(t, NewPodHandler)
	h.namespacesLive = namespaces{"fresh": {policy.LabelEnabled: "true"}}
	resp := h.Handle(context.Background(), podRequest("fresh", windowsPodJSON))
	if !resp.Allowed || len(resp.Patch) == 0 {
		t.Errorf("a pod in a namespace only the API server knows yet was not mutated: %+v", resp.AdmissionResponse)
	}
}

func TestMutateRefusesDuplicateKeys(t *testing.T) {
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","spec":{"os":{"name":"windows"},"containers":[{"name":"a","securityContext":{"runAsUser":1},"securityContext":{}}]}}`)
	_, err := mutate(policy.Default(), schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, raw, policy.Facts{Operation: policy.Create})
	var de *DecodeError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("a duplicated key must be a decode error, got %v", err)
	}
}

// TestMetricLabelsAreClosedSets sends what a pod author or a direct caller chooses (a build in the pod's
// own node affinity, a recorded build source, a container name with brackets, an operation and a
// resource of their own) and checks the exact series that come out: nothing they wrote becomes a label.
func TestMetricLabelsAreClosedSets(t *testing.T) {
	h, m := newTestHandler(t, NewPodHandler)
	hostile := strings.Repeat("evil", 64)
	affinity := `{"os":{"name":"windows"},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
		{"matchExpressions":[{"key":"node.kubernetes.io/windows-build","operator":"In","values":["` + hostile + `"]}]}]}}},
		"containers":[{"name":"web","image":"example.com/web:1"}]}`
	recorded := `{"os":{"name":"windows"},"containers":[{"name":"web","image":"example.com/web:1"}]}`
	bracketed := `{"os":{"name":"windows"},"containers":[{"name":"a].` + hostile + `[b","image":"example.com/web:1","securityContext":{"runAsUser":1}}]}`
	reviews := []admission.Request{
		podRequest("demo", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"affinity"},"spec":`+affinity+`}`),
		podRequest("demo", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"recorded","annotations":{"wincompat.io/build":"10.0.17763","wincompat.io/build-source":"`+hostile+`"}},"spec":`+recorded+`}`),
		podRequest("demo", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bracketed"},"spec":`+bracketed+`}`),
	}
	op := podRequest("demo", windowsPodJSON)
	op.Operation = admissionv1.Operation(hostile)
	res := podRequest("demo", windowsPodJSON)
	res.Resource.Resource = hostile
	reviews = append(reviews, op, res)
	for _, r := range reviews {
		h.Handle(context.Background(), r)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.admissions, m.changes, m.builds)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		for _, s := range f.GetMetric() {
			series := f.GetName() + "{"
			for i, l := range s.GetLabel() {
				if i > 0 {
					series += ","
				}
				series += l.GetName() + "=" + l.GetValue()
			}
			got = append(got, series+"}")
		}
	}
	want := []string{
		"wincompat_admission_total{mode=enforce,operation=CREATE,resource=other,result=ignored}",
		"wincompat_admission_total{mode=enforce,operation=CREATE,resource=pods,result=mutated}",
		"wincompat_admission_total{mode=enforce,operation=other,resource=pods,result=ignored}",
		"wincompat_build_selected_total{build=10.0.17763,mode=enforce,source=other}",
		"wincompat_build_selected_total{build=other,mode=enforce,source=affinity}",
		"wincompat_changes_total{action=inject,field=metadata.annotations,mode=enforce}",
		"wincompat_changes_total{action=inject,field=metadata.labels,mode=enforce}",
		"wincompat_changes_total{action=inject,field=other,mode=enforce}", // runAsUserName of the bracketed container
		"wincompat_changes_total{action=inject,field=spec.nodeSelector[kubernetes.io/os],mode=enforce}",
		"wincompat_changes_total{action=inject,field=spec.nodeSelector[node.kubernetes.io/windows-build],mode=enforce}",
		"wincompat_changes_total{action=inject,field=spec.runtimeClassName,mode=enforce}",
		"wincompat_changes_total{action=inject,field=spec.tolerations,mode=enforce}",
		"wincompat_changes_total{action=strip,field=other,mode=enforce}", // its runAsUser
		"wincompat_changes_total{action=warn,field=other,mode=enforce}",  // its memory limit (a readiness check)
		"wincompat_changes_total{action=warn,field=spec.containers[*].resources.limits.memory,mode=enforce}",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
