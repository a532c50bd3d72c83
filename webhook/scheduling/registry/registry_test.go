package registry

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
)

// testRegistry is go-containerregistry's in-memory registry on 127.0.0.1, with a log of the requests
// it was sent and a hook that can answer some of them instead.
type testRegistry struct {
	t    testing.TB
	srv  *httptest.Server
	host string
	// push authenticates the test's own pushes when the hook asks for credentials.
	push authn.Authenticator

	mu   sync.Mutex
	log  []string
	hook func(w http.ResponseWriter, r *http.Request) bool
}

func newRegistry(t testing.TB) *testRegistry {
	t.Helper()
	reg := &testRegistry{t: t, push: authn.Anonymous}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	reg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg.mu.Lock()
		reg.log = append(reg.log, r.Method+" "+r.URL.Path)
		hook := reg.hook
		reg.mu.Unlock()
		if hook != nil && hook(w, r) {
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(reg.srv.Close)
	reg.host = strings.TrimPrefix(reg.srv.URL, "http://")
	return reg
}

// setHook installs h in front of the registry; h returns whether it answered.
func (reg *testRegistry) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.hook = h
}

// count is how many requests with method had a path containing part since the last reset.
func (reg *testRegistry) count(method, part string) int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	n := 0
	for _, l := range reg.log {
		if strings.HasPrefix(l, method+" ") && strings.Contains(l, part) {
			n++
		}
	}
	return n
}

func (reg *testRegistry) requests() []string {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return append([]string(nil), reg.log...)
}

func (reg *testRegistry) reset() {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.log = nil
}

// ref is repo (with a tag or digest) in this registry.
func (reg *testRegistry) ref(repo string) string { return reg.host + "/" + repo }

func (reg *testRegistry) pushImage(repo string, img v1.Image) string {
	reg.t.Helper()
	ref := mustRef(reg.t, reg.ref(repo))
	if err := remote.Write(ref, img, remote.WithAuth(reg.push)); err != nil {
		reg.t.Fatalf("pushing %s: %v", ref, err)
	}
	return digestOf(reg.t, img)
}

func (reg *testRegistry) pushIndex(repo string, idx v1.ImageIndex) string {
	reg.t.Helper()
	ref := mustRef(reg.t, reg.ref(repo))
	if err := remote.WriteIndex(ref, idx, remote.WithAuth(reg.push)); err != nil {
		reg.t.Fatalf("pushing %s: %v", ref, err)
	}
	return digestOf(reg.t, idx)
}

// putManifest stores raw bytes as a manifest, for what remote.Write would refuse to build.
func (reg *testRegistry) putManifest(repo, tag, mediaType string, raw []byte) {
	reg.t.Helper()
	req, err := http.NewRequest(http.MethodPut, reg.srv.URL+"/v2/"+repo+"/manifests/"+tag, bytes.NewReader(raw))
	if err != nil {
		reg.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mediaType)
	resp, err := reg.srv.Client().Do(req)
	if err != nil {
		reg.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		reg.t.Fatalf("PUT manifest %s:%s: %s", repo, tag, resp.Status)
	}
}

func digestOf(t testing.TB, d interface{ Digest() (v1.Hash, error) }) string {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// testImage is registrytest.Image, failing t on error.
func testImage(t testing.TB, p policy.Platform, oci bool) v1.Image {
	t.Helper()
	img, err := registrytest.Image(p, oci)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// testIndex is registrytest.Index, failing t on error.
func testIndex(t testing.TB, mediaType types.MediaType, platforms ...policy.Platform) v1.ImageIndex {
	t.Helper()
	idx, err := registrytest.Index(mediaType, platforms...)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// gate holds registry requests until the test opens it. A call that returns while the gate is shut did
// not wait for the registry, which no stopwatch could prove on a busy machine.
type gate struct {
	// arrived receives the path of every request the gate holds, as it arrives.
	arrived chan string
	release chan struct{}
	once    sync.Once
}

// newGate returns a shut gate, opened when t ends so that the registry can close.
func newGate(t testing.TB) *gate {
	g := &gate{arrived: make(chan string, 16), release: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// hold blocks r until the gate opens or r's client gives up.
func (g *gate) hold(r *http.Request) {
	select {
	case g.arrived <- r.URL.Path:
	case <-g.release:
	case <-r.Context().Done():
	}
	select {
	case <-g.release:
	case <-r.Context().Done():
	}
}

// clock is a settable Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func mustRef(t testing.TB, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
