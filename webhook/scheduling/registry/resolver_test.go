package registry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/wincompat/wincompat/policy"
)

var (
	ltsc2019   = policy.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.17763.5830"}
	ltsc2022   = policy.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.2461"}
	ltsc2025   = policy.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.26100.1742"}
	anyWindows = policy.Platform{OS: "windows", Architecture: "amd64"}
	linuxAMD64 = policy.Platform{OS: "linux", Architecture: "amd64"}
	linuxARM64 = policy.Platform{OS: "linux", Architecture: "arm64"}
)

// newResolver is New with deadlines generous enough for -race on a busy machine, unless c sets them.
func newResolver(t testing.TB, c Config) *Resolver {
	t.Helper()
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	// The test registries are on loopback.
	c.AllowPrivateNetworks = true
	r, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func lookupOne(r *Resolver, req policy.ImageRequest) policy.Image {
	return r.Lookup(context.Background(), req)[req.Images[0]]
}

func lookupImage(r *Resolver, image string) policy.Image {
	return lookupOne(r, policy.ImageRequest{Images: []string{image}})
}

// samePlatforms compares platforms as sets: the order of an index is not part of the answer.
func samePlatforms(got, want []policy.Platform) bool {
	key := func(p policy.Platform) string { return p.OS + "/" + p.Architecture + "/" + p.OSVersion }
	g, w := make([]string, len(got)), make([]string, len(want))
	for i, p := range got {
		g[i] = key(p)
	}
	for i, p := range want {
		w[i] = key(p)
	}
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// waitCached waits until the resolver answers image from its caches, as a background lookup leaves it.
// It sets no limit of its own, which a slow machine could exceed: a lookup that never ends shows as
// go test's -timeout, whose goroutine dump names this function.
func waitCached(t *testing.T, r *Resolver, req policy.ImageRequest) policy.Image {
	t.Helper()
	l, ok := r.parse(req.Images[0], r.credentials(req), newRouter(req.Mirrors))
	if !ok {
		t.Fatalf("%s does not parse", req.Images[0])
	}
	for {
		if img, ok := r.cached(l); ok {
			return img
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLookupPlatforms(t *testing.T) {
	reg := newRegistry(t)
	oci := reg.pushIndex("multi:oci", testIndex(t, types.OCIImageIndex, ltsc2019, ltsc2022, ltsc2025, linuxAMD64))
	list := reg.pushIndex("multi:docker", testIndex(t, types.DockerManifestList, ltsc2019, ltsc2022, ltsc2025, linuxAMD64))
	nested := reg.pushIndex("nested:1", mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: testIndex(t, types.OCIImageIndex, ltsc2022, ltsc2025)},
		mutate.IndexAddendum{Add: testImage(t, linuxARM64, true), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
	))
	deep := reg.pushIndex("nested:deep", mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.DockerManifestList),
		mutate.IndexAddendum{Add: mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.DockerManifestList),
			mutate.IndexAddendum{Add: testIndex(t, types.DockerManifestList, ltsc2019)},
			mutate.IndexAddendum{Add: testIndex(t, types.DockerManifestList, ltsc2025)},
		)},
	))
	single := reg.pushImage("single:ltsc2022", testImage(t, ltsc2022, false))
	singleOCI := reg.pushImage("single:oci", testImage(t, ltsc2025, true))
	anyBuild := reg.pushIndex("anybuild:1", testIndex(t, types.OCIImageIndex, anyWindows, linuxAMD64))
	linux := reg.pushIndex("linux:1", testIndex(t, types.DockerManifestList, linuxAMD64, linuxARM64))
	linuxImage := reg.pushImage("linux:single", testImage(t, linuxAMD64, true))
	// Some registries serve manifests as application/json: the document says what it is.
	entry := reg.pushImage("sniffed:entry", testImage(t, ltsc2019, true))
	sniffed := fmt.Appendf(nil, `{"schemaVersion":2,"manifests":[{"mediaType":%q,"digest":%q,"size":1,
		"platform":{"os":"windows","architecture":"amd64","os.version":"10.0.17763.1"}}]}`, types.OCIManifestSchema1, entry)
	reg.putManifest("sniffed", "1", "application/json", sniffed)

	windows := []policy.Platform{ltsc2019, ltsc2022, ltsc2025, linuxAMD64}
	for _, tc := range []struct {
		name, image, digest string
		want                []policy.Platform
	}{
		{"OCI index", "multi:oci", oci, windows},
		{"Docker manifest list", "multi:docker", list, windows},
		{"nested index, flattened", "nested:1", nested, []policy.Platform{ltsc2022, ltsc2025, linuxARM64}},
		{"index of indexes of indexes", "nested:deep", deep, []policy.Platform{ltsc2019, ltsc2025}},
		{"digest reference", "multi@" + oci, oci, windows},
		{"tag and digest: the digest wins, the tag need not exist", "multi:no-such-tag@" + list, list, windows},
		{"single Docker image, os.version in its config only", "single:ltsc2022", single, []policy.Platform{ltsc2022}},
		{"single OCI image by digest", "single@" + singleOCI, singleOCI, []policy.Platform{ltsc2025}},
		{"Windows entry without os.version", "anybuild:1", anyBuild, []policy.Platform{anyWindows, linuxAMD64}},
		{"Linux-only index", "linux:1", linux, []policy.Platform{linuxAMD64, linuxARM64}},
		{"Linux-only image", "linux:single", linuxImage, []policy.Platform{linuxAMD64}},
		{"index served as application/json", "sniffed:1", digestOfBytes(sniffed),
			[]policy.Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.17763.1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newResolver(t, Config{})
			got := lookupImage(r, reg.ref(tc.image))
			if got.Err != "" || got.Digest != tc.digest || !samePlatforms(got.Platforms, tc.want) {
				t.Errorf("got %+v, want digest %s and platforms %+v", got, tc.digest, tc.want)
			}
		})
	}
}

