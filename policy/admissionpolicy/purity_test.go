package admissionpolicy

import (
	"os/exec"
	"strings"
	"testing"
)

// k8s.io/apiserver is here for the tests that compile the CEL with the API server's compiler. policy
// and its packages stay pure (no API server or client code, CONTRIBUTING.md "Layout"), so their
// non-test code must not depend on it, even through another package.
func TestPolicyDoesNotDependOnTheAPIServer(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to list the dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/wincompat/wincompat/policy/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/apiserver/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime/"} {
			if strings.HasPrefix(dep+"/", banned) {
				t.Errorf("policy's non-test code depends on %s", dep)
			}
		}
	}
}
