package controlplane

import (
	"bufio"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// VersionEnv names the environment variable that picks a control-plane version other than test/go.mod's,
// among those already built into bin/k8s/<version>/ (a matrix run, a bisection). Unset, the version is the
// k8s.io/kubernetes requirement of test/go.mod: the one `make k8s` builds.
const VersionEnv = "WINCOMPAT_K8S_VERSION"

// releaseVersion is what a directory of bin/k8s may be named: a Kubernetes release tag, pre-releases
// included, and nothing that could step out of bin/k8s.
var releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)

// Version returns the Kubernetes version of the test control plane in the checkout at root: $VersionEnv
// when set, else the k8s.io/kubernetes requirement of root/test/go.mod, read the way the Makefile reads it
// (the first field of the line, then the version) so that both name the same directory.
func Version(root string) (string, error) {
	if v := os.Getenv(VersionEnv); v != "" {
		if !releaseVersion.MatchString(v) {
			return "", fmt.Errorf("%s=%q is not a Kubernetes release version such as v1.37.2", VersionEnv, v)
		}
		return v, nil
	}
	gomod := filepath.Join(root, "test", "go.mod")
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "k8s.io/kubernetes" && releaseVersion.MatchString(fields[1]) {
			return fields[1], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s requires no k8s.io/kubernetes release", gomod)
}

// checkBuiltFrom fails unless the binary at path was built from k8s.io/kubernetes at version: a directory
// renamed or copied by hand must not pass for another release.
func checkBuiltFrom(path, version string) error {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the build information of %s: %w", path, err)
	}
	if bi.Main.Path != "k8s.io/kubernetes" || bi.Main.Version != version {
		return fmt.Errorf("%s was built from %s %s, not k8s.io/kubernetes %s", path, bi.Main.Path, bi.Main.Version, version)
	}
	return nil
}

// ServesAdmissionPolicies asks the API server's discovery whether it serves MutatingAdmissionPolicy v1
// (Kubernetes 1.36 and later; 1.34 and 1.35 do not), which decides what the engines may do there.
func ServesAdmissionPolicies(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	resources, err := dc.ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Kind == "MutatingAdmissionPolicy" }), nil
}
