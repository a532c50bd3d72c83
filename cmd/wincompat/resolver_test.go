package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
)

// The CLI reads the user's docker config: a refusal says how to log in, not the chart's pull secret.
func TestCLIResolverUnauthorizedHint(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer registry.Close()
	r, err := newCLIResolver(10*time.Second, cliImageFlags{clouds: "acr,ecr,gar", allowPrivateNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(registry.URL, "http://")
	image := host + "/app:1"
	got := r.Lookup(context.Background(), policy.ImageRequest{Images: []string{image}})[image]
	if want := host + ": no such image, or not readable with the credentials wincompat may use for this pod (log in with docker login or crane auth login)"; got.Err != want {
		t.Errorf("Err %q, want %q", got.Err, want)
	}
}

// An audit reads references every pod author in the cluster chose, from the admin's machine: by
// default it lends them no cloud identity and no private network (issue 40, finding 7).
func TestAuditImageDefaultsPublicAnonymous(t *testing.T) {
	code, usage, _ := runCLI(t, "", "audit", "-h")
	if code != 0 {
		t.Fatalf("audit -h: exit %d", code)
	}
	flagHelp := func(name string) string {
		// A flag's entry is "      --name type   help", or "  -x, --name ..." with a shorthand.
		_, after, ok := strings.Cut(usage, "--"+name+" ")
		if !ok {
			t.Fatalf("audit -h lacks --%s:\n%s", name, usage)
		}
		help, _, _ := strings.Cut(after, "\n")
		return help
	}
	if help := flagHelp("image-cloud-credentials"); strings.Contains(help, "(default ") {
		t.Errorf("--image-cloud-credentials has a default: %s", help)
	}
	if help := flagHelp("image-allow-private-networks"); strings.Contains(help, "(default true)") {
		t.Errorf("--image-allow-private-networks is on by default: %s", help)
	}
}

// The audit's resolver, as its defaults make it, never dials a registry on a private network; the
// flag lets the admin who means one do so.
func TestAuditResolverPrivateNetworksOptIn(t *testing.T) {
	reg := registrytest.Start()
	defer reg.Close()
	image, err := reg.PushIndex("app", "1", types.OCIImageIndex, registrytest.Windows("10.0.20348.2227"))
	if err != nil {
		t.Fatal(err)
	}
	for _, allow := range []bool{false, true} {
		before := reg.Requests.Load()
		r, err := newCLIResolver(10*time.Second, cliImageFlags{allowPrivateNetworks: allow})
		if err != nil {
			t.Fatal(err)
		}
		got := r.Lookup(context.Background(), policy.ImageRequest{Images: []string{image}})[image]
		asked := reg.Requests.Load() - before
		if !allow && (asked != 0 || !strings.Contains(got.Err, "registry unreachable: ") || !strings.Contains(got.Err, "egress to 127.0.0.1 refused")) {
			t.Errorf("private networks refused: registry asked %d times, Err %q", asked, got.Err)
		}
		if allow && (asked == 0 || got.Err != "") {
			t.Errorf("private networks allowed: registry asked %d times, Err %q", asked, got.Err)
		}
	}
}

// Offline, an unreachable registry is the user's own network: mutate says why (here, a port nothing
// listens on), not that an operator's log does, for there is no operator and no log.
func TestMutateResolveImagesSaysWhyUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	in := strings.Replace(pod, "mcr.microsoft.com/windows/nanoserver:ltsc2022", closed+"/app:1", 1)
	code, _, errOut := runCLI(t, in, "mutate", "--resolve-images", "--image-lookup-timeout", "5s")
	if code != 0 || strings.Contains(errOut, "log") || !strings.Contains(errOut, closed+": registry unreachable: ") || !strings.Contains(errOut, "connection refused") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}
