package auditing

// Issue 17: warn mode on the real API server, inside TestAudit (it needs the API server's audit log).
// The same objects are created in a namespace in warn mode, one in enforce mode and one wincompat does
// not serve. Warn mode must store them as if wincompat were not there, say in its warnings and audit
// annotations exactly what enforce mode changed, and `wincompat audit` must report them as would-change.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/audit"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

func checkWarnMode(t *testing.T, cl *e2eutil.Cluster, bin, kubeconfig, logFile string) {
	ctx := context.Background()
	const warnNS, enforceNS, offNS = "canary", "canary-enforce", "canary-off"
	for ns, labels := range map[string]map[string]string{
		warnNS:    {policy.LabelEnabled: "true", policy.LabelMode: policy.ModeWarn},
		enforceNS: {policy.LabelEnabled: "true"},
		offNS:     nil,
	} {
		e2eutil.Create(ctx, t, cl.C, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})
		// No controller-manager runs here to create it; pods need it to be admitted.
		e2eutil.Create(ctx, t, cl.C, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}})
	}
	// Objects the API server admits without wincompat (no Linux-only fields), so that warn mode, which
	// leaves them as they are, stores them; enforce mode still has plenty to change.
	objects := func(ns string) []client.Object {
		// No service account token: its volume's name is random, and the stored pods are compared.
		pod := plainWindowsPod(ns, "web", e2eutil.Images2022[0])
		pod.Spec.AutomountServiceAccountToken = ptr.To(false)
		spec := *pod.Spec.DeepCopy()
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: spec},
			},
		}
		return []client.Object{pod, deploy}
	}
	type created struct {
		obj      client.Object
		warnings []string
	}
	createAll := func(ns string) []created {
		var out []created
		cl.Warnings.Take()
		for _, o := range objects(ns) {
			e2eutil.Create(ctx, t, cl.C, o)
			out = append(out, created{o, cl.Warnings.Take()})
		}
		return out
	}
	warn, enforce, off := createAll(warnNS), createAll(enforceNS), createAll(offNS)

	for i := range warn {
		what := kindOf(warn[i].obj) + " " + warn[i].obj.GetName()
		if got, want := storedForm(t, warn[i].obj), storedForm(t, off[i].obj); got != want {
			t.Errorf("%s: warn mode stored something else than a namespace wincompat does not serve:\nwarn %s\noff  %s", what, got, want)
		}
		if len(e2eutil.WincompatWarnings(enforce[i].warnings)) == 0 {
			t.Fatalf("%s: enforce mode gave no warnings; the case proves nothing", what)
		}
		if got, want := warn[i].warnings, wouldSay(enforce[i].warnings); !slices.Equal(got, want) {
			t.Errorf("%s: warn mode's warnings\n got %q\nwant %q", what, got, want)
		}
	}

	// The audit log: warn mode's would-changes are enforce mode's changes, and it claims no change.
	resources := []string{"pods", "deployments"}
	var events []auditEvent
	deadline := time.Now().Add(30 * time.Second)
	for {
		events = readAuditEvents(t, logFile)
		n := 0
		for _, ev := range events {
			if ev.Verb == "create" && slices.Contains(resources, ev.ObjectRef.Resource) && (ev.ObjectRef.Namespace == warnNS || ev.ObjectRef.Namespace == enforceNS) {
				n++
			}
		}
		if n == 2*len(resources) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log holds %d of the %d creates after 30s", n, 2*len(resources))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, r := range resources {
		w := auditAnnotationsOf(findAuditEvent(t, events, "create", r, warnNS, "web"))
		e := auditAnnotationsOf(findAuditEvent(t, events, "create", r, enforceNS, "web"))
		if e["changes"] == "" || w["would-changes"] != e["changes"] || w["would-build"] != e["build"] || w["mode"] != policy.ModeWarn {
			t.Errorf("%s: audit annotations in warn mode %v, in enforce mode %v", r, w, e)
		}
		for _, k := range []string{"changes", "build", "build-source"} {
			if _, claimed := w[k]; claimed {
				t.Errorf("%s: warn mode's audit annotations claim %s: %v", r, k, w)
			}
		}
	}

	// The log summary counts them apart, as would-change, never as changes.
	logRep := waitForAuditedRequests(t, logFile, 1)
	if logRep.WarnMode != len(resources) || len(logRep.WouldChange) == 0 {
		t.Errorf("the audit-log summary counts %d requests in warn mode (want %d) and %d would-change rows", logRep.WarnMode, len(resources), len(logRep.WouldChange))
	}

	// wincompat audit: each object of the warn namespace is a would-change finding naming what enforce
	// mode recorded on its twin.
	r := runWincompat(t, bin, nil, "audit", "--kubeconfig", kubeconfig, "-n", warnNS, "-o", "json")
	if r.code != 0 {
		t.Fatalf("wincompat audit: exit %d\n%s", r.code, r.stderr)
	}
	var rep audit.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, e := range enforce {
		var record string
		if pod, ok := e.obj.(*corev1.Pod); ok {
			record = pod.Annotations[policy.AnnotationChanges]
		} else {
			tpl, _ := policy.PodTemplateOf(e.obj)
			record = tpl.Annotations[policy.AnnotationTemplateChanges]
		}
		changes, err := policy.DecodeChanges(record)
		if err != nil {
			t.Fatal(err)
		}
		var what []string
		for _, c := range changes {
			if s := string(c.Action) + " " + c.Path; !slices.Contains(what, s) {
				what = append(what, s)
			}
		}
		want[kindOf(e.obj)+"/"+e.obj.GetName()] = strings.Join(what, "; ")
	}
	got := map[string]string{}
	for _, f := range rep.Findings {
		switch {
		case f.Kind == audit.WouldChange && f.Namespace == warnNS:
			got[f.Object] = f.Detail
		case f.Namespace == warnNS && f.Kind == audit.NotCovered:
			t.Errorf("warn mode's objects are reported as not covered: %+v", f)
		}
	}
	for obj, detail := range want {
		if got[obj] != detail {
			t.Errorf("wincompat audit: %s would change\n got %q\nwant %q", obj, got[obj], detail)
		}
	}

	// The enforce namespace moves to warn mode: what enforce mode rewrote there is not a would-change
	// (decided again, it only gives its readiness warnings), and those warnings stay the run-time
	// findings of its record.
	var moved corev1.Namespace
	if err := cl.C.Get(ctx, client.ObjectKey{Name: enforceNS}, &moved); err != nil {
		t.Fatal(err)
	}
	moved.Labels[policy.LabelMode] = policy.ModeWarn
	if err := cl.C.Update(ctx, &moved); err != nil {
		t.Fatal(err)
	}
	r = runWincompat(t, bin, nil, "audit", "--kubeconfig", kubeconfig, "-n", enforceNS, "-o", "json")
	if r.code != 0 {
		t.Fatalf("wincompat audit: exit %d\n%s", r.code, r.stderr)
	}
	rep = audit.Report{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	runTime := 0
	for _, f := range rep.Findings {
		switch {
		case f.Kind == audit.WouldChange:
			t.Errorf("rewritten in enforce mode, reported in warn mode as %+v", f)
		case strings.HasPrefix(f.Kind, "run-time-"):
			runTime++
		}
	}
	if runTime == 0 {
		t.Errorf("the rewritten objects' readiness warnings are not reported: %+v", rep.Findings)
	}
}

