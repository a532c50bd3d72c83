package registry

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
)

// The table decides which hosts ever reach an identity endpoint: only the clouds' own registry names.
func TestCloudHosts(t *testing.T) {
	for _, tc := range []struct {
		host  string
		cloud Cloud
		key   string
	}{
		{"123456789012.dkr.ecr.us-west-2.amazonaws.com", CloudECR, "us-west-2.amazonaws.com"},
		{"210987654321.dkr.ecr.us-west-2.amazonaws.com", CloudECR, "us-west-2.amazonaws.com"},
		{"123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn", CloudECR, "cn-north-1.amazonaws.com.cn"},
		{"123456789012.dkr.ecr.us-gov-west-1.amazonaws.com", CloudECR, "us-gov-west-1.amazonaws.com"},
		{"myregistry.azurecr.io", CloudACR, "myregistry.azurecr.io"},
		{"myregistry.azurecr.cn", CloudACR, "myregistry.azurecr.cn"},
		{"myregistry.azurecr.us", CloudACR, "myregistry.azurecr.us"},
		{"us-docker.pkg.dev", CloudGAR, ""},
		{"europe-west4-docker.pkg.dev", CloudGAR, ""},
		{"gcr.io", CloudGAR, ""},
		{"eu.gcr.io", CloudGAR, ""},
		// Not the clouds' registries: anonymous, and no identity endpoint is asked.
		{"public.ecr.aws", "", ""},
		{"12345.dkr.ecr.us-west-2.amazonaws.com", "", ""},
		{"123456789012.dkr.ecr.us-west-2.amazonaws.com.example.com", "", ""},
		{"123456789012.dkr.ecr.us-west-2.amazonaws.com:443", "", ""},
		{"myregistry.azurecr.io.example.com", "", ""},
		{"my-registry.azurecr.io", "", ""},
		{"mcr.microsoft.com", "", ""},
		{"docker.pkg.dev", "", ""},
		{"us-maven.pkg.dev", "", ""},
		{"gcr.io.example.com", "", ""},
		{"index.docker.io", "", ""},
	} {
		p, key, ok := cloudOf(tc.host)
		if ok != (tc.cloud != "") || p.cloud != tc.cloud || key != tc.key {
			t.Errorf("%s: cloud %q key %q (%v), want %q %q", tc.host, p.cloud, key, ok, tc.cloud, tc.key)
		}
	}
}

func TestParseClouds(t *testing.T) {
	got, err := ParseClouds(" ecr, acr,ecr ,")
	if err != nil || len(got) != 2 || got[0] != CloudECR || got[1] != CloudACR {
		t.Errorf("got %v, %v", got, err)
	}
	if got, err := ParseClouds(""); err != nil || got != nil {
		t.Errorf("empty: got %v, %v", got, err)
	}
	if _, err := ParseClouds("ecr,gcp"); err == nil || !strings.Contains(err.Error(), `"gcp"`) {
		t.Errorf("unknown cloud: %v", err)
	}
}

