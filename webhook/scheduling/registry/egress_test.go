package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wincompat/wincompat/policy"
)

func TestClassify(t *testing.T) {
	for addr, want := range map[string]addrClass{
		"169.254.169.254": classForbidden, "169.254.170.2": classForbidden, "fe80::1": classForbidden,
		"fd00:ec2::254": classForbidden, "fd00:ec2::23": classForbidden, "100.100.100.200": classForbidden, "168.63.129.16": classForbidden,
		"::ffff:169.254.169.254": classForbidden, "64:ff9b::a9fe:a9fe": classForbidden, "2002:a9fe:a9fe::1": classForbidden,
		"224.0.0.1": classForbidden, "ff02::1": classForbidden, "255.255.255.255": classForbidden, "0.1.2.3": classForbidden,
		"127.0.0.1": classPrivate, "127.3.2.1": classPrivate, "::1": classPrivate, "0.0.0.0": classPrivate, "::": classPrivate,
		"10.1.2.3": classPrivate, "172.20.0.1": classPrivate, "192.168.1.1": classPrivate, "100.64.0.1": classPrivate,
		"fd12::1": classPrivate, "::ffff:10.0.0.1": classPrivate, "64:ff9b::a00:1": classPrivate,
		"20.1.2.3": classPublic, "2606:4700::1": classPublic, "64:ff9b::808:808": classPublic,
	} {
		if got := classify(netip.MustParseAddr(addr)); got != want {
			t.Errorf("classify(%s) = %v, want %v", addr, got, want)
		}
	}
}

// dialLog records the addresses the resolver's egress dialled, and dials nothing else than what the
// test lets through.
type dialLog struct {
	mu    sync.Mutex
	dials []string
}

func (d *dialLog) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dials...)
}

// recordDials makes r resolve names from names (anything else: no such host) and record every dial;
// a dial goes through to the real network only for loopback addresses, where the tests' servers are.
func recordDials(r *Resolver, names map[string][]netip.Addr) *dialLog {
	log := &dialLog{}
	r.egress.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := names[host]; ok {
			return a, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	real := r.egress.dial
	r.egress.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		log.mu.Lock()
		log.dials = append(log.dials, address)
		log.mu.Unlock()
		if ap, err := netip.ParseAddrPort(address); err == nil && ap.Addr().IsLoopback() {
			return real(ctx, network, address)
		}
		return nil, errors.New("no network in this test")
	}
	return log
}

// TestEgressNeverMetadata: link-local and metadata addresses are never dialled, as IP literals or by
// names that resolve to them, even where private networks are allowed.
func TestEgressNeverMetadata(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	r := newResolver(t, Config{Metrics: m}) // private networks allowed
	dials := recordDials(r, map[string][]netip.Addr{
		"metadata.google.internal": {netip.MustParseAddr("169.254.169.254")},
		"imds.example":             {netip.MustParseAddr("fd00:ec2::254")},
		"podidentity.example":      {netip.MustParseAddr("fd00:ec2::23")},
		"alibaba.example":          {netip.MustParseAddr("100.100.100.200")},
		"nat64.example":            {netip.MustParseAddr("64:ff9b::a9fe:a9fe")},
		"linklocal.example":        {netip.MustParseAddr("fe80::1")},
	})
	images := []string{
		"169.254.169.254/latest/meta-data:1", "169.254.169.254:80/app:1", "[fe80::1]:5000/app:1",
		"[fd00:ec2::23]:80/app:1", "podidentity.example/app:1",
		"metadata.google.internal/computemetadata/v1:1", "imds.example/app:1", "alibaba.example/app:1",
		"nat64.example/app:1", "linklocal.example/app:1", "[::ffff:a9fe:a9fe]:443/app:1",
	}
	for _, image := range images {
		got := lookupImage(r, image)
		if want := strings.Split(image, "/")[0] + ": " + msgUnreachable; got.Err != want {
			t.Errorf("%s: Err %q, want %q", image, got.Err, want)
		}
	}
	if d := dials.list(); len(d) != 0 {
		t.Errorf("dialled %v", d)
	}
	if got := testutil.ToFloat64(m.failures[reasonPolicy]); got != float64(len(images)) {
		t.Errorf("failures{reason=policy} = %v, want %d", got, len(images))
	}
}

// TestEgressPrivateOnlyWhenAllowed: a registry on loopback, named by address or by a name that
// resolves there, is reached only when private networks are allowed.
func TestEgressPrivateOnlyWhenAllowed(t *testing.T) {
	reg := newRegistry(t)
	reg.pushIndex("app:1", testIndex(t, types.OCIImageIndex, ltsc2022))
	image := reg.ref("app:1")
	port := strings.Split(reg.host, ":")[1]
	named := "registry.example:" + port + "/app:1"
	for _, allow := range []bool{false, true} {
		r, err := New(Config{Timeout: 5 * time.Second, AllowPrivateNetworks: allow})
		if err != nil {
			t.Fatal(err)
		}
		recordDials(r, map[string][]netip.Addr{"registry.example": {netip.MustParseAddr("127.0.0.1")}})
		reg.reset()
		got := lookupImage(r, image)
		if allow {
			if got.Err != "" || !samePlatforms(got.Platforms, []policy.Platform{ltsc2022}) {
				t.Errorf("allow=true: %+v", got)
			}
		} else if want := reg.host + ": " + msgUnreachable; got.Err != want {
			t.Errorf("allow=false: Err %q, want %q", got.Err, want)
		}
		// By name: https is tried (the registry speaks http, so that fails), never plain HTTP, which
		// is for a loopback registry named as such.
		got = lookupImage(r, named)
		if want := "registry.example:" + port + ": " + msgUnreachable; got.Err != want {
			t.Errorf("allow=%v, by name: Err %q, want %q", allow, got.Err, want)
		}
		if n := len(reg.requests()); !allow && n != 0 {
			t.Errorf("allow=false: the registry got %v", reg.requests())
		}
	}
}