// storedForm is obj as stored, without what differs between two namespaces and two creations.
func storedForm(t *testing.T, obj client.Object) string {
	t.Helper()
	obj = obj.DeepCopyObject().(client.Object)
	obj.SetNamespace("")
	obj.SetUID("")
	obj.SetResourceVersion("")
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetManagedFields(nil)
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wouldSay is what warn mode says for enforce mode's warnings: wincompat's in the conditional, others
// as they are.
func wouldSay(enforce []string) []string {
	var out []string
	for _, w := range enforce {
		rest, ours := strings.CutPrefix(w, "wincompat: ")
		switch verb, _, _ := strings.Cut(rest, " "); {
		case !ours:
			out = append(out, w)
		case verb == "removed" || verb == "changed" || verb == "set":
			out = append(out, "wincompat (warn mode) would have "+rest)
		default:
			out = append(out, "wincompat (warn mode): "+rest)
		}
	}
	return out
}

// auditAnnotationsOf are an audit event's annotations from wincompat's webhooks, without the webhook
// name the API server puts before them.
func auditAnnotationsOf(ev auditEvent) map[string]string {
	out := map[string]string{}
	for k, v := range ev.Annotations {
		if prefix, key, ok := strings.Cut(k, "/"); ok && strings.HasSuffix(prefix, "wincompat.io") {
			out[key] = v
		}
	}
	return out
}

func kindOf(obj client.Object) string {
	if _, ok := obj.(*corev1.Pod); ok {
		return "Pod"
	}
	return "Deployment"
}
