package webhook

import (
	"testing"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestHybridChartGateParam: the chart renders the admission policies' gate param from
// imageResolver.mode as admissionpolicy.Params does with Options.NoGate: the policies gate Windows pods
// admitted while no replica answers unless the webhook never gates either (fallback). Rendering only;
// TestHybridEngine applies the default.
func TestHybridChartGateParam(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"engine: hybrid\n", "true"},
		{"engine: hybrid\nimageResolver: {mode: gate}\n", "true"},
		{"engine: hybrid\nimageResolver: {mode: fallback}\n", "false"},
	} {
		var got string
		found := false
		for _, obj := range e2eutil.RenderChart(t, e2eutil.ValuesFile(t, tc.values)) {
			if obj.GetKind() == "ConfigMap" && obj.GetName() == "wincompat-admission-policy-params" {
				data, _ := obj.Object["data"].(map[string]any)
				got, found = data["gate"].(string)
			}
		}
		noGate := tc.want == "false"
		if want := admissionpolicy.Params(policy.Default(), admissionpolicy.Options{NoGate: noGate})["gate"]; !found || got != tc.want || got != want {
			t.Errorf("values %q: the params' gate is %q (rendered: %v), want %q as admissionpolicy.Params writes it with NoGate %v (%q)", tc.values, got, found, tc.want, noGate, want)
		}
	}
}