func digestOfBytes(b []byte) string {
	h, _, _ := v1.SHA256(bytes.NewReader(b))
	return h.String()
}

func TestReadsManifestsAndConfigsOnly(t *testing.T) {
	reg := newRegistry(t)
	img := testImage(t, ltsc2022, false)
	reg.pushImage("single:1", img)
	reg.pushIndex("multi:1", testIndex(t, types.OCIImageIndex, ltsc2019, ltsc2022))
	config, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	r := newResolver(t, Config{})

	reg.reset()
	if got := lookupImage(r, reg.ref("single:1")); got.Err != "" {
		t.Fatal(got.Err)
	}
	var blobs []string
	for _, l := range reg.requests() {
		if strings.Contains(l, "/blobs/") {
			blobs = append(blobs, l)
		}
	}
	if want := []string{"GET /v2/single/blobs/" + config.String()}; !slices.Equal(blobs, want) {
		t.Errorf("single image: blob requests %v, want the config only: %v", blobs, want)
	}

	reg.reset()
	if got := lookupImage(r, reg.ref("multi:1")); got.Err != "" {
		t.Fatal(got.Err)
	}
	if n := reg.count("GET", "/blobs/"); n != 0 {
		t.Errorf("index: %d blob requests, want none: %v", n, reg.requests())
	}
}

func TestLookupErrors(t *testing.T) {
	reg := newRegistry(t)
	host := reg.host

	reg.putManifest("garbage", "1", string(types.OCIManifestSchema1), []byte("this is not a manifest"))
	big := fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,"manifests":[],"annotations":{"pad":%q}}`,
		types.OCIImageIndex, strings.Repeat("x", maxBody))
	reg.putManifest("big", "1", string(types.OCIImageIndex), []byte(big))
	reg.putManifest("schema1", "1", string(types.DockerManifestSchema1Signed),
		[]byte(`{"schemaVersion":1,"name":"schema1","tag":"1","architecture":"amd64","fsLayers":[],"history":[]}`))
	reg.putManifest("empty", "1", string(types.OCIImageIndex),
		[]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`))
	// The registry takes an index only if its entries exist.
	entry := reg.pushImage("badplatform:entry", testImage(t, ltsc2022, true))
	reg.putManifest("badplatform", "1", string(types.OCIImageIndex), fmt.Appendf(nil, `{"schemaVersion":2,"manifests":[
		{"mediaType":%q,"digest":%q,"size":1,"platform":{"os":"windows\u0007","architecture":"amd64"}}]}`,
		types.OCIManifestSchema1, entry))
	reg.putManifest("chart", "1", string(types.OCIManifestSchema1), []byte(`{"schemaVersion":2,
		"config":{"mediaType":"application/vnd.cncf.helm.config.v1+json","digest":"sha256:`+strings.Repeat("b", 64)+`","size":2},"layers":[]}`))
	pushConfig := func(repo string, config []byte) {
		layer := static.NewLayer(config, types.OCIConfigJSON)
		if err := remote.WriteLayer(mustRef(reg.t, reg.ref(repo)).Context(), layer); err != nil {
			t.Fatal(err)
		}
		h, _ := layer.Digest()
		reg.putManifest(repo, "1", string(types.OCIManifestSchema1), fmt.Appendf(nil,
			`{"schemaVersion":2,"mediaType":%q,"config":{"mediaType":%q,"digest":%q,"size":%d},"layers":[]}`,
			types.OCIManifestSchema1, types.OCIConfigJSON, h, len(config)))
	}
	pushConfig("badconfig", []byte("not json"))
	reg.putManifest("noconfig", "1", string(types.OCIManifestSchema1), fmt.Appendf(nil,
		`{"schemaVersion":2,"config":{"mediaType":%q,"digest":"sha256:%s","size":2},"layers":[]}`,
		types.OCIConfigJSON, strings.Repeat("c", 64)))
	pushConfig("noos", []byte(`{"architecture":"amd64","os.version":"10.0.20348.1"}`))

	reg.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case strings.HasPrefix(r.URL.Path, "/v2/loop/manifests/"):
			http.Redirect(w, r, r.URL.Path, http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/v2/chunked/manifests/"):
			// The size announced nowhere: only reading tells.
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			w.(http.Flusher).Flush()
			w.Write([]byte(big))
		case strings.HasPrefix(r.URL.Path, "/v2/boom/"):
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			return false
		}
		return true
	})

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		name, image, want string
	}{
		{"no such tag", reg.ref("multi:1"), host + ": " + msgNotReadable},
		{"garbage manifest", reg.ref("garbage:1"), "malformed manifest (not JSON)"},
		{"manifest over 4 MiB, announced", reg.ref("big:1"), "manifest larger than 4 MiB"},
		{"manifest over 4 MiB, chunked", reg.ref("chunked:1"), "manifest larger than 4 MiB"},
		{"redirect loop", reg.ref("loop:1"), host + ": " + msgUnreachable},
		{"registry error", reg.ref("boom:1"), host + ": " + msgUnreachable},
		{"schema 1", reg.ref("schema1:1"), "Docker schema 1 manifest (unsupported)"},
		{"index without platforms", reg.ref("empty:1"), "image index lists no platforms"},
		{"control character in a platform", reg.ref("badplatform:1"), "malformed index (entry 0: invalid os)"},
		{"not a container image", reg.ref("chart:1"), `not a container image (config is "application/vnd.cncf.helm.config.v1+json")`},
		{"config not JSON", reg.ref("badconfig:1"), "malformed image config (not JSON)"},
		{"config missing", reg.ref("noconfig:1"), host + ": " + msgNotReadable},
		{"config without os", reg.ref("noos:1"), "image config names no OS"},
		{"closed port", unreachable + "/app:1", unreachable + ": " + msgUnreachable},
		{"invalid reference", "Upper/Case:1", "invalid image reference"},
		{"invalid digest", reg.ref("app@sha256:123"), "invalid image reference"},
		{"reference over 1024 bytes", strings.Repeat("a", 1100) + ".example/app:1", "invalid image reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newResolver(t, Config{})
			// The registry's own error, not "registry lookup timed out": the failure was answered
			// within the review's wait, not found out by its deadline.
			got := lookupImage(r, tc.image)
			if got.Err != tc.want || got.Platforms != nil {
				t.Errorf("got %+v, want Err %q", got, tc.want)
			}
		})
	}
}