// metadataServer is the GKE metadata server's token endpoint, counting requests; gate, when set,
// holds each request until it is closed.
func metadataServer(t *testing.T, status int, gate chan struct{}) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/computeMetadata/v1/instance/service-accounts/default/token" {
			http.NotFound(w, r)
			return
		}
		n.Add(1)
		if gate != nil {
			<-gate
		}
		w.Header().Set("Metadata-Flavor", "Google")
		w.WriteHeader(status)
		w.Write([]byte(`{"access_token":"ya29.token","expires_in":3599,"token_type":"Bearer"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// googleEnv leaves the metadata server at srv as the only Google credentials.
func googleEnv(t *testing.T, srv *httptest.Server) {
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	t.Setenv("HOME", t.TempDir())
}

func resolveCloud(t *testing.T, k authn.Keychain, host string) (*authn.AuthConfig, error) {
	t.Helper()
	reg, err := name.NewRegistry(host)
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.Resolve(context.Background(), k, reg)
	if err != nil {
		return nil, err
	}
	if a == authn.Anonymous {
		return nil, nil
	}
	return a.Authorization()
}

// A disabled cloud, or a host of no cloud, asks nothing: the identity endpoints are the operator's
// choice, per cloud.
func TestCloudKeychainAsksOnlyEnabledClouds(t *testing.T) {
	srv, n := metadataServer(t, http.StatusOK, nil)
	googleEnv(t, srv)
	k := newCloudKeychain([]Cloud{CloudECR}, []string{"us-west-2", "eu-west-1"}, "", http.DefaultClient, logr.Discard())
	for _, host := range []string{"us-docker.pkg.dev", "gcr.io", "myregistry.azurecr.io", "index.docker.io"} {
		if a, err := resolveCloud(t, k, host); a != nil || err != nil {
			t.Errorf("%s: got %+v, %v, want anonymous", host, a, err)
		}
	}
	if n.Load() != 0 {
		t.Errorf("metadata server asked %d times with gar disabled", n.Load())
	}
}

// Artifact Registry and GCR take one access token from the metadata server, kept for every host and
// lookup until it nears its expiry.
func TestCloudKeychainGAR(t *testing.T) {
	srv, n := metadataServer(t, http.StatusOK, nil)
	googleEnv(t, srv)
	k := newCloudKeychain([]Cloud{CloudGAR}, nil, "", http.DefaultClient, logr.Discard())
	for _, host := range []string{"us-docker.pkg.dev", "europe-docker.pkg.dev", "gcr.io", "us-docker.pkg.dev"} {
		a, err := resolveCloud(t, k, host)
		if err != nil || a == nil || a.Username != "oauth2accesstoken" || a.Password != "ya29.token" {
			t.Errorf("%s: got %+v, %v", host, a, err)
		}
	}
	if n.Load() != 1 {
		t.Errorf("metadata server asked %d times, want once", n.Load())
	}
}

// ECR: IRSA's web identity through STS, then one GetAuthorizationToken per region, whatever the
// account in the host.
func TestCloudKeychainECR(t *testing.T) {
	cloud := startAWSCloud(t)
	k := newCloudKeychain([]Cloud{CloudECR}, []string{"us-west-2", "eu-west-1"}, "", http.DefaultClient, logr.Discard())
	for _, host := range []string{"123456789012.dkr.ecr.us-west-2.amazonaws.com", "210987654321.dkr.ecr.us-west-2.amazonaws.com",
		"123456789012.dkr.ecr.us-west-2.amazonaws.com", "123456789012.dkr.ecr.eu-west-1.amazonaws.com"} {
		a, err := resolveCloud(t, k, host)
		if err != nil || a == nil || a.Username != "AWS" || !strings.HasPrefix(a.Password, "ecr-password-") {
			t.Errorf("%s: got %+v, %v", host, a, err)
		}
	}
	if sts, ecr := cloud.STS.Load(), cloud.ECRToken.Load(); sts != 2 || ecr != 2 {
		t.Errorf("STS asked %d times and ECR %d, want once per region (2)", sts, ecr)
	}
}

// ECR with EKS Pod Identity, and with the node's instance role: the AWS SDK's chain finds each where
// IRSA is not set, and the token is asked once all the same.
func TestCloudKeychainECRChain(t *testing.T) {
	cloud, err := registrytest.StartCloud(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cloud.Close()
	env := cloud.Env()
	for _, k := range []string{"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_ECR", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_EC2_METADATA_DISABLED"} {
		t.Setenv(k, env[k])
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		got  *atomic.Int64
	}{
		{"EKS Pod Identity", cloud.PodIdentityEnv(), &cloud.PodIdentity},
		{"instance role", cloud.InstanceRoleEnv(), &cloud.InstanceRole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			before := cloud.ECRToken.Load()
			k := newCloudKeychain([]Cloud{CloudECR}, []string{"us-west-2", "eu-west-1"}, "", http.DefaultClient, logr.Discard())
			for range 3 {
				a, err := resolveCloud(t, k, "123456789012.dkr.ecr.us-west-2.amazonaws.com")
				if err != nil || a == nil || a.Username != "AWS" {
					t.Fatalf("got %+v, %v", a, err)
				}
			}
			if tc.got.Load() != 1 || cloud.ECRToken.Load()-before != 1 {
				t.Errorf("%s asked %d times and ECR %d for three lookups, want once each", tc.name, tc.got.Load(), cloud.ECRToken.Load()-before)
			}
		})
	}
}

// An identity endpoint that fails ends the lookup with advice for the pod and the reason in the
// operator's log, and is not asked again by every image while the failure is remembered.
func TestCloudIdentityFailure(t *testing.T) {
	srv, n := metadataServer(t, http.StatusForbidden, nil)
	googleEnv(t, srv)
	var capture logCapture
	log := capture.logger()
	r, err := New(Config{CloudCredentials: []Cloud{CloudGAR}, Log: log, Timeout: 10 * time.Second,
		CloudHint: "set imageResolver.cloudCredentials and the ServiceAccount annotation for %s"})
	if err != nil {
		t.Fatal(err)
	}
	var first int64
	for i, image := range []string{"us-docker.pkg.dev/p/r/app:1", "us-docker.pkg.dev/p/r/app:2"} {
		if i == 1 {
			// The metadata client may retry: count what the first image cost.
			first = n.Load()
		}
		got := r.Lookup(context.Background(), policy.ImageRequest{Images: []string{image}})[image]
		want := "us-docker.pkg.dev: " + msgNotReadable + " (set imageResolver.cloudCredentials and the ServiceAccount annotation for Artifact Registry)"
		if got.Err != want {
			t.Errorf("%s: got %q, want %q", image, got.Err, want)
		}
	}
	if first == 0 || n.Load() != first {
		t.Errorf("metadata server asked %d times for the first image and %d for the second, want none", first, n.Load()-first)
	}
	logged := capture.logged()
	if len(logged) == 0 || !strings.Contains(logged[0], "Cloud registry credentials unavailable") || !strings.Contains(logged[0], `"cloud"="gar"`) {
		t.Errorf("log %q, want the failure with its cloud", logged)
	}
}

// A review waits for an identity endpoint no longer than for a registry: Timeout.
func TestCloudIdentityHangs(t *testing.T) {
	gate := make(chan struct{})
	srv, _ := metadataServer(t, http.StatusOK, gate)
	googleEnv(t, srv)
	defer close(gate)
	r, err := New(Config{CloudCredentials: []Cloud{CloudGAR}, Timeout: 20 * time.Millisecond, BackgroundTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	image := "us-docker.pkg.dev/p/r/app:1"
	// Lookup returns while the metadata server still holds the request.
	got := r.Lookup(context.Background(), policy.ImageRequest{Images: []string{image}})[image]
	if got.Err != "us-docker.pkg.dev: "+msgUnreachable {
		t.Errorf("got %q, want the answer of a registry not answering in time", got.Err)
	}
	// The keychain itself stops waiting when its lookup ends, so the lookup's slot is not held either.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reg, _ := name.NewRegistry("us-docker.pkg.dev")
	_, err = authn.Resolve(ctx, newCloudKeychain([]Cloud{CloudGAR}, nil, "", http.DefaultClient, logr.Discard()), reg)
	var ce *cloudError
	if !errors.As(err, &ce) || !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want a cloud error for the ended lookup", err)
	}
}

func TestJWTExpiry(t *testing.T) {
	claims := base64.RawURLEncoding.EncodeToString([]byte(`{"exp":1900000000}`))
	if got, ok := jwtExpiry("e30." + claims + ".sig"); !ok || got.Unix() != 1900000000 {
		t.Errorf("got %v %v", got, ok)
	}
	for _, bad := range []string{"", "opaque", "a.b.c", "e30." + base64.RawURLEncoding.EncodeToString([]byte(`{"exp":"x"}`)) + ".s", "e30." + strings.Repeat("A", 9<<10) + ".s"} {
		if _, ok := jwtExpiry(bad); ok {
			t.Errorf("%q: read an expiry", bad)
		}
	}
}

// Only the operator's regions and cloud get credentials (issue 40, finding 6): an ECR host of another
// region (a pod author can name hundreds, each a fetch and a cache entry that evicts the real tokens),
// or of a partition the region is not in, and an ACR host of another Azure cloud (a sovereign cloud
// receiving the public cloud's token) are read anonymously, and no identity endpoint is asked.
func TestCloudKeychainOnlyConfiguredRegionsAndClouds(t *testing.T) {
	cloud := startAWSCloud(t)
	k := newCloudKeychain([]Cloud{CloudECR, CloudACR}, []string{"us-west-2"}, "AzureChinaCloud", http.DefaultClient, logr.Discard())
	if a, err := resolveCloud(t, k, "123456789012.dkr.ecr.us-west-2.amazonaws.com"); err != nil || a == nil || a.Username != "AWS" {
		t.Errorf("the configured region: got %+v, %v", a, err)
	}
	for i := range 300 {
		host := fmt.Sprintf("123456789012.dkr.ecr.us-west-%d.amazonaws.com", i+3)
		if a, err := resolveCloud(t, k, host); a != nil || err != nil {
			t.Fatalf("%s: got %+v, %v, want anonymous", host, a, err)
		}
	}
	for _, host := range []string{"123456789012.dkr.ecr.us-west-2.amazonaws.com.cn", "myregistry.azurecr.io", "myregistry.azurecr.us"} {
		if a, err := resolveCloud(t, k, host); a != nil || err != nil {
			t.Errorf("%s: got %+v, %v, want anonymous", host, a, err)
		}
	}
	if sts, ecr := cloud.STS.Load(), cloud.ECRToken.Load(); sts != 1 || ecr != 1 {
		t.Errorf("STS asked %d times and ECR %d, want once, for us-west-2", sts, ecr)
	}
	if _, err := New(Config{CloudCredentials: []Cloud{CloudACR}, AzureCloud: "AzureGermanCloud"}); err == nil {
		t.Error("an unknown Azure cloud is accepted")
	}
}

// startAWSCloud starts the fake cloud and points the AWS SDK at it, for the test's duration.
func startAWSCloud(t *testing.T) *registrytest.Cloud {
	t.Helper()
	cloud, err := registrytest.StartCloud(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cloud.Close)
	env := cloud.Env()
	for _, k := range []string{"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_ECR",
		"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_EC2_METADATA_DISABLED"} {
		t.Setenv(k, env[k])
	}
	return cloud
}
