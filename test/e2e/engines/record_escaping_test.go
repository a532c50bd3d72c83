package engines

// Issue 24, finding 11: the admission policies write the change record (wincompat.io/changes) by CEL
// string concatenation, and mutating admission runs before validation, so every string of the object
// they echo can hold what a pod author likes at that moment; some of them (the annotations and fields
// the policies remove) are never validated at all. Through the real API server, with the exported
// policies and no wincompat webhook: pods whose every echoed string is hostile must come out with a
// record that parses and holds exactly the entries the Go decision makes for the same pod, byte for
// byte as the webhook encodes them, and no forged one. Values validation refuses are seen as the
// policies left them by a webhook of this test that only listens (it runs after the policies), then
// refused by validation; the others are stored, and the audit reads them back.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/audit"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

const nsEscaping = "map-escaping"

// hostile closes the string it lands in and forges an entry of its own (an entry of one change, then a
// group of strips), then carries every character
// encoding/json escapes (all of U+0000–U+001F, quote, backslash, <, >, &, U+2028, U+2029) and some it
// does not (DEL, a bidi override, ']', '}', '~', '/').
var hostile = func() string {
	var b strings.Builder
	b.WriteString(`x"],["strip","spec.hostNetwork",true,null,null,"forged"],["inject","`)
	b.WriteString(`x"],["s","spec",{"hostNetwork":true}],["i","`)
	for r := rune(0); r < 0x20; r++ {
		b.WriteRune(r)
	}
	b.WriteString("\\\"<>&\u2028\u2029\x7f\u202e]}~/'")
	return b.String()
}()

// hostileKey is hostile without its control characters, for map keys the policies remove: the API
// server writes a JSONPatch path with strconv.Quote (k8s.io/apiserver v0.36.3,
// admission/plugin/policy/mutating/patch/json_patch.go), which is not JSON for control characters, so
// it refuses any removal of such a key whoever built the patch ("failed to decode path"): the pod is
// refused, as its keys would be by validation.
var hostileKey = strings.Map(func(r rune) rune {
	if r < 0x20 || r == 0x7f {
		return -1
	}
	return r
}, hostile)

// listener is an admission webhook that allows everything and keeps the change record of each pod as
// it arrives, after the admission policies.
type listener struct {
	mu      sync.Mutex
	records map[string]string // by pod name
}