func TestPlainHTTPOnlyToLoopback(t *testing.T) {
	// The transport under the guard records what reaches it and dials nothing, so that the test never
	// waits on a network and shows that a refused request never got as far as a dial.
	var mu sync.Mutex
	var reached []string
	base := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no network in this test")
	}}
	transport := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		reached = append(reached, req.URL.Scheme+"://"+req.URL.Host)
		mu.Unlock()
		return base.RoundTrip(req)
	})
	for _, tc := range []struct {
		image, host string
		allow       bool
		refused     bool
	}{
		{"10.0.0.1:5000/app:1", "10.0.0.1:5000", true, true},
		{"192.168.1.10/app:1", "192.168.1.10", true, true},
		{"registry.localhost:5000/app:1", "registry.localhost:5000", true, true},
		{"127.0.0.1:5000/app:1", "127.0.0.1:5000", true, false},
		{"localhost:5000/app:1", "localhost:5000", true, false},
		{"[::1]:5000/app:1", "[::1]:5000", true, false},
		// Loopback too, unless the operator allows private networks.
		{"127.0.0.1:5000/app:1", "127.0.0.1:5000", false, true},
		{"localhost:5000/app:1", "localhost:5000", false, true},
	} {
		t.Run(fmt.Sprintf("%s allow=%v", tc.image, tc.allow), func(t *testing.T) {
			mu.Lock()
			reached = nil
			mu.Unlock()
			r := newResolver(t, Config{})
			r.transport = guard{next: transport, allowPrivate: tc.allow}
			got := lookupImage(r, tc.image)
			mu.Lock()
			plain := slices.Contains(reached, "http://"+tc.host)
			mu.Unlock()
			if plain == tc.refused {
				t.Errorf("plain HTTP request reached the transport: %v, want %v (requests: %v)", plain, !tc.refused, reached)
			}
			if want := strings.Split(tc.image, "/")[0] + ": " + msgUnreachable; got.Err != want {
				t.Errorf("Err %q, want %q", got.Err, want)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost.": true, "127.0.0.1": true, "127.9.8.7": true, "::1": true,
		"10.0.0.1": false, "::": false, "localhost.example.com": false, "registry.localhost": false, "": false,
	} {
		if got := isLoopback(host); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}

func dockerConfigSecret(namespace, name, registry, user, password string) *corev1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	config, _ := json.Marshal(map[string]any{"auths": map[string]any{
		registry: map[string]string{"username": user, "password": password, "auth": auth},
	}})
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: config},
	}
}

