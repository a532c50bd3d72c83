package registry

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wincompat/wincompat/policy"
)

// mirrorOf is the policy's entry that mirrors upstream's registry to mirrors, in order.
func mirrorOf(upstream *testRegistry, airGapped bool, mirrors ...policy.Mirror) []policy.RegistryMirror {
	return []policy.RegistryMirror{{Registry: upstream.host, Mirrors: mirrors, AirGapped: airGapped}}
}

func mirrorAt(reg *testRegistry, caps ...string) policy.Mirror {
	return policy.Mirror{Host: reg.host, Capabilities: caps}
}

// manifestRequests counts reg's manifest requests, GET and HEAD.
func manifestRequests(reg *testRegistry) int {
	return reg.count(http.MethodGet, "/manifests/") + reg.count(http.MethodHead, "/manifests/")
}

// TestMirrorsInOrder: the mirrors are tried in order, a mirror without the image falls to the next,
// the first that answers wins and says so, and the registry itself is not asked.
func TestMirrorsInOrder(t *testing.T) {
	upstream, empty, full := newRegistry(t), newRegistry(t), newRegistry(t)
	for _, reg := range []*testRegistry{upstream, full} {
		reg.pushIndex("windows/nanoserver:ltsc2022", testIndex(t, types.OCIImageIndex, ltsc2022))
	}
	var mu sync.Mutex
	var queries []string
	empty.setHook(func(_ http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/manifests/") {
			mu.Lock()
			queries = append(queries, r.URL.RawQuery)
			mu.Unlock()
		}
		return false
	})
	upstream.reset()
	r := newResolver(t, Config{})
	image := upstream.ref("windows/nanoserver:ltsc2022")
	img := lookupOne(r, policy.ImageRequest{Images: []string{image}, Mirrors: mirrorOf(upstream, false, mirrorAt(empty), mirrorAt(full))})
	if img.Err != "" || !samePlatforms(img.Platforms, []policy.Platform{ltsc2022}) {
		t.Fatalf("answer %+v, want the mirror's ltsc2022", img)
	}
	if img.Mirror != "#2" || img.MirrorFor != upstream.host {
		t.Errorf("answered by mirror %q for %q, want #2 for %q", img.Mirror, img.MirrorFor, upstream.host)
	}
	if n := manifestRequests(empty); n == 0 {
		t.Error("the first mirror was not asked")
	}
	if n := manifestRequests(upstream); n != 0 {
		t.Errorf("the registry itself was asked %d times while a mirror answered", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := (url.Values{"ns": {upstream.host}}).Encode(); len(queries) == 0 || queries[0] != want {
		t.Errorf("queries to the mirror %q, want ns=%s (containerd's)", queries, upstream.host)
	}
	// Cached: the answer still names the mirror, and nobody is asked.
	upstream.reset()
	full.reset()
	if again := lookupOne(r, policy.ImageRequest{Images: []string{image}, Mirrors: mirrorOf(upstream, false, mirrorAt(empty), mirrorAt(full))}); again.Mirror != "#2" {
		t.Errorf("cached answer names mirror %q, want #2", again.Mirror)
	}
	if n := manifestRequests(upstream) + manifestRequests(full); n != 0 {
		t.Errorf("%d requests for a cached answer", n)
	}
}

// TestMirrorFallsBackToRegistry: mirrors without the image fall back to the registry itself, whose
// answer names no mirror; when every source fails, the error names each in the order tried.
func TestMirrorFallsBackToRegistry(t *testing.T) {
	upstream, mirror := newRegistry(t), newRegistry(t)
	upstream.pushIndex("app:1.0", testIndex(t, types.OCIImageIndex, ltsc2019))
	r := newResolver(t, Config{})
	mirrors := mirrorOf(upstream, false, mirrorAt(mirror))
	img := lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("app:1.0")}, Mirrors: mirrors})
	if img.Err != "" || img.Mirror != "" || !samePlatforms(img.Platforms, []policy.Platform{ltsc2019}) {
		t.Fatalf("answer %+v, want the registry's own ltsc2019", img)
	}
	if manifestRequests(mirror) == 0 {
		t.Error("the mirror was not asked first")
	}

	// Neither has it: both are named, the mirror first, in one sentence.
	img = lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("missing:1.0")}, Mirrors: mirrors})
	want := "mirror #1 of " + upstream.host + ", " + upstream.host + ": " + msgNotReadable
	if img.Err != want {
		t.Errorf("error %q, want %q", img.Err, want)
	}
	// The mirror unreachable, the registry without the image: each says its own.
	mirror.srv.Close()
	img = lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("other:1.0")}, Mirrors: mirrors})
	want = "mirror #1 of " + upstream.host + ": " + msgUnreachable + "; " + upstream.host + ": " + msgNotReadable
	if img.Err != want {
		t.Errorf("error %q, want %q", img.Err, want)
	}
}

