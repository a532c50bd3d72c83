package webhook

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/wincompat/wincompat/policy"
)

// recordingResolver answers every image with one 2022 Windows entry (which 2022 and, by containerd's rule,
// 2025 nodes run) and remembers how it was asked: the question here is when the handler waits for
// registries and when it only warms the cache.
type recordingResolver struct {
	lookups, warms []policy.ImageRequest
	// cached is what Warm answers: the lookups a resolver had finished before.
	cached map[string]policy.Image
}

func (r *recordingResolver) Lookup(_ context.Context, req policy.ImageRequest) map[string]policy.Image {
	r.lookups = append(r.lookups, req)
	out := map[string]policy.Image{}
	for _, ref := range req.Images {
		out[ref] = policy.Image{Platforms: []policy.Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.2227"}}}
	}
	return out
}

func (r *recordingResolver) Warm(req policy.ImageRequest) map[string]policy.Image {
	r.warms = append(r.warms, req)
	return r.cached
}

func TestHandlerAsksRegistriesForPodsAndWarmsForTemplates(t *testing.T) {
	resolver := &recordingResolver{}
	withResolver := func(newHandler func(Config) *Handler) func(Config) *Handler {
		return func(c Config) *Handler { c.Images = resolver; return newHandler(c) }
	}
	pods, _ := newTestHandler(t, withResolver(NewPodHandler))
	workloads, _ := newTestHandler(t, withResolver(NewWorkloadHandler))
	const untagged = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"os":{"name":"windows"},
"containers":[{"name":"web","image":"example.com/web:1.4.2"}]}}`

	resp := pods.Handle(context.Background(), podRequest("demo", untagged))
	if len(resolver.lookups) != 1 || len(resolver.warms) != 0 || !slices.Equal(resolver.lookups[0].Images, []string{"example.com/web:1.4.2"}) || resolver.lookups[0].Namespace != "demo" {
		t.Fatalf("a Windows pod: lookups %+v, warms %+v; want one lookup of its image in its namespace", resolver.lookups, resolver.warms)
	}
	if resp.AuditAnnotations["build"] != "10.0.20348,10.0.26100" || resp.AuditAnnotations["build-source"] != policy.SourceImageManifest {
		t.Errorf("the registry's answer was not used: %v", resp.AuditAnnotations)
	}

	deployment := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"selector":{"matchLabels":{"app":"web"}},
"template":{"metadata":{"labels":{"app":"web"}},"spec":{"os":{"name":"windows"},"containers":[{"name":"web","image":"example.com/web:1.5.0"}]}}}}`
	workloads.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid-2", Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Namespace: "demo", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(deployment)},
	}})
	if len(resolver.lookups) != 1 || len(resolver.warms) != 1 || !slices.Equal(resolver.warms[0].Images, []string{"example.com/web:1.5.0"}) {
		t.Fatalf("a Windows Deployment: lookups %+v, warms %+v; want its image warmed, never waited for", resolver.lookups, resolver.warms)
	}
	// An image the resolver had read already, with no Windows entry: the template is warned at once.
	resolver.cached = map[string]policy.Image{"example.com/web:1.5.0": {Platforms: []policy.Platform{{OS: "linux", Architecture: "amd64"}}}}
	resp = workloads.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid-3", Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Namespace: "demo", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(deployment)},
	}})
	resolver.cached = nil
	if !resp.Allowed || !slices.ContainsFunc(resp.Warnings, func(w string) bool {
		return strings.Contains(w, "image in containers[web]") && strings.Contains(w, "has no Windows entry")
	}) || len(resolver.lookups) != 1 {
		t.Fatalf("a Deployment whose image is cached Linux-only: allowed %v, warnings %q, lookups %d; want admitted with the Linux-only image warning, no wait",
			resp.Allowed, resp.Warnings, len(resolver.lookups))
	}

	pods.Handle(context.Background(), podRequest("demo", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"l"},"spec":{"containers":[{"name":"l","image":"example.com/l:1"}]}}`))
	pods.Handle(context.Background(), podRequest("elsewhere", untagged))
	if len(resolver.lookups) != 1 || len(resolver.warms) != 2 {
		t.Errorf("a Linux pod or a namespace not opted in reached the registries: lookups %+v, warms %+v", resolver.lookups, resolver.warms)
	}
}

// A review's namespace is whatever its sender wrote: the pod's pull secrets are read only for a review
// that came over a connection the server verified (the API server's client certificate).
func TestPullSecretsOnlyForVerifiedCallers(t *testing.T) {
	resolver := &recordingResolver{}
	current := &atomic.Pointer[policy.Policy]{}
	pol := policy.Default()
	pol.PodImagePullSecrets = true
	current.Store(pol)
	h := NewPodHandler(Config{Policy: current, Images: resolver, Log: logr.Discard(), Version: "unit",
		Namespaces: namespaces{"team-b": {policy.LabelEnabled: "true"}}})
	const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"os":{"name":"windows"},
"imagePullSecrets":[{"name":"team-b-registry"}],"containers":[{"name":"web","image":"example.com/private:1"}]}}`

	h.Handle(context.Background(), podRequest("team-b", pod))
	h.Handle(withVerifiedCaller(context.Background(), false), podRequest("team-b", pod))
	h.Handle(withVerifiedCaller(context.Background(), true), podRequest("team-b", pod))
	if len(resolver.lookups) != 3 {
		t.Fatalf("lookups: %+v", resolver.lookups)
	}
	for i, want := range [][]string{nil, nil, {"team-b-registry"}} {
		if got := resolver.lookups[i].PullSecrets; !slices.Equal(got, want) {
			t.Errorf("review %d: pull secrets %q, want %q", i, got, want)
		}
		if got := resolver.lookups[i].Authenticated; got != (want != nil) {
			t.Errorf("review %d: authenticated %v", i, got)
		}
	}
}

// The policy's registryMirrors reach every lookup, so that a reloaded policy's mirrors apply from the
// next review on, in the server as in `wincompat mutate`.
func TestLookupsCarryThePolicysMirrors(t *testing.T) {
	resolver := &recordingResolver{}
	current := &atomic.Pointer[policy.Policy]{}
	pol := policy.Default()
	pol.RegistryMirrors = []policy.RegistryMirror{{Registry: "mcr.microsoft.com", Mirrors: []policy.Mirror{{Host: "registry.internal:5000"}}, AirGapped: true}}
	current.Store(pol)
	h := NewPodHandler(Config{Policy: current, Images: resolver, Log: logr.Discard(), Version: "unit",
		Namespaces: namespaces{"web": {policy.LabelEnabled: "true"}}})
	h.Handle(context.Background(), podRequest("web", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"os":{"name":"windows"},
"containers":[{"name":"web","image":"mcr.microsoft.com/dotnet/aspnet:8.0"}]}}`))
	if len(resolver.lookups) != 1 || len(resolver.lookups[0].Mirrors) != 1 || resolver.lookups[0].Mirrors[0].Mirrors[0].Host != "registry.internal:5000" {
		t.Fatalf("lookups %+v, want one carrying the policy's mirrors", resolver.lookups)
	}
}