func TestPrivateRegistry(t *testing.T) {
	reg := newRegistry(t)
	reg.push = &authn.Basic{Username: "user", Password: "secret"}
	reg.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if user, password, ok := r.BasicAuth(); ok && user == "user" && password == "secret" {
			return false
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusUnauthorized)
		return true
	})
	digest := reg.pushIndex("private:1", testIndex(t, types.OCIImageIndex, ltsc2022, ltsc2025))
	want := []policy.Platform{ltsc2022, ltsc2025}
	image := reg.ref("private:1")
	const hint = "set imageResolver.pullSecret"
	unauthorized := reg.host + ": " + msgNotReadable + " (" + hint + ")"
	withPod := reg.host + ": " + msgNotReadable + " (" + hint + " or the pod's imagePullSecrets)"
	ok := func(t *testing.T, got policy.Image) {
		t.Helper()
		if got.Err != "" || got.Digest != digest || !samePlatforms(got.Platforms, want) {
			t.Errorf("got %+v, want %v", got, want)
		}
	}

	t.Run("anonymous", func(t *testing.T) {
		if got := lookupImage(newResolver(t, Config{UnauthorizedHint: hint}), image); got.Err != unauthorized {
			t.Errorf("Err %q, want %q", got.Err, unauthorized)
		}
		// Without a hint the resolver gives no advice it cannot stand by.
		if got, want := lookupImage(newResolver(t, Config{}), image).Err, reg.host+": "+msgNotReadable; got != want {
			t.Errorf("no hint: Err %q, want %q", got, want)
		}
	})
	t.Run("server's docker-config Secret", func(t *testing.T) {
		kc, err := DockerConfigKeychain(dockerConfigSecret("wincompat", "registry", reg.host, "user", "secret"))
		if err != nil {
			t.Fatal(err)
		}
		ok(t, lookupImage(newResolver(t, Config{Keychain: kc}), image))
	})
	t.Run("wrong password", func(t *testing.T) {
		kc, err := DockerConfigKeychain(dockerConfigSecret("wincompat", "registry", reg.host, "user", "wrong"))
		if err != nil {
			t.Fatal(err)
		}
		if got := lookupImage(newResolver(t, Config{Keychain: kc, UnauthorizedHint: hint}), image); got.Err != unauthorized {
			t.Errorf("Err %q, want %q", got.Err, unauthorized)
		}
	})
	t.Run("pod's pull secrets", func(t *testing.T) {
		client := fake.NewClientset(dockerConfigSecret("team", "regcred", reg.host, "user", "secret"))
		r := newResolver(t, Config{PodPullSecrets: PullSecretKeychain(client), UnauthorizedHint: hint})
		// Failures are remembered per namespace and secrets: none of these may answer the next pod. Only
		// a lookup that offered the pod's secrets suggests them.
		for _, tc := range []struct {
			req  policy.ImageRequest
			want string
		}{
			{policy.ImageRequest{Namespace: "team"}, unauthorized},
			{policy.ImageRequest{Namespace: "other", Authenticated: true, PullSecrets: []string{"regcred"}}, withPod},
			{policy.ImageRequest{Namespace: "team", Authenticated: true, PullSecrets: []string{"missing"}}, withPod},
		} {
			tc.req.Images = []string{image}
			if got := lookupOne(r, tc.req); got.Err != tc.want {
				t.Errorf("%s %v: Err %q, want %q", tc.req.Namespace, tc.req.PullSecrets, got.Err, tc.want)
			}
		}
		noHint := newResolver(t, Config{PodPullSecrets: PullSecretKeychain(client)})
		want := reg.host + ": " + msgNotReadable + " (check the pod's imagePullSecrets)"
		if got := lookupOne(noHint, policy.ImageRequest{Namespace: "team", Authenticated: true, PullSecrets: []string{"missing"}, Images: []string{image}}); got.Err != want {
			t.Errorf("no hint, pod's secrets: Err %q, want %q", got.Err, want)
		}
		ok(t, lookupOne(r, policy.ImageRequest{Namespace: "team", Authenticated: true, PullSecrets: []string{"missing", "regcred"}, Images: []string{image}}))
		// What one pod's credentials read stays theirs: a pod without them learns from the cache
		// neither that the image exists nor its builds.
		if got := lookupOne(r, policy.ImageRequest{Namespace: "other", Images: []string{image}}); got.Err != unauthorized || got.Platforms != nil {
			t.Errorf("another namespace after a lookup with credentials: %+v, want Err %q", got, unauthorized)
		}
		// A caller not known to be the API server chooses the namespace: its requests never use pull
		// secrets, even those that exist in the namespace it names.
		fresh := newResolver(t, Config{PodPullSecrets: PullSecretKeychain(client), UnauthorizedHint: hint})
		if got := lookupOne(fresh, policy.ImageRequest{Namespace: "team", PullSecrets: []string{"regcred"}, Images: []string{image}}); got.Err != unauthorized {
			t.Errorf("unauthenticated caller naming team's secret: Err %q, want %q", got.Err, unauthorized)
		}
	})
	t.Run("server's pull secret scoped to namespaces", func(t *testing.T) {
		kc, err := DockerConfigKeychain(dockerConfigSecret("wincompat", "registry", reg.host, "user", "secret"))
		if err != nil {
			t.Fatal(err)
		}
		r := newResolver(t, Config{Keychain: kc, UnauthorizedHint: hint, KeychainNamespaces: func(ns string) bool { return ns == "team" }})
		ok(t, lookupOne(r, policy.ImageRequest{Namespace: "team", Images: []string{image}}))
		// Outside the scope: anonymous, the cache of the scoped lookup unseen, and no advice to set a
		// pull secret this namespace may not use.
		want := reg.host + ": " + msgNotReadable
		if got := lookupOne(r, policy.ImageRequest{Namespace: "other", Images: []string{image}}); got.Err != want || got.Platforms != nil {
			t.Errorf("outside the scope: %+v, want Err %q", got, want)
		}
		// And a repository that does not exist answers the same as one that is private.
		if got := lookupOne(r, policy.ImageRequest{Namespace: "other", Images: []string{reg.ref("nosuchrepo:1")}}); got.Err != want {
			t.Errorf("no such repository: Err %q, want %q", got.Err, want)
		}
	})
	t.Run("pull secrets unreadable", func(t *testing.T) {
		unreadable := func(context.Context, string, []string) (authn.Keychain, error) {
			return nil, errors.New(`secrets "regcred" is forbidden`)
		}
		req := policy.ImageRequest{Namespace: "team", Authenticated: true, PullSecrets: []string{"regcred"}, Images: []string{image}}
		// The server's credentials still serve.
		kc, err := DockerConfigKeychain(dockerConfigSecret("wincompat", "registry", reg.host, "user", "secret"))
		if err != nil {
			t.Fatal(err)
		}
		ok(t, lookupOne(newResolver(t, Config{Keychain: kc, PodPullSecrets: unreadable}), req))
		// Without them, the refusal says why the pod's did not help.
		got := lookupOne(newResolver(t, Config{PodPullSecrets: unreadable, UnauthorizedHint: hint}), req)
		want := withPod + "; the pod's pull secrets could not be read"
		if got.Err != want {
			t.Errorf("Err %q, want %q", got.Err, want)
		}
	})
	t.Run("pod's pull secrets unused unless configured", func(t *testing.T) {
		r := newResolver(t, Config{UnauthorizedHint: hint})
		got := lookupOne(r, policy.ImageRequest{Namespace: "team", Authenticated: true, PullSecrets: []string{"regcred"}, Images: []string{image}})
		if got.Err != unauthorized {
			t.Errorf("Err %q, want %q", got.Err, unauthorized)
		}
	})
}

func TestPanicInLookupContained(t *testing.T) {
	// A background lookup's panic would end the webhook; it ends the lookup instead.
	r := newResolver(t, Config{PodPullSecrets: func(context.Context, string, []string) (authn.Keychain, error) {
		panic("boom")
	}})
	got := lookupOne(r, policy.ImageRequest{Namespace: "team", Authenticated: true, PullSecrets: []string{"s"}, Images: []string{"127.0.0.1:1/app:1"}})
	if got.Err != "internal error reading the image" {
		t.Errorf("Err %q", got.Err)
	}
}