// TestAirGappedNeverDialsRegistry: with airGapped, the registry the reference names is never contacted,
// whether the mirror answers or fails.
func TestAirGappedNeverDialsRegistry(t *testing.T) {
	upstream, mirror := newRegistry(t), newRegistry(t)
	mirror.pushIndex("dotnet/aspnet:8.0", testIndex(t, types.DockerManifestList, ltsc2022, ltsc2025))
	upstream.pushIndex("dotnet/aspnet:8.0", testIndex(t, types.DockerManifestList, ltsc2019))
	upstream.reset()
	r := newResolver(t, Config{})
	mirrors := mirrorOf(upstream, true, mirrorAt(mirror))
	img := lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("dotnet/aspnet:8.0")}, Mirrors: mirrors})
	if img.Mirror != "#1" || !samePlatforms(img.Platforms, []policy.Platform{ltsc2022, ltsc2025}) {
		t.Errorf("answer %+v, want the mirror's", img)
	}
	img = lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("dotnet/runtime:8.0")}, Mirrors: mirrors})
	if want := "mirror #1 of " + upstream.host + ": " + msgNotReadable; img.Err != want {
		t.Errorf("error %q, want %q", img.Err, want)
	}
	if got := upstream.requests(); len(got) != 0 {
		t.Errorf("the air-gapped registry was contacted: %q", got)
	}
}

// TestMirrorCapabilities: a tag is read only from a mirror that may resolve, a digest from one that may
// pull, as containerd filters hosts; an air-gapped registry whose mirrors may not answer a reference is
// refused at once, without a request.
func TestMirrorCapabilities(t *testing.T) {
	upstream, pullOnly := newRegistry(t), newRegistry(t)
	idx := testIndex(t, types.OCIImageIndex, ltsc2022)
	digest := upstream.pushIndex("app:1.0", idx)
	pullOnly.pushIndex("app:1.0", idx)
	pullOnly.reset()
	r := newResolver(t, Config{})

	img := lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("app:1.0")}, Mirrors: mirrorOf(upstream, false, mirrorAt(pullOnly, policy.CapabilityPull))})
	if img.Err != "" || img.Mirror != "" {
		t.Errorf("tag: answer %+v, want the registry's own", img)
	}
	if n := manifestRequests(pullOnly); n != 0 {
		t.Errorf("a pull-only mirror was asked %d times for a tag", n)
	}
	// A resolver of its own: the digest's content, read from the registry above, would be cached
	// (content checked against its digest is the same wherever it was read).
	r = newResolver(t, Config{})
	byDigest := upstream.ref("app@" + digest)
	img = lookupOne(r, policy.ImageRequest{Images: []string{byDigest}, Mirrors: mirrorOf(upstream, false, mirrorAt(pullOnly, policy.CapabilityPull))})
	if img.Err != "" || img.Mirror != "#1" {
		t.Errorf("digest: answer %+v, want the pull-only mirror's", img)
	}

	upstream.reset()
	pullOnly.reset()
	img = lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("app:2.0")}, Mirrors: mirrorOf(upstream, true, mirrorAt(pullOnly, policy.CapabilityPull))})
	if !strings.Contains(img.Err, "no mirror of it may answer") || !strings.Contains(img.Err, "air-gapped") {
		t.Errorf("error %q, want a refusal naming the capabilities and air-gapped", img.Err)
	}
	if n := len(upstream.requests()) + len(pullOnly.requests()); n != 0 {
		t.Errorf("%d requests for a lookup no source may answer", n)
	}
}

