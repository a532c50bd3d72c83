// Package cloude2e runs the real resolver against fake cloud identity endpoints and registries that
// demand each cloud's token, all on loopback (registrytest.Cloud). It is a package of its own because
// net/http reads HTTPS_PROXY, and crypto/x509 SSL_CERT_FILE, once per process: no other test may have
// made a request before this one sets them.
package cloude2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/registry"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
)

const build = "10.0.20348.2227"

// TestCloudCredentials reads a Windows image from ECR, ACR and Artifact Registry names with
// wincompat's workload identity on each cloud (IRSA, Azure workload identity, the GKE metadata
// server), through the resolver as the server builds it: the registry refuses anything but the token
// its cloud issued to that identity. Identity endpoints are asked once, however many images are read;
// namespaces the operator left out never use the identity; and without --image-cloud-credentials every
// image is unreadable, with advice.
func TestCloudCredentials(t *testing.T) {
	cloud, err := registrytest.StartCloud(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cloud.Close()
	for k, v := range cloud.Env() {
		t.Setenv(k, v)
	}
	t.Setenv("HOME", t.TempDir())
	const tags = 4
	for i := range tags {
		if _, err := cloud.Registry.PushIndex("team/app", tag(i), types.OCIImageIndex, registrytest.Windows(build), registrytest.Linux("amd64")); err != nil {
			t.Fatal(err)
		}
	}
	hosts := map[registry.Cloud]string{registry.CloudECR: cloud.ECRHost, registry.CloudACR: cloud.ACRHost, registry.CloudGAR: cloud.GARHost}
	newResolver := func(clouds []registry.Cloud, allowed func(string) bool) *registry.Resolver {
		r, err := registry.New(registry.Config{
			CloudCredentials: clouds, KeychainNamespaces: allowed, ECRRegions: []string{"us-west-2"},
			CloudHint:        "set imageResolver.cloudCredentials and the ServiceAccount annotation for %s",
			UnauthorizedHint: "set imageResolver.pullSecret",
			// The proxy is on loopback: it is what the resolver dials.
			AllowPrivateNetworks: true,
			// Generous: the first lookup of each cloud includes its SDK's start.
			Timeout: 20 * time.Second, BackgroundTimeout: 20 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	inScope := func(ns string) bool { return ns == "shop" }
	lookup := func(r *registry.Resolver, ns, image string) policy.Image {
		return r.Lookup(context.Background(), policy.ImageRequest{Namespace: ns, Images: []string{image}})[image]
	}

	t.Run("read with each cloud's identity", func(t *testing.T) {
		r := newResolver(registry.Clouds(), inScope)
		for c, host := range hosts {
			for i := range tags {
				image := host + "/team/app:" + tag(i)
				got := lookup(r, "shop", image)
				if got.Err != "" || !hasBuild(got, build) {
					t.Errorf("%s: %s: got %+v, want the Windows build %s", c, image, got, build)
				}
			}
		}
		// Each identity was asked once for all those lookups: tokens are kept, not fetched per lookup.
		for name, n := range map[string]int64{"STS": cloud.STS.Load(), "ECR GetAuthorizationToken": cloud.ECRToken.Load(),
			"Entra token": cloud.Entra.Load(), "ACR exchange": cloud.ACRExchange.Load(), "metadata token": cloud.Metadata.Load()} {
			if n != 1 {
				t.Errorf("%s asked %d times for %d lookups, want once", name, n, tags)
			}
		}
	})

	t.Run("namespaces out of scope never use the identity", func(t *testing.T) {
		before := cloud.STS.Load() + cloud.Entra.Load() + cloud.Metadata.Load()
		r := newResolver(registry.Clouds(), inScope)
		for c, host := range hosts {
			got := lookup(r, "tenant", host+"/team/app:"+tag(0))
			if !strings.Contains(got.Err, "no such image, or not readable") || strings.Contains(got.Err, "imageResolver") {
				t.Errorf("%s from another namespace: got %+v, want unreadable without advice", c, got)
			}
		}
		if after := cloud.STS.Load() + cloud.Entra.Load() + cloud.Metadata.Load(); after != before {
			t.Errorf("identity endpoints asked %d times for namespaces out of scope", after-before)
		}
	})

	t.Run("not enabled: unreadable, with advice", func(t *testing.T) {
		r := newResolver(nil, inScope)
		names := map[registry.Cloud]string{registry.CloudECR: "ECR", registry.CloudACR: "ACR", registry.CloudGAR: "Artifact Registry"}
		for c, host := range hosts {
			got := lookup(r, "shop", host+"/team/app:"+tag(0))
			want := host + ": no such image, or not readable with the credentials wincompat may use for this pod (set imageResolver.pullSecret, or set imageResolver.cloudCredentials and the ServiceAccount annotation for " + names[c] + ")"
			if got.Err != want {
				t.Errorf("%s without cloud credentials:\n got %q\nwant %q", c, got.Err, want)
			}
		}
	})

	t.Run("identity refused: unreadable, with advice", func(t *testing.T) {
		t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/someone-else")
		r := newResolver([]registry.Cloud{registry.CloudECR}, inScope)
		got := lookup(r, "shop", cloud.ECRHost+"/team/app:"+tag(0))
		want := cloud.ECRHost + ": no such image, or not readable with the credentials wincompat may use for this pod (set imageResolver.cloudCredentials and the ServiceAccount annotation for ECR)"
		if got.Err != want {
			t.Errorf("got %q, want %q", got.Err, want)
		}
	})
}

func tag(i int) string { return "1." + string(rune('0'+i)) }

func hasBuild(img policy.Image, version string) bool {
	for _, p := range img.Platforms {
		if p.OS == "windows" && p.OSVersion == version {
			return true
		}
	}
	return false
}