func TestDockerConfigKeychainRefuses(t *testing.T) {
	opaque := dockerConfigSecret("ns", "opaque", "r.example.com", "u", "p")
	opaque.Type = corev1.SecretTypeOpaque
	empty := dockerConfigSecret("ns", "empty", "r.example.com", "u", "p")
	empty.Data = nil
	broken := dockerConfigSecret("ns", "broken", "r.example.com", "u", "p")
	broken.Data[corev1.DockerConfigJsonKey] = []byte("{")
	for _, s := range []*corev1.Secret{nil, opaque, empty, broken} {
		if kc, err := DockerConfigKeychain(s); err == nil {
			t.Errorf("DockerConfigKeychain(%v) = %v, want an error", s, kc)
		}
	}
}

func TestDeadline(t *testing.T) {
	reg := newRegistry(t)
	reg.pushIndex("slow:1", testIndex(t, types.OCIImageIndex, ltsc2019, ltsc2022))
	reg.pushIndex("slow:2", testIndex(t, types.OCIImageIndex, ltsc2025))
	reg.pushIndex("fast:1", testIndex(t, types.OCIImageIndex, linuxAMD64))
	holdSlow := func(g *gate) {
		reg.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasPrefix(r.URL.Path, "/v2/slow/manifests/") {
				g.hold(r)
			}
			return false
		})
	}

	t.Run("Timeout", func(t *testing.T) {
		g := newGate(t)
		holdSlow(g)
		r := newResolver(t, Config{Timeout: 200 * time.Millisecond})
		req := policy.ImageRequest{Images: []string{reg.ref("slow:1"), reg.ref("fast:1")}}
		// The registry answers slow:1 only once the gate opens, after Lookup returned: Lookup did not
		// wait for it. Its answer is the one every network failure gets: a pod's author must not tell
		// a silent host from a refusing one.
		got := r.Lookup(context.Background(), req)
		if want := reg.host + ": " + msgUnreachable; got[req.Images[0]].Err != want || !got[req.Images[0]].Pending {
			t.Errorf("slow image: %+v, want Err %q, pending (its lookup goes on)", got[req.Images[0]], want)
		}
		if fast := got[req.Images[1]]; fast.Err != "" || fast.Pending || !samePlatforms(fast.Platforms, []policy.Platform{linuxAMD64}) {
			t.Errorf("fast image: %+v", fast)
		}
		// The lookup went on without the review; the next review finds it cached.
		g.open()
		waitCached(t, r, req)
		reg.reset()
		again := lookupImage(r, req.Images[0])
		if again.Err != "" || !samePlatforms(again.Platforms, []policy.Platform{ltsc2019, ltsc2022}) {
			t.Errorf("after the background lookup: %+v", again)
		}
		if n := len(reg.requests()); n != 0 {
			t.Errorf("warm lookup: %d requests, want none: %v", n, reg.requests())
		}
	})
	t.Run("review's deadline first", func(t *testing.T) {
		holdSlow(newGate(t))
		r := newResolver(t, Config{Timeout: 5 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		// Returned with the gate shut, so by the context's deadline, not Timeout's.
		got := r.Lookup(ctx, policy.ImageRequest{Images: []string{reg.ref("slow:2")}})[reg.ref("slow:2")]
		if want := reg.host + ": " + msgUnreachable; got.Err != want || got.Busy {
			t.Errorf("%+v, want Err %q", got, want)
		}
	})
}

func TestBackgroundLookupEnds(t *testing.T) {
	reg := newRegistry(t)
	abandoned := make(chan struct{}, 1)
	reg.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/v2/hang/") {
			<-r.Context().Done()
			select {
			case abandoned <- struct{}{}:
			default:
			}
			return true
		}
		return false
	})
	r := newResolver(t, Config{Timeout: 50 * time.Millisecond, BackgroundTimeout: 300 * time.Millisecond})
	req := policy.ImageRequest{Images: []string{reg.ref("hang:1")}}
	if got := lookupOne(r, req); got.Err != reg.host+": "+msgUnreachable {
		t.Fatalf("Err %q", got.Err)
	}
	// fetch caches its error as its last act: once cached, the background lookup has returned. Only
	// BackgroundTimeout's context gives this answer: the registry never does.
	got := waitCached(t, r, req)
	if want := reg.host + ": " + msgUnreachable; got.Err != want {
		t.Errorf("Err %q, want %q", got.Err, want)
	}
	// And the registry saw its request given up, not left open.
	<-abandoned
}

