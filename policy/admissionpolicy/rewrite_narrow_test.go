package admissionpolicy

import (
	"strings"
	"testing"

	"github.com/wincompat/wincompat/policy"
)

// The rewrites that narrow are turned on by the params exactly when the policy turns them on (the
// default limit as the API server writes it), and are never in a template's CEL: templates keep their
// spec in both engines.
func TestRenderNarrowsOnlyWhenAsked(t *testing.T) {
	on, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nuserForRunAsNonRoot: true\nmemoryLimits: {fromRequests: true, default: 0.5Gi}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[*policy.Policy]map[string]string{
		policy.Default(): {paramUserForRunAsNonRoot: "false", paramMemoryFromRequests: "false", paramDefaultMemoryLimit: ""},
		on:               {paramUserForRunAsNonRoot: "true", paramMemoryFromRequests: "true", paramDefaultMemoryLimit: "512Mi"},
	} {
		got := Params(name, Options{})
		for k, v := range want {
			if got[k] != v {
				t.Errorf("userForRunAsNonRoot %v: params' %s is %q, want %q", name.UserForRunAsNonRoot, k, got[k], v)
			}
		}
	}
	marks := []string{"nonRootUserAt", "'/resources/limits/memory'", value(string(policy.RuleMemoryLimitFromRequest)).cel}
	for _, p := range Policies() {
		var all strings.Builder
		for _, v := range p.Spec.Variables {
			all.WriteString(v.Expression + "\n")
		}
		all.WriteString(p.Spec.Mutations[0].JSONPatch.Expression)
		want := strings.HasPrefix(p.Name, "wincompat-pods")
		for _, m := range marks {
			if got := strings.Contains(all.String(), m); got != want {
				t.Errorf("%s: %s in the CEL: %v, want %v", p.Name, m, got, want)
			}
		}
	}
}