// TestNoRedirectToPlainHTTP: an https registry that redirects to http (here to a loopback service,
// with private networks allowed) is not followed.
func TestNoRedirectToPlainHTTP(t *testing.T) {
	var plainHits sync.Map
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainHits.Store(r.URL.Path, true)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(plain.Close)
	var redirected sync.Map
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		redirected.Store(r.URL.Path, true)
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(secure.Close)
	r := newResolver(t, Config{})
	trustServer(r, secure)
	port := strings.Split(secure.Listener.Addr().String(), ":")[1]
	// example.com is a name httptest's certificate carries.
	recordDials(r, map[string][]netip.Addr{"example.com": {netip.MustParseAddr("127.0.0.1")}})
	got := lookupImage(r, "example.com:"+port+"/app:1")
	if want := "example.com:" + port + ": " + msgUnreachable; got.Err != want {
		t.Errorf("Err %q, want %q", got.Err, want)
	}
	if _, ok := redirected.Load("/v2/app/manifests/1"); !ok {
		t.Error("the https registry was never asked for the manifest: the test did not reach the redirect")
	}
	plainHits.Range(func(k, _ any) bool {
		t.Errorf("plain HTTP service got %v", k)
		return true
	})
}

func trustServer(r *Resolver, srv *httptest.Server) {
	base := r.transport.(guard).next.(*http.Transport)
	base.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
}

// TestNetworkFailuresLookAlike: connection refused, an untrusted certificate, a plain HTTP service,
// no such host, a timeout and the egress policy all give the pod's author the same words; the
// operator's metric tells them apart.
func TestNetworkFailuresLookAlike(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := strings.Split(closed.Addr().String(), ":")[1]
	closed.Close()
	untrusted := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(untrusted.Close)
	plainHTTP := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plainHTTP.Close)
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hang.Close() })
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	port := func(s string) string { return s[strings.LastIndex(s, ":")+1:] }

	m := NewMetrics(prometheus.NewRegistry())
	// BackgroundTimeout ends the lookup of the silent server; the review waits for all.
	r := newResolver(t, Config{Metrics: m, Timeout: 3 * time.Second, BackgroundTimeout: 3 * time.Second})
	loopback := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	recordDials(r, map[string][]netip.Addr{"refused.example": loopback, "untrusted.example": loopback,
		"plain.example": loopback, "silent.example": loopback, "meta.example": {netip.MustParseAddr("169.254.169.254")}})
	cases := map[string]string{
		"refused": "refused.example:" + closedPort,
		"tls":     "untrusted.example:" + port(untrusted.Listener.Addr().String()),
		"plain":   "plain.example:" + port(plainHTTP.Listener.Addr().String()),
		"dns":     "nosuchhost.example:5000",
		"timeout": "silent.example:" + port(hang.Addr().String()),
		"policy":  "meta.example:443",
	}
	var req policy.ImageRequest
	for _, host := range cases {
		req.Images = append(req.Images, host+"/app:1")
	}
	got := r.Lookup(context.Background(), req)
	// The silent server's lookup ends by BackgroundTimeout, which the review may not have waited for.
	waitCached(t, r, policy.ImageRequest{Images: []string{cases["timeout"] + "/app:1"}})
	for what, host := range cases {
		if msg := got[host+"/app:1"].Err; msg != host+": "+msgUnreachable {
			t.Errorf("%s: Err %q, want %q", what, msg, host+": "+msgUnreachable)
		}
	}
	for reason, want := range map[string]float64{reasonRefused: 1, reasonTLS: 2, reasonDNS: 1, reasonTimeout: 1, reasonPolicy: 1} {
		if got := testutil.ToFloat64(m.failures[reason]); got != want {
			t.Errorf("failures{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// TestFairPerRegistry: a registry that holds every request takes at most its share of the lookup
// slots; another registry's images are still read.
func TestFairPerRegistry(t *testing.T) {
	hung, other := newRegistry(t), newRegistry(t)
	var held []string
	for i := range 6 {
		hung.pushIndex(fmt.Sprintf("held:%d", i), testIndex(t, types.OCIImageIndex, ltsc2022))
		held = append(held, hung.ref(fmt.Sprintf("held:%d", i)))
	}
	g := newGate(t)
	hung.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/manifests/") {
			g.hold(r)
		}
		return false
	})
	other.pushIndex("app:1", testIndex(t, types.OCIImageIndex, ltsc2019))
	good := other.ref("app:1")
	// A lookup waits for a slot up to Timeout; the hung registry holds its requests up to
	// BackgroundTimeout, past the test.
	r := newResolver(t, Config{MaxLookups: 4, MaxLookupsPerRegistry: 2, Timeout: 10 * time.Second, BackgroundTimeout: time.Hour})
	r.Warm(policy.ImageRequest{Images: held})
	// The hung registry has its two lookups; its other four wait for a slot of their own registry
	// (as many may wait as may run). Without the per-registry bound it would hold all four slots.
	<-g.arrived
	<-g.arrived
	for waiting := 0; waiting < len(held)-2; {
		r.slots.mu.Lock()
		waiting = r.slots.waiting
		r.slots.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	img := lookupImage(r, good)
	if img.Err != "" || !samePlatforms(img.Platforms, []policy.Platform{ltsc2019}) {
		t.Errorf("other registry while one hangs: %+v", img)
	}
	r.slots.mu.Lock()
	if n := r.slots.byHost[hung.host]; n != 2 {
		t.Errorf("hung registry holds %d slots, want 2", n)
	}
	r.slots.mu.Unlock()
	g.open()
}