func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	var pod struct {
		Metadata struct {
			Name        string            `json:"name"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(review.Request.Object.Raw, &pod); err == nil {
		l.mu.Lock()
		l.records[pod.Metadata.Name] = pod.Metadata.Annotations[policy.AnnotationChanges]
		l.mu.Unlock()
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(review)
}

func (l *listener) seen(name string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, ok := l.records[name]
	return rec, ok
}

// listen installs l as a mutating webhook for the pods of ns, served over TLS on loopback.
func listen(ctx context.Context, t *testing.T, c client.Client, ns string, l *listener) {
	t.Helper()
	none, never, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.NeverReinvocationPolicy, admissionregistrationv1.Fail
	e2eutil.Create(ctx, t, c, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "record-listener"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "listener.e2e.wincompat.io",
			ClientConfig:            e2eutil.ServeWebhook(t, l, "/listen"),
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      &never,
			FailurePolicy:           &fail,
		}},
	})
	// The API server loads webhook configurations a moment after they are created.
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "listener-probe", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}}
		if err := c.Create(ctx, probe, client.DryRunAll); err == nil {
			if _, ok := l.seen("listener-probe"); ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the listening webhook is not called after 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hostilePod is a Windows pod; edit sets the hostile strings.
func hostilePod(name string, edit func(spec, meta map[string]any)) *unstructured.Unstructured {
	spec := map[string]any{
		"os": map[string]any{"name": "windows"},
		"containers": []any{map[string]any{
			"name": "app", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022",
			"securityContext": map[string]any{"runAsGroup": int64(1)},
		}},
	}
	meta := map[string]any{"name": name, "namespace": nsEscaping}
	edit(spec, meta)
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}}
}

func TestAdmissionPolicyRecordEscaping(t *testing.T) {
	ctx := context.Background()
	cfg, c := controlplane.Start(t)
	e2eutil.RequireAdmissionPolicies(t, cfg)
	pol := policy.Default()
	e2eutil.InstallAdmissionPolicies(ctx, t, c, admissionpolicy.Render(pol, admissionpolicy.Options{Version: "e2e-escaping"}))
	labels := map[string]string{policy.LabelEnabled: "true"}
	e2eutil.SetUpNamespace(ctx, t, c, nsEscaping, labels, nil)
	e2eutil.WaitForAdmissionPolicy(t, c, nsEscaping)
	l := &listener{records: map[string]string{}}
	listen(ctx, t, c, nsEscaping, l)
	facts := policy.Facts{Operation: policy.Create, Version: "e2e-escaping", Namespace: policy.Namespace{Name: nsEscaping, Labels: labels}}

	cases := []struct {
		pod *unstructured.Unstructured
		// refused is the field validation refuses, "" for a pod the API server stores.
		refused string
	}{
		// Stored: everything hostile here is removed or replaced by the policies before validation,
		// or never validated (a mount path).
		{hostilePod("annotations-and-removed-fields", func(spec, meta map[string]any) {
			meta["annotations"] = map[string]any{
				"seccomp.security.alpha.kubernetes.io/pod":                        "localhost/" + hostile,
				"container.seccomp.security.alpha.kubernetes.io/app":              "localhost/" + hostile,
				"container.apparmor.security.beta.kubernetes.io/app" + hostileKey: "localhost/" + hostile,
				"example.com/note": hostile, // kept, and in no record
			}
			spec["nodeSelector"] = map[string]any{corev1.LabelOSStable: hostile}
			spec["dnsPolicy"] = "ClusterFirstWithHostNet"
			spec["securityContext"] = map[string]any{
				"fsGroupChangePolicy": hostile, "supplementalGroupsPolicy": hostile, "seLinuxChangePolicy": hostile, "runAsUser": int64(1000),
			}
			spec["volumes"] = []any{map[string]any{"name": "data", "emptyDir": map[string]any{"medium": "Memory"}}}
			container := spec["containers"].([]any)[0].(map[string]any)
			container["securityContext"] = map[string]any{"procMount": hostile, "runAsGroup": int64(1)}
			container["volumeMounts"] = []any{map[string]any{"name": "data", "mountPath": `C:\data` + hostile, "mountPropagation": hostile}}
			huge := map[string]any{"hugepages-" + hostileKey: "2Mi"}
			container["resources"] = map[string]any{"limits": huge, "requests": huge}
		}), ""},
		// Printable only, so that without escaping the record would still parse, with the forged
		// entry in it (a value the policies replace, never validated).
		{hostilePod("printable-forgery", func(spec, meta map[string]any) {
			spec["nodeSelector"] = map[string]any{corev1.LabelOSStable: `x","windows","windows-node-selector","conflicted with a Windows pod"],` +
				`["s","spec",{"hostNetwork":true}],["w","x","`}
		}), ""},
		{hostilePod("printable-forgery-entry", func(spec, meta map[string]any) {
			spec["nodeSelector"] = map[string]any{corev1.LabelOSStable: `x","windows","windows-node-selector","conflicted with a Windows pod"],` +
				`["strip","spec.hostNetwork",true,null,null,"forged"],["warn","x","`}
		}), ""},
		// Cost: a plain value of 200 KiB skips the escaping and stays within the API server's CEL
		// limits, as before escaping.
		{hostilePod("large-plain-annotation", func(spec, meta map[string]any) {
			meta["annotations"] = map[string]any{"seccomp.security.alpha.kubernetes.io/pod": "localhost/" + strings.Repeat("a", 200<<10)}
		}), ""},
		// Refused by validation, after the policies: names of containers in every list, and of a
		// volume whose memory medium goes.
		{hostilePod("container-names", func(spec, meta map[string]any) {
			container := spec["containers"].([]any)[0].(map[string]any)
			container["name"] = hostile
			spec["initContainers"] = []any{map[string]any{"name": "init" + hostile, "image": "busybox", "securityContext": map[string]any{"privileged": false, "runAsUser": int64(7)}}}
			spec["ephemeralContainers"] = []any{map[string]any{"name": "debug" + hostile, "image": "busybox", "securityContext": map[string]any{"capabilities": map[string]any{}}}}
		}), "spec.containers[0].name"},
		{hostilePod("volume-names", func(spec, meta map[string]any) {
			spec["volumes"] = []any{map[string]any{"name": hostile, "emptyDir": map[string]any{"medium": "Memory"}}}
		}), "spec.volumes[0].name"},
	}
	for _, tc := range cases {
		name := tc.pod.GetName()
		raw, err := tc.pod.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		// What the webhook would record for the same pod, limited to what both engines do.
		res, err := webhook.MutateResolving(context.Background(), pol, tc.pod.GroupVersionKind(), raw, facts, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var want []policy.Change
		for _, ch := range res.Decision.Changes {
			if sharedChange(ch) {
				want = append(want, asRecordedByCEL(ch))
			}
		}
		if len(want) == 0 {
			t.Fatalf("%s: the Go decision changes nothing the policies change: the case proves nothing", name)
		}
		wantRecord := policy.EncodeChanges(want)

		obj := tc.pod.DeepCopy()
		err = c.Create(ctx, obj, client.DryRunAll)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.refused != "" && err == nil:
			t.Errorf("%s: admitted, want refused by validation on %s", name, tc.refused)
		case tc.refused != "" && !refusedOn(err, tc.refused):
			// Anything else (an evaluation error of the policies' CEL, say) is not validation.
			t.Errorf("%s: refused, but not by validation of %s: %v", name, tc.refused, err)
		}
		// As the policies left it, before validation.
		atAdmission, ok := l.seen(name)
		if !ok {
			t.Errorf("%s: never reached the listening webhook", name)
			continue
		}
		checkRecord(t, name+" (at admission)", atAdmission, want, wantRecord)
		if tc.refused != "" || err != nil {
			continue
		}
		stored := obj.GetAnnotations()[policy.AnnotationChanges]
		if stored != atAdmission {
			t.Errorf("%s: stored record differs from the one at admission:\n%q\n%q", name, stored, atAdmission)
		}
		checkRecord(t, name+" (stored)", stored, want, wantRecord)
		if note, ok := tc.pod.GetAnnotations()["example.com/note"]; ok && obj.GetAnnotations()["example.com/note"] != note {
			t.Errorf("%s: an annotation the policies do not touch changed: %q", name, obj.GetAnnotations()["example.com/note"])
		}

		// Stored for real, and read back by the audit: no forged change.
		if err := c.Create(ctx, tc.pod.DeepCopy()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rep, err := audit.Run(ctx, c, audit.Options{Namespaces: []string{nsEscaping}})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Findings {
			if f.Kind == audit.BadAnnotation {
				t.Errorf("%s: the audit cannot read the record: %s", name, f.Detail)
			}
		}
		for _, row := range rep.Changes {
			if strings.Contains(row.Field, "hostNetwork") {
				t.Errorf("%s: the audit reads a forged change: %s %s", name, row.Action, row.Field)
			}
		}
		for _, view := range audit.Views {
			var text bytes.Buffer
			if err := rep.WriteTable(&text, view); err != nil {
				t.Fatal(err)
			}
			if i := bytes.IndexFunc(text.Bytes(), func(r rune) bool { return (r < 0x20 && r != '\n') || r == 0x7f || r == '\u202e' }); i >= 0 {
				t.Errorf("%s: the audit's %s view prints a raw control character at %d:\n%q", name, view, i, text.String())
			}
		}
	}
}

