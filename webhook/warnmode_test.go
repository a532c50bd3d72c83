package webhook

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/wincompat/wincompat/policy"
)

// caseImages answers image lookups with what a golden case says its registry holds.
type caseImages map[string]policy.Image

func (c caseImages) Lookup(context.Context, policy.ImageRequest) map[string]policy.Image { return c }
func (caseImages) Warm(policy.ImageRequest) map[string]policy.Image                      { return nil }

// Warn mode must say exactly what enforce mode does, change nothing, and be told apart in the audit
// annotations and the metrics: every golden case is reviewed in its namespace as it is (enforce) and
// again labelled wincompat.io/mode=warn, and once more under a policy whose default mode is warn.
func TestWarnModeSaysWhatEnforceDoes(t *testing.T) {
	compared := 0
	forEachCreateCase(t, "the same path, covered by the CREATE cases", func(t *testing.T, c *goldenCase, pol *policy.Policy, gvk schema.GroupVersionKind) {
		facts := c.facts()
		review := func(pol *policy.Policy, labels map[string]string) (admission.Response, *Metrics) {
			return reviewCaseIn(t, c, pol, gvk, labels, admissionv1.Create, c.Object, nil)
		}
		labels := maps.Clone(facts.Namespace.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		if _, set := labels[policy.LabelMode]; set {
			t.Skip("the case sets the mode itself")
		}
		enforce, _ := review(pol, labels)
		warnLabels := maps.Clone(labels)
		warnLabels[policy.LabelMode] = policy.ModeWarn
		warnPolicy := *pol
		warnPolicy.Mode = policy.ModeWarn
		for how, w := range map[string]struct {
			pol    *policy.Policy
			labels map[string]string
		}{"labelled": {pol, warnLabels}, "policy default": {&warnPolicy, labels}} {
			warn, m := review(w.pol, w.labels)
			if !warn.Allowed || len(warn.Patch) > 0 || warn.PatchType != nil {
				t.Fatalf("%s: warn mode changed or refused the object: %+v", how, warn.AdmissionResponse)
			}
			if !enforce.Allowed {
				// The refusal is shown marked as wincompat's, once, and the same in both modes.
				reason, marked := strings.CutPrefix(enforce.Result.Message, "wincompat: ")
				if !marked || strings.HasPrefix(reason, "wincompat") {
					t.Errorf("%s: enforce refused with %q, want one \"wincompat: \" mark", how, enforce.Result.Message)
				}
				if want := "wincompat (warn mode): action needed: would have refused it: " + reason; !slices.Equal(warn.Warnings, []string{want}) {
					t.Errorf("%s: enforce refused (%s) but warn mode warns %q, want %q", how, enforce.Result.Message, warn.Warnings, want)
				}
				if got := warn.AuditAnnotations["would-deny"]; got != enforce.Result.Message {
					t.Errorf("%s: audit annotation would-deny %q, want the refusal %q", how, got, enforce.Result.Message)
				}
			}
			for _, k := range []string{"changes", "build", "build-source"} {
				if enforce.AuditAnnotations[k] != warn.AuditAnnotations["would-"+k] {
					t.Errorf("%s: audit annotation %s: enforce %q, warn mode would-%s %q", how, k, enforce.AuditAnnotations[k], k, warn.AuditAnnotations["would-"+k])
				}
				if _, set := warn.AuditAnnotations[k]; set {
					t.Errorf("%s: warn mode claims a change it did not make: %s", how, k)
				}
			}
			if len(enforce.Patch) > 0 && len(enforce.AuditAnnotations) > 0 && warn.AuditAnnotations["mode"] != policy.ModeWarn {
				t.Errorf("%s: the audit annotations do not say warn mode: %v", how, warn.AuditAnnotations)
			}
			if news := recordNewsWarnings(t, gvk, c.Object); len(news) > 0 && enforce.Allowed {
				// Enforce mode also reports what the record the object arrived with holds (on CREATE,
				// all of it); warn mode changed nothing and nothing else changed the object: the
				// admission policies are not bound there.
				got, want := setOf(append(warn.Warnings, conditional(news)...)), setOf(conditional(enforce.Warnings))
				if !slices.Equal(got, want) {
					t.Errorf("%s: warnings with the record's\n got %q\nwant %q", how, got, want)
				}
			} else if got, want := warn.Warnings, conditional(enforce.Warnings); enforce.Allowed && !slices.Equal(got, want) {
				t.Errorf("%s: warnings\n got %q\nwant %q", how, got, want)
			}
			if len(enforce.Patch) > 0 && len(enforce.AuditAnnotations) > 0 {
				if got := testutil.ToFloat64(m.admissions.WithLabelValues(resourceLabel(gvk.Kind), "CREATE", "mutated", policy.ModeWarn)); got != 1 {
					t.Errorf("%s: wincompat_admission_total{result=mutated,mode=warn} = %v", how, got)
				}
				compared++
			}
		}
	})
	if compared < 40 {
		t.Errorf("only %d reviews compared enforce with warn mode on a change; the cases should give more", compared)
	}
}

// conditional is what warn mode says for enforce mode's warnings.
func conditional(enforce []string) []string {
	var out []string
	for _, w := range enforce {
		rest := strings.TrimPrefix(w, "wincompat: ")
		switch verb, _, _ := strings.Cut(rest, " "); verb {
		case "removed", "changed", "set":
			out = append(out, "wincompat (warn mode) would have "+rest)
		default:
			out = append(out, "wincompat (warn mode): "+rest)
		}
	}
	return out
}

func resourceLabel(kind string) string {
	if kind == "Pod" {
		return "pods"
	}
	return strings.ToLower(kind) + "s"
}

// recordNewsWarnings are the warnings of the record raw arrives with, as a CREATE reports them.
func recordNewsWarnings(t *testing.T, gvk schema.GroupVersionKind, raw []byte) []string {
	t.Helper()
	record, ok := storedRecord(gvk, raw)
	if !ok {
		t.Fatalf("%s does not decode", gvk.Kind)
	}
	news := policy.RecordNews(record, "")
	if len(news) == 0 {
		return nil
	}
	return policy.Decision{Windows: true}.Reporting(news).Warnings()
}

func setOf(s []string) []string { return slices.Compact(slices.Sorted(slices.Values(s))) }