// TestMirrorCacheSeparate: a mirror whose tag names another digest than the registry's (a stale
// copy) answers only the lookups routed through it; its failures too.
func TestMirrorCacheSeparate(t *testing.T) {
	upstream, stale := newRegistry(t), newRegistry(t)
	upstream.pushIndex("app:1.0", testIndex(t, types.OCIImageIndex, ltsc2022))
	stale.pushIndex("app:1.0", testIndex(t, types.OCIImageIndex, ltsc2019))
	r := newResolver(t, Config{})
	image := upstream.ref("app:1.0")
	viaMirror := policy.ImageRequest{Images: []string{image}, Mirrors: mirrorOf(upstream, true, mirrorAt(stale))}
	direct := policy.ImageRequest{Images: []string{image}}

	if img := lookupOne(r, viaMirror); !samePlatforms(img.Platforms, []policy.Platform{ltsc2019}) || img.Mirror != "#1" {
		t.Fatalf("through the mirror: %+v, want its ltsc2019", img)
	}
	if img := lookupOne(r, direct); !samePlatforms(img.Platforms, []policy.Platform{ltsc2022}) || img.Mirror != "" {
		t.Errorf("without mirrors: %+v, want the registry's ltsc2022 (the mirror's answer must not stand for it)", img)
	}
	if img := lookupOne(r, viaMirror); !samePlatforms(img.Platforms, []policy.Platform{ltsc2019}) {
		t.Errorf("through the mirror again: %+v, want its ltsc2019 (the registry's answer must not stand for it)", img)
	}

	// A failure through the mirror is the mirror's.
	upstream.pushIndex("fresh:1.0", testIndex(t, types.OCIImageIndex, ltsc2025))
	if img := lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("fresh:1.0")}, Mirrors: viaMirror.Mirrors}); img.Err == "" {
		t.Fatalf("the mirror answered for an image it does not have: %+v", img)
	}
	if img := lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("fresh:1.0")}}); img.Err != "" {
		t.Errorf("without mirrors: %q, the mirror's failure stood for the registry", img.Err)
	}
}

// TestMirrorSlotsCountHostDialled: a lookup through a mirror holds a slot of the mirror's host, not of
// the registry the reference names, so that the per-registry bound counts the host it dials.
func TestMirrorSlotsCountHostDialled(t *testing.T) {
	upstream, mirror := newRegistry(t), newRegistry(t)
	mirror.pushIndex("app:1.0", testIndex(t, types.OCIImageIndex, ltsc2022))
	g := newGate(t)
	mirror.setHook(func(_ http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/manifests/") {
			g.hold(r)
		}
		return false
	})
	r := newResolver(t, Config{})
	ch := r.Warm(policy.ImageRequest{Images: []string{upstream.ref("app:1.0")}, Mirrors: mirrorOf(upstream, true, mirrorAt(mirror))})
	if ch != nil {
		t.Fatalf("answered from an empty cache: %v", ch)
	}
	<-g.arrived
	r.slots.mu.Lock()
	onMirror, onUpstream := r.slots.byHost[mirror.host], r.slots.byHost[upstream.host]
	r.slots.mu.Unlock()
	if onMirror != 1 || onUpstream != 0 {
		t.Errorf("slots held: mirror %d, registry %d; want 1 and 0", onMirror, onUpstream)
	}
	g.open()
}

// TestRouteBounded: a lookup tries at most policy.MaxImageSources sources, mirrors first, whatever an
// entry lists; routes that differ have different keys, and an entry for Docker Hub matches its
// references however they name it.
func TestRouteBounded(t *testing.T) {
	var many []policy.Mirror
	for _, h := range []string{"m1.example", "m2.example", "m3.example", "m4.example", "m5.example"} {
		many = append(many, policy.Mirror{Host: h})
	}
	rt := newRouter([]policy.RegistryMirror{{Registry: "mcr.microsoft.com", Mirrors: many}})
	sources, key, _ := rt.route(mustRef(t, "mcr.microsoft.com/windows/nanoserver:ltsc2022"))
	if len(sources) != policy.MaxImageSources || sources[0].mirrorName != "m1.example" || sources[0].mirror != "#1" {
		t.Fatalf("%d sources starting with %q (%s), want %d starting with m1.example (#1)", len(sources), sources[0].mirrorName, sources[0].mirror, policy.MaxImageSources)
	}
	three := newRouter([]policy.RegistryMirror{{Registry: "mcr.microsoft.com", Mirrors: many[:3]}})
	s3, key3, _ := three.route(mustRef(t, "mcr.microsoft.com/windows/nanoserver:ltsc2022"))
	if len(s3) != 4 || s3[3].mirror != "" || key3 == key || key3 == "" {
		t.Errorf("three mirrors: %d sources (last %q), key %q vs %q; want the registry last and another key", len(s3), s3[len(s3)-1].mirror, key3, key)
	}
	if s, k, _ := newRouter(nil).route(mustRef(t, "mcr.microsoft.com/windows/nanoserver:ltsc2022")); len(s) != 1 || k != "" {
		t.Errorf("no mirrors: %d sources, key %q; want the registry alone and the key of today", len(s), k)
	}

	hub := newRouter([]policy.RegistryMirror{{Registry: "docker.io", Mirrors: []policy.Mirror{{Host: "hub.internal", RepositoryPrefix: "proxy/hub"}}}})
	s, _, _ := hub.route(mustRef(t, "nginx:1.27"))
	if len(s) != 2 || s[0].repo.Name() != "hub.internal/proxy/hub/library/nginx" || s[0].ns != "index.docker.io" {
		t.Errorf("docker.io entry for nginx: %+v, want hub.internal/proxy/hub/library/nginx with ns index.docker.io", s)
	}
	def := newRouter([]policy.RegistryMirror{{Registry: policy.RegistryMirrorDefault, Mirrors: []policy.Mirror{{Host: "all.internal"}}, AirGapped: true}})
	if s, _, _ := def.route(mustRef(t, "ghcr.io/org/app:1")); len(s) != 1 || s[0].mirrorName != "all.internal" {
		t.Errorf("_default: %+v, want all.internal alone", s)
	}
}