// checkRecord: record parses as a change record and is exactly want, byte for byte as the
// webhook encodes it.
func checkRecord(t *testing.T, what, record string, want []policy.Change, wantRecord string) {
	t.Helper()
	if !json.Valid([]byte(record)) {
		t.Errorf("%s: the record is not JSON: %q", what, record)
		return
	}
	got, err := policy.DecodeChanges(record)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	for _, ch := range got {
		if ch.Reason == "forged" || ch.Path == "spec.hostNetwork" {
			t.Errorf("%s: a forged entry: %+v", what, ch)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d entries, want %d:\n got %q\nwant %q", what, len(got), len(want), record, wantRecord)
		return
	}
	for i := range got {
		if changeKey(got[i]) != changeKey(want[i]) || got[i].Reason != want[i].Reason {
			t.Errorf("%s: entry %d\n got %s (%s)\nwant %s (%s)", what, i, changeKey(got[i]), got[i].Reason, changeKey(want[i]), want[i].Reason)
		}
	}
	if record != wantRecord {
		t.Errorf("%s: the record's bytes differ from the webhook's encoding:\n got %q\nwant %q", what, record, wantRecord)
	}
}

// refusedOn: err is the API server's validation refusal, naming field.
func refusedOn(err error, field string) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == field {
			return true
		}
	}
	return false
}