func TestCache(t *testing.T) {
	reg := newRegistry(t)
	digest := reg.pushIndex("app:1", testIndex(t, types.OCIImageIndex, ltsc2019, ltsc2022))
	want := []policy.Platform{ltsc2019, ltsc2022}

	t.Run("digest cached for good", func(t *testing.T) {
		clk := newClock()
		r := newResolver(t, Config{Now: clk.Now})
		image := reg.ref("app@" + digest)
		lookupImage(r, image)
		reg.reset()
		clk.advance(1000 * time.Hour)
		if got := lookupImage(r, image); !samePlatforms(got.Platforms, want) || len(reg.requests()) != 0 {
			t.Errorf("got %+v with requests %v, want the cached platforms", got, reg.requests())
		}
	})

	t.Run("tag re-resolved by HEAD after TagTTL", func(t *testing.T) {
		clk := newClock()
		r := newResolver(t, Config{Now: clk.Now, TagTTL: 5 * time.Minute})
		image := reg.ref("app:1")
		reg.reset()
		lookupImage(r, image)
		if n := reg.count("GET", "/manifests/"); n != 1 {
			t.Fatalf("first lookup: %d manifest GETs, want 1", n)
		}
		reg.reset()
		clk.advance(4 * time.Minute)
		if got := lookupImage(r, image); !samePlatforms(got.Platforms, want) || len(reg.requests()) != 0 {
			t.Errorf("within TagTTL: %+v with requests %v, want the cache alone", got, reg.requests())
		}
		clk.advance(2 * time.Minute)
		got := lookupImage(r, image)
		if !samePlatforms(got.Platforms, want) || got.Digest != digest {
			t.Errorf("after TagTTL: %+v", got)
		}
		if head, get := reg.count("HEAD", "/manifests/1"), reg.count("GET", "/manifests/"); head != 1 || get != 0 {
			t.Errorf("after TagTTL, unchanged tag: %d HEAD and %d GET, want 1 and 0: %v", head, get, reg.requests())
		}

		// The tag moves: the HEAD sees it, and the new digest is read.
		moved := reg.pushIndex("app:1", testIndex(t, types.OCIImageIndex, ltsc2025))
		reg.reset()
		clk.advance(6 * time.Minute)
		got = lookupImage(r, image)
		if got.Digest != moved || !samePlatforms(got.Platforms, []policy.Platform{ltsc2025}) {
			t.Errorf("moved tag: %+v, want %s", got, moved)
		}
		if head, get := reg.count("HEAD", "/manifests/1"), reg.count("GET", "/manifests/"+moved); head != 1 || get != 1 {
			t.Errorf("moved tag: %d HEAD and %d GET by digest, want 1 and 1: %v", head, get, reg.requests())
		}
		reg.pushIndex("app:1", testIndex(t, types.OCIImageIndex, ltsc2019, ltsc2022)) // as the other subtests expect
	})

	t.Run("error remembered for NegativeTTL", func(t *testing.T) {
		clk := newClock()
		r := newResolver(t, Config{Now: clk.Now, NegativeTTL: 30 * time.Second})
		image := reg.ref("later:1")
		notFound := reg.host + ": " + msgNotReadable
		if got := lookupImage(r, image); got.Err != notFound {
			t.Fatalf("Err %q", got.Err)
		}
		reg.pushIndex("later:1", testIndex(t, types.OCIImageIndex, ltsc2022))
		reg.reset()
		clk.advance(29 * time.Second)
		if got := lookupImage(r, image); got.Err != notFound || len(reg.requests()) != 0 {
			t.Errorf("within NegativeTTL: %+v with requests %v, want the cached error", got, reg.requests())
		}
		clk.advance(2 * time.Second)
		if got := lookupImage(r, image); got.Err != "" || !samePlatforms(got.Platforms, []policy.Platform{ltsc2022}) {
			t.Errorf("after NegativeTTL: %+v", got)
		}
	})

	t.Run("bounded by MaxEntries", func(t *testing.T) {
		var digests []string
		for i := range 3 {
			digests = append(digests, reg.pushIndex(fmt.Sprintf("lru:%d", i), testIndex(t, types.OCIImageIndex,
				policy.Platform{OS: "windows", Architecture: "amd64", OSVersion: fmt.Sprintf("10.0.20348.%d", i)})))
		}
		r := newResolver(t, Config{MaxEntries: 2})
		for _, d := range digests {
			lookupImage(r, reg.ref("lru@"+d))
		}
		reg.reset()
		lookupImage(r, reg.ref("lru@"+digests[2]))
		if n := len(reg.requests()); n != 0 {
			t.Errorf("most recent digest: %d requests, want a cache hit", n)
		}
		lookupImage(r, reg.ref("lru@"+digests[0]))
		if n := reg.count("GET", "/manifests/"+digests[0]); n != 1 {
			t.Errorf("evicted digest: %d manifest GETs, want 1", n)
		}
	})
}

func TestOneLookupPerImage(t *testing.T) {
	reg := newRegistry(t)
	reg.pushIndex("app:1", testIndex(t, types.OCIImageIndex, ltsc2019, ltsc2022))
	reg.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		// Long enough for every review to join the first one's lookup.
		if strings.Contains(r.URL.Path, "/manifests/") {
			time.Sleep(100 * time.Millisecond)
		}
		return false
	})
	r := newResolver(t, Config{})
	reg.reset()
	const reviews = 20
	var wg sync.WaitGroup
	answers := make([]policy.Image, reviews)
	for i := range reviews {
		wg.Go(func() { answers[i] = lookupImage(r, reg.ref("app:1")) })
	}
	wg.Wait()
	for i, a := range answers {
		if a.Err != "" || !samePlatforms(a.Platforms, []policy.Platform{ltsc2019, ltsc2022}) {
			t.Errorf("review %d: %+v", i, a)
		}
	}
	if n := reg.count("GET", "/manifests/"); n != 1 {
		t.Errorf("%d manifest GETs for %d concurrent reviews, want 1", n, reviews)
	}
}

