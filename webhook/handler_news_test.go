package webhook

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wincompat/wincompat/policy"
)

// In hybrid the admission policies change the object and record it before the webhook sees it, and
// they cannot warn: the webhook reports what the record gained in the request. So an object another
// engine already changed and recorded, created as it left that engine, gets the warnings of the
// object as it came: every golden case is reviewed, then what the review made of it is reviewed again
// as a CREATE (the webhook standing in for the policies, whose record is the same format), and the two
// give the same warnings. Sent again as an UPDATE of itself, it gets only what the pass finds again.
func TestRecordedChangesAreReported(t *testing.T) {
	compared := 0
	forEachCreateCase(t, "the record is not written there", func(t *testing.T, c *goldenCase, pol *policy.Policy, gvk schema.GroupVersionKind) {
		if _, set := c.facts().Namespace.Labels[policy.LabelMode]; set || pol.Mode == policy.ModeWarn {
			t.Skip("warn mode changes nothing and reports what it would do (TestWarnModeSaysWhatEnforceDoes)")
		}
		if res, err := MutateResolving(context.Background(), pol, gvk, c.Object, c.facts(), nil); err == nil && res.Decision.Linux {
			t.Skip("pinned to Linux: the admission policies do not pin, and a pinned object is no longer the webhook's")
		}
		first := reviewCase(t, c, pol, gvk, admissionv1.Create, c.Object, nil)
		if len(first.Patch) == 0 || !first.Allowed {
			t.Skip("nothing changed")
		}
		changed := applyPatch(t, c.Object, first.Patch)
		again := reviewCase(t, c, pol, gvk, admissionv1.Create, changed, nil)
		if !again.Allowed {
			t.Fatalf("refused once changed: %v", again.Result)
		}
		// The changes' warnings: the findings (what needs action, what was read from a registry)
		// are made again by each pass, on the object it is given, and the webhook's stand-in here
		// gives it one that is already pinned to a build.
		got, want := changeWarnings(again.Warnings), changeWarnings(first.Warnings)
		if !slices.Equal(got, want) {
			t.Errorf("created as changed, it reports\n  %s\ncreated as it came\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		compared++
		if gvk.Kind == "Pod" {
			return
		}
		// An UPDATE that keeps the record and changes nothing reports no change again; one whose
		// record gained an entry (the admission policies stripping a field sent again) reports it.
		update := reviewCase(t, c, pol, gvk, admissionv1.Update, changed, changed)
		if w := changeWarnings(update.Warnings); len(w) > 0 {
			t.Errorf("an UPDATE that changes nothing reports\n  %s", strings.Join(w, "\n  "))
		}
	})
	if compared < 20 {
		t.Errorf("only %d golden cases compared", compared)
	}
}

// changeWarnings are the warnings of changes made (removed, changed, set), sorted.
func changeWarnings(warnings []string) []string {
	var out []string
	for _, w := range warnings {
		for _, did := range []string{"wincompat: removed ", "wincompat: changed ", "wincompat: set "} {
			if strings.HasPrefix(w, did) {
				out = append(out, w)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// A record is reported to whoever sent it, in enforce mode: warn mode changed nothing, and the
// admission policies are not bound where the mode is warn, so nothing in the record was changed in
// this request there.
func TestRecordNewsInEnforceModeOnly(t *testing.T) {
	const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"wincompat.io/changes":"{\"v\":3,\"c\":[[\"s\",\"spec\",{\"hostPID\":true}]]}"}},
"spec":{"os":{"name":"windows"},"containers":[{"name":"web","image":"mcr.microsoft.com/windows/nanoserver:ltsc2022"}]}}`
	h, _ := newTestHandler(t, NewPodHandler)
	const removed = "wincompat: removed spec.hostPID from the pod (not supported on Windows)"
	if resp := h.Handle(context.Background(), podRequest("demo", pod)); !slices.Contains(resp.Warnings, removed) {
		t.Errorf("enforce mode: the record's strip is not reported: %q", resp.Warnings)
	}
	current := &atomic.Pointer[policy.Policy]{}
	current.Store(policy.Default())
	warn := NewPodHandler(Config{Policy: current, Namespaces: namespaces{"demo": {policy.LabelEnabled: "true", policy.LabelMode: policy.ModeWarn}},
		Version: "unit", Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard()})
	resp := warn.Handle(context.Background(), podRequest("demo", pod))
	for _, w := range resp.Warnings {
		if strings.Contains(w, "hostPID") {
			t.Errorf("warn mode reports the record's strip: %q", w)
		}
	}
	if len(resp.Warnings) == 0 {
		t.Error("warn mode says nothing of the pod")
	}
}