// TestPrivateMirrorNeedsAllowPrivateNetworks: the egress policy holds for mirrors as for any registry;
// the operator, who named the mirror, is told in the log what to allow, the pod's author only that it
// was unreachable.
func TestPrivateMirrorNeedsAllowPrivateNetworks(t *testing.T) {
	upstream, mirror := newRegistry(t), newRegistry(t)
	var capture logCapture
	log := capture.logger()
	r, err := New(Config{Timeout: 5 * time.Second, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	img := lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("app:1.0")}, Mirrors: mirrorOf(upstream, true, mirrorAt(mirror))})
	if want := "mirror #1 of " + upstream.host + ": " + msgUnreachable; img.Err != want {
		t.Errorf("error %q, want %q", img.Err, want)
	}
	logged := capture.logged()
	if !slices.ContainsFunc(logged, func(l string) bool {
		return strings.Contains(l, "Registry mirror refused by the egress policy") && strings.Contains(l, "--image-allow-private-networks") && strings.Contains(l, mirror.host)
	}) {
		t.Errorf("the log does not tell the operator to allow private networks for %s: %q", mirror.host, logged)
	}
	if n := len(mirror.requests()) + len(upstream.requests()); n != 0 {
		t.Errorf("%d requests reached a loopback registry without AllowPrivateNetworks", n)
	}
}

// TestRepositoryCannotEscapePrefix: go-containerregistry takes "." and ".." for repository
// components, so "REGISTRY/../x" would have been read at the mirror's PREFIX/../x, outside the
// repositoryPrefix the operator gave it; no container runtime pulls such a reference. It is invalid,
// and nothing is dialled for it (issue 40, finding 8).
func TestRepositoryCannotEscapePrefix(t *testing.T) {
	upstream, mirror := newRegistry(t), newRegistry(t)
	var mu sync.Mutex
	var paths []string
	mirror.setHook(func(_ http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		return false
	})
	r := newResolver(t, Config{})
	mirrors := mirrorOf(upstream, true, policy.Mirror{Host: mirror.host, RepositoryPrefix: "mcr-proxy"})
	for _, repo := range []string{"../x", "windows/../../x", "./x", "a/./b", "a..b", ".../x"} {
		image := upstream.ref(repo + ":1")
		if got := lookupOne(r, policy.ImageRequest{Images: []string{image}, Mirrors: mirrors}); got.Err != errInvalid {
			t.Errorf("%s: Err %q, want %q", image, got.Err, errInvalid)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 0 {
		t.Errorf("the mirror was asked %v", paths)
	}
}

// TestMirrorAnswersNameTheRegistry: what a pod's author reads (Err, and Mirror, which the policy's
// image-mirror record quotes) names the registry of the reference and the mirror's place in its
// registryMirrors entry, never the mirror's host: that is the operator's network (issue 40, finding 8).
// The log (V(1)) still names the host.
func TestMirrorAnswersNameTheRegistry(t *testing.T) {
	upstream, empty, full := newRegistry(t), newRegistry(t), newRegistry(t)
	r := newResolver(t, Config{})
	mirrors := mirrorOf(upstream, true, mirrorAt(empty), policy.Mirror{Host: full.host, RepositoryPrefix: "mcr-proxy"})
	full.pushIndex("mcr-proxy/app:1", testIndex(t, types.OCIImageIndex, ltsc2022))
	hosts := []string{empty.host, full.host}
	img := lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("app:1")}, Mirrors: mirrors})
	if img.Err != "" || img.Mirror != "#2" || img.MirrorFor != upstream.host {
		t.Errorf("answer %+v, want mirror #2 for %s", img, upstream.host)
	}
	img = lookupOne(r, policy.ImageRequest{Images: []string{upstream.ref("missing:1")}, Mirrors: mirrors})
	if want := "mirror #1 of " + upstream.host + ", mirror #2 of " + upstream.host + ": " + msgNotReadable; img.Err != want {
		t.Errorf("Err %q, want %q", img.Err, want)
	}
	for _, h := range hosts {
		if strings.Contains(img.Err+img.Mirror, h) {
			t.Errorf("the answer names mirror %s: %+v", h, img)
		}
	}
}