func TestLookupsBounded(t *testing.T) {
	reg := newRegistry(t)
	for _, tag := range []string{"1", "2", "3"} {
		reg.pushIndex("held:"+tag, testIndex(t, types.OCIImageIndex, ltsc2022))
	}
	g := newGate(t)
	reg.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/v2/held/manifests/") {
			g.hold(r)
		}
		return false
	})
	m := NewMetrics(prometheus.NewRegistry())
	// Deadlines far beyond the test: the reviews that fill the bound must wait for the gate, however
	// slow the machine.
	r := newResolver(t, Config{MaxLookups: 2, MaxLookupsPerRegistry: 2, Timeout: time.Hour, BackgroundTimeout: time.Hour, Metrics: m})
	first, second, third := reg.ref("held:1"), reg.ref("held:2"), reg.ref("held:3")
	want := []policy.Platform{ltsc2022}

	// Two reviews fill the bound; their lookups are in the registry, which holds them.
	var wg sync.WaitGroup
	filled := make([]policy.Image, 2)
	for i, image := range []string{first, second} {
		wg.Go(func() { filled[i] = lookupImage(r, image) })
	}
	<-g.arrived
	<-g.arrived
	reg.reset()

	// A third image waits for a slot, and a review that stops waiting (here its context has ended)
	// is told wincompat is busy, not that the registry timed out: no request of the third reached the
	// registry.
	r.Warm(policy.ImageRequest{Images: []string{third}})
	for queued := false; !queued; {
		_, queued = r.queued.Load(third)
		time.Sleep(time.Millisecond)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	got := r.Lookup(ended, policy.ImageRequest{Images: []string{third}})[third]
	if !got.Busy || got.Err != r.busy || got.Platforms != nil {
		t.Errorf("past the bound: %+v, want Busy and Err %q", got, r.busy)
	}
	if n := len(reg.requests()); n != 0 {
		t.Errorf("past the bound: %d requests, want none: %v", n, reg.requests())
	}
	// The refusal says nothing about the image: not remembered, unlike the registry's errors.
	if l, _ := r.parse(third, credentials{}, router{}); l.ref == nil {
		t.Fatalf("%s does not parse", third)
	} else if img, ok := r.cached(l); ok {
		t.Errorf("refusal cached: %+v", img)
	}
	// A review of an image in flight joins its lookup and needs no slot: only its own context, ended
	// here, ends its wait.
	if got := r.Lookup(ended, policy.ImageRequest{Images: []string{first}})[first]; got.Busy || got.Err != reg.host+": "+msgUnreachable {
		t.Errorf("joining a lookup in flight: %+v, want a timeout, not busy", got)
	}

	// Once the registry answers, the reviews that filled the bound get their images, and the slots
	// are free: the third lookup, still waiting, takes one and is read once.
	g.open()
	wg.Wait()
	for i, img := range filled {
		if img.Err != "" || !samePlatforms(img.Platforms, want) {
			t.Errorf("review %d: %+v", i, img)
		}
	}
	waitCached(t, r, policy.ImageRequest{Images: []string{third}})
	if got := lookupImage(r, third); got.Err != "" || !samePlatforms(got.Platforms, want) {
		t.Errorf("after the bound freed: %+v", got)
	}
	if n := reg.count("GET", "/v2/held/manifests/3"); n != 1 {
		t.Errorf("after the bound freed: %d manifest GETs, want 1: %v", n, reg.requests())
	}
	for result, want := range map[string]float64{"hit": 1, "miss": 2, "error": 0, "timeout": 1, "busy": 1} {
		if got := testutil.ToFloat64(m.lookups.WithLabelValues(result)); got != want {
			t.Errorf("lookups{result=%q} = %v, want %v", result, got, want)
		}
	}
}

func TestLookupAnswersEveryImage(t *testing.T) {
	reg := newRegistry(t)
	digest := reg.pushIndex("app:1", testIndex(t, types.OCIImageIndex, ltsc2022))
	r := newResolver(t, Config{})
	images := []string{reg.ref("app:1"), reg.ref("app:1"), reg.ref("app@" + digest), "not a reference", reg.ref("app:1")}
	reg.reset()
	got := r.Lookup(context.Background(), policy.ImageRequest{Images: images})
	if len(got) != 3 {
		t.Errorf("%d answers for 3 distinct images: %+v", len(got), got)
	}
	for _, image := range images {
		if _, ok := got[image]; !ok {
			t.Errorf("no answer for %q", image)
		}
	}
	if got["not a reference"].Err != errInvalid || got[reg.ref("app:1")].Digest != digest {
		t.Errorf("answers: %+v", got)
	}
	// The caller owns the answer: changing it leaves the cache alone.
	got[reg.ref("app:1")].Platforms[0].OSVersion = "changed"
	if again := lookupImage(r, reg.ref("app:1")); !again.Platforms[0].Equal(ltsc2022) {
		t.Errorf("cache changed through an answer: %+v", again)
	}
}

func TestWarm(t *testing.T) {
	reg := newRegistry(t)
	reg.pushIndex("a:1", testIndex(t, types.OCIImageIndex, ltsc2019))
	reg.pushImage("b:1", testImage(t, ltsc2025, false))
	g := newGate(t)
	reg.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/manifests/") {
			g.hold(r)
		}
		return false
	})
	r := newResolver(t, Config{})
	req := policy.ImageRequest{Images: []string{reg.ref("a:1"), reg.ref("b:1"), "not a reference"}}
	// The registry answers nothing until the gate opens, after Warm returned: Warm did not wait.
	if cached := r.Warm(req); cached != nil {
		t.Errorf("Warm before any lookup answered %v", cached)
	}
	g.open()
	for _, image := range req.Images[:2] {
		waitCached(t, r, policy.ImageRequest{Images: []string{image}})
	}
	// Once read, Warm answers from the cache, so a template can be judged by its images.
	if cached := r.Warm(req); len(cached) != 2 || !samePlatforms(cached[req.Images[0]].Platforms, []policy.Platform{ltsc2019}) {
		t.Errorf("Warm after the lookups answered %+v; want both images from the cache", cached)
	}
	reg.reset()
	got := r.Lookup(context.Background(), req)
	if !samePlatforms(got[req.Images[0]].Platforms, []policy.Platform{ltsc2019}) ||
		!samePlatforms(got[req.Images[1]].Platforms, []policy.Platform{ltsc2025}) || len(reg.requests()) != 0 {
		t.Errorf("after Warm: %+v with requests %v", got, reg.requests())
	}
}

