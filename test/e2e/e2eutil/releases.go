package e2eutil

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/wincompat/wincompat/test/controlplane"
)

// AdmissionPoliciesServed asks the API server's discovery whether it serves MutatingAdmissionPolicy v1.
func AdmissionPoliciesServed(t *testing.T, cfg *rest.Config) bool {
	t.Helper()
	served, err := controlplane.ServesAdmissionPolicies(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return served
}

// RequireAdmissionPolicies stops a test that needs MutatingAdmissionPolicy v1 on an API server that does
// not serve it (Kubernetes 1.34 and 1.35 in the matrix), saying so: TestHybridWhereAdmissionPoliciesAreNotServed
// covers wincompat there.
func RequireAdmissionPolicies(t *testing.T, cfg *rest.Config) {
	t.Helper()
	if !AdmissionPoliciesServed(t, cfg) {
		t.Skipf("kube-apiserver %s does not serve MutatingAdmissionPolicy v1: the admission-policy engines do not run there (TestHybridWhereAdmissionPoliciesAreNotServed)", ReleaseUnderTest(t))
	}
}

func mustRoot(t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// ReleaseUnderTest is the Kubernetes release the tests run against (WINCOMPAT_K8S_VERSION, else
// test/go.mod's).
func ReleaseUnderTest(t *testing.T) string {
	t.Helper()
	version, err := controlplane.Version(mustRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	return version
}