// Cached is admission in gate mode: it never makes a request, answers what is cached, and leaves out
// what is not (the webhook gates the pod); a reference that cannot be read is answered at once.
func TestCached(t *testing.T) {
	reg := newRegistry(t)
	reg.pushIndex("a:1", testIndex(t, types.OCIImageIndex, ltsc2019))
	r := newResolver(t, Config{})
	req := policy.ImageRequest{Images: []string{reg.ref("a:1"), "not a reference"}}
	reg.reset() // the pushes
	got := r.Cached(req)
	if _, ok := got[req.Images[0]]; ok || got[req.Images[1]].Err == "" || got[req.Images[1]].Pending {
		t.Errorf("before any lookup: %+v", got)
	}
	time.Sleep(50 * time.Millisecond) // a lookup Cached had started would have been sent by now
	if n := len(reg.requests()); n != 0 {
		t.Fatalf("Cached made %d requests: %v", n, reg.requests())
	}
	r.Lookup(context.Background(), policy.ImageRequest{Images: req.Images[:1]})
	if got := r.Cached(req); !samePlatforms(got[req.Images[0]].Platforms, []policy.Platform{ltsc2019}) {
		t.Errorf("after a lookup: %+v", got)
	}
}

func TestMetrics(t *testing.T) {
	reg := newRegistry(t)
	reg.pushIndex("app:1", testIndex(t, types.OCIImageIndex, ltsc2022))
	reg.pushIndex("slow:1", testIndex(t, types.OCIImageIndex, ltsc2022))
	g := newGate(t)
	reg.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/v2/slow/manifests/") {
			g.hold(r)
		}
		return false
	})
	prom := prometheus.NewRegistry()
	m := NewMetrics(prom)
	r := newResolver(t, Config{Metrics: m})
	for _, image := range []string{"app:1", "app:1", "missing:1", "missing:1"} {
		lookupImage(r, reg.ref(image))
	}
	// A review whose context has ended while the registry holds the image: a timeout, whatever the
	// machine's speed.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	r.Lookup(ended, policy.ImageRequest{Images: []string{reg.ref("slow:1")}})
	g.open()
	lookupImage(r, "not a reference")
	for result, want := range map[string]float64{"hit": 1, "miss": 1, "error": 3, "timeout": 1, "busy": 0} {
		if got := testutil.ToFloat64(m.lookups.WithLabelValues(result)); got != want {
			t.Errorf("lookups{result=%q} = %v, want %v", result, got, want)
		}
	}
	// Registry lookups: app, missing and, once finished in the background, slow.
	waitCached(t, r, policy.ImageRequest{Images: []string{reg.ref("slow:1")}})
	families, err := prom.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var samples uint64
	for _, f := range families {
		if f.GetName() == "wincompat_image_lookup_duration_seconds" {
			samples = f.GetMetric()[0].GetHistogram().GetSampleCount()
			if labels := f.GetMetric()[0].GetLabel(); len(labels) != 0 {
				t.Errorf("duration has labels %v", labels)
			}
		}
	}
	if samples != 3 {
		t.Errorf("%d duration samples, want 3", samples)
	}
	var nilMetrics *Metrics
	nilMetrics.count(resultHit) // a resolver without metrics records nothing and does not fail
	nilMetrics.observe(time.Second)
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []Config{
		{Timeout: -1},
		{NegativeTTL: -time.Second},
		{MaxEntries: -1},
		{MaxLookups: -1},
		{Timeout: time.Minute, BackgroundTimeout: time.Second},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c := r.c; c.Timeout != time.Second || c.BackgroundTimeout != 10*time.Second || c.TagTTL != 5*time.Minute ||
		c.NegativeTTL != 30*time.Second || c.MaxEntries != 10000 || c.MaxLookups != 64 {
		t.Errorf("defaults: %+v", c)
	}
	if want := "wincompat's registry lookups are at capacity, try again shortly"; r.busy != want {
		t.Errorf("answer past the bound %q, want %q", r.busy, want)
	}
}

func BenchmarkLookupWarm(b *testing.B) {
	reg := newRegistry(b)
	reg.pushIndex("a:1", testIndex(b, types.OCIImageIndex, ltsc2019, ltsc2022, ltsc2025, linuxAMD64))
	reg.pushImage("b:1", testImage(b, ltsc2022, false))
	r := newResolver(b, Config{})
	req := policy.ImageRequest{Namespace: "team", Images: []string{reg.ref("a:1"), reg.ref("b:1")}}
	for image, img := range r.Lookup(context.Background(), req) {
		if img.Err != "" {
			b.Fatalf("%s: %s", image, img.Err)
		}
	}
	reg.reset()
	b.ReportAllocs()
	for b.Loop() {
		r.Lookup(context.Background(), req)
	}
	if n := len(reg.requests()); n != 0 {
		b.Fatalf("%d registry requests with a warm cache", n)
	}
}

// TestPullSecretsReadOncePerTTL: however many lookups name them, a pod's pull secrets cost one Get per
// namespace, name and TTL, and at most MaxPullSecrets of a pod's names are read.
func TestPullSecretsReadOncePerTTL(t *testing.T) {
	client := fake.NewClientset(dockerConfigSecret("team", "regcred", "registry.example", "user", "secret"))
	keychain := PullSecretKeychain(client)
	names := []string{"regcred"}
	for i := range 20 {
		names = append(names, fmt.Sprintf("missing-%d", i))
	}
	for range 5 {
		if _, err := keychain(context.Background(), "team", names); err != nil {
			t.Fatal(err)
		}
	}
	gets := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
			gets++
		}
	}
	if gets != MaxPullSecrets {
		t.Errorf("%d Gets for 5 reads of %d names, want %d", gets, len(names), MaxPullSecrets)
	}
}
