package registry

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azpolicy "github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/containers/azcontainerregistry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/util/cache"
)

// Cloud names a cloud whose registries lookups may read with wincompat's own identity there: no pull
// secret, as the cloud's kubelets read them with the node's identity.
type Cloud string

const (
	CloudACR Cloud = "acr" // Azure Container Registry: workload identity, else managed identity
	CloudECR Cloud = "ecr" // Amazon ECR: the AWS SDK's chain (IRSA, EKS Pod Identity, instance role)
	CloudGAR Cloud = "gar" // Artifact Registry and GCR: application default credentials (GKE metadata server)
)

// cloudProvider is one row of the table: which registry hosts are the cloud's, how its credentials are
// got, and how messages name it.
type cloudProvider struct {
	cloud Cloud
	// name is how messages name the cloud's registries.
	name string
	// host matches the registry hosts of the cloud; key names what one fetch serves (ECR: a region,
	// ACR: a registry, Artifact Registry: every host).
	host func(host string) (key string, ok bool)
	// fetch gets registry credentials for host, how long they hold and which identity gave them.
	fetch func(k *cloudKeychain, ctx context.Context, host string) (authn.AuthConfig, time.Time, string, error)
}

var (
	// The login servers of ECR in the commercial and China partitions: <account>.dkr.ecr.<region>.
	ecrHost = regexp.MustCompile(`^[0-9]{12}\.dkr\.ecr\.([a-z]{2,4}(?:-[a-z]+)+-[0-9]{1,2})\.(amazonaws\.com(?:\.cn)?)$`)
	// Registry names are 5 to 50 letters and digits; azurecr.cn is Azure China, azurecr.us US Government.
	acrHost = regexp.MustCompile(`^[a-z0-9]{5,50}\.azurecr\.(?:io|cn|us)$`)
	// Artifact Registry's Docker hosts (<location>-docker.pkg.dev) and Container Registry's.
	garHost = regexp.MustCompile(`^(?:[a-z0-9-]+-docker\.pkg\.dev|gcr\.io|[a-z]+\.gcr\.io)$`)
)

// cloudProviders is the table: Clouds and the hosts matched come from it; --help, the chart's values and
// the README describe it.
var cloudProviders = []cloudProvider{
	{cloud: CloudACR, name: "ACR", host: func(h string) (string, bool) { return h, acrHost.MatchString(h) }, fetch: (*cloudKeychain).acr},
	{cloud: CloudECR, name: "ECR", host: func(h string) (string, bool) {
		m := ecrHost.FindStringSubmatch(h)
		if m == nil {
			return "", false
		}
		// An ECR token serves every registry of its region that the identity may read.
		return m[1] + "." + m[2], true
	}, fetch: (*cloudKeychain).ecr},
	{cloud: CloudGAR, name: "Artifact Registry", host: func(h string) (string, bool) { return "", garHost.MatchString(h) }, fetch: (*cloudKeychain).gar},
}

// Clouds lists every Cloud, in the order flags and docs name them.
func Clouds() []Cloud {
	out := make([]Cloud, len(cloudProviders))
	for i, p := range cloudProviders {
		out[i] = p.cloud
	}
	return out
}

// ParseClouds reads a comma-separated list of clouds; empty is none.
func ParseClouds(s string) ([]Cloud, error) {
	var out []Cloud
	for c := range strings.SplitSeq(s, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if !slices.Contains(Clouds(), Cloud(c)) {
			return nil, fmt.Errorf("unknown cloud %q: use %v", c, Clouds())
		}
		if !slices.Contains(out, Cloud(c)) {
			out = append(out, Cloud(c))
		}
	}
	return out, nil
}

// cloudOf says which cloud's registry host is, enabled or not.
func cloudOf(host string) (cloudProvider, string, bool) {
	for _, p := range cloudProviders {
		if key, ok := p.host(host); ok {
			return p, key, true
		}
	}
	return cloudProvider{}, "", false
}

// cloudError is a lookup that found no credentials for its cloud registry: the identity is missing or
// its endpoint failed. The pod's author is told that wincompat could not read the image, and what the
// operator sets; the log has why.
type cloudError struct {
	name string
	err  error
}

func (e *cloudError) Error() string { return e.name + " credentials: " + e.err.Error() }
func (e *cloudError) Unwrap() error { return e.err }

const (
	// cloudFetchTimeout bounds one fetch of credentials, which runs apart from the lookups that wait
	// for it: a lookup stops waiting at its own deadline, and the fetch may still serve the next.
	cloudFetchTimeout = 30 * time.Second
	// cloudFailureTTL is how long a failed fetch is remembered, so that a cloud's identity endpoint is
	// asked once per period, not once per image.
	cloudFailureTTL = 30 * time.Second
	// cloudDefaultTTL is how long credentials of unknown lifetime are kept.
	cloudDefaultTTL = 10 * time.Minute
	// cloudEntries bounds the credentials kept: pod authors choose the registry hosts.
	cloudEntries = 256
	// acrScope is the audience ACR accepts in every Azure cloud (azcontainerregistry uses the same).
	acrScope = "https://containerregistry.azure.net/.default"
	// gcpScope is what Artifact Registry's token exchange needs.
	gcpScope = "https://www.googleapis.com/auth/cloud-platform"
)

// azureRegistrySuffixes are the ACR login server suffixes of each Azure cloud, by the names `az cloud
// list` gives them. An identity's tokens go only to its own cloud's registries.
var azureRegistrySuffixes = map[string]string{
	"AzureCloud":        ".azurecr.io",
	"AzureChinaCloud":   ".azurecr.cn",
	"AzureUSGovernment": ".azurecr.us",
}

// AzureClouds are the Azure clouds Config.AzureCloud may name.
func AzureClouds() []string {
	return slices.Sorted(maps.Keys(azureRegistrySuffixes))
}

// ecrPartitionSuffix is the DNS suffix of region's ECR registries: the China regions are their own
// partition, amazonaws.com.cn.
func ecrPartitionSuffix(region string) string {
	if strings.HasPrefix(region, "cn-") {
		return "amazonaws.com.cn"
	}
	return "amazonaws.com"
}

// cloudKeychain gives the registries of the enabled clouds credentials from wincompat's own identity,
// and every other host nothing (authn.Anonymous), so that it composes with the pull-secret keychain in a
// MultiKeychain and the resolver's KeychainNamespaces scope it alike. Credentials are kept for half their
// lifetime, as ecr-login does, so a token is fetched once per period and registry (ECR: region), never
// per lookup; concurrent lookups share one fetch.
type cloudKeychain struct {
	enabled []Cloud
	// ecrKeys are the ECR keys (region.partition suffix) of the operator's regions, and acrSuffix the
	// registries of the operator's Azure cloud: a pod author names any host, and every other region
	// would be a fetch and a cache entry, every other cloud a receiver of this one's token.
	ecrKeys   []string
	acrSuffix string
	// client carries the ACR token exchange, which goes to the registry itself: the resolver's
	// transport, egress policy and all.
	client *http.Client
	log    logr.Logger
	got    *cache.LRUExpireCache
	flight singleflight.Group

	// The identities, made once: each SDK caches its own tokens inside them.
	azure  *lazy[azcore.TokenCredential]
	google *lazy[oauth2.TokenSource]
}

type cloudAnswer struct {
	auth authn.AuthConfig
	err  error
}

// newCloudKeychain serves enabled, ECR in ecrRegions only and ACR in azureCloud only ("" for AzureCloud).
func newCloudKeychain(enabled []Cloud, ecrRegions []string, azureCloud string, client *http.Client, log logr.Logger) *cloudKeychain {
	k := &cloudKeychain{enabled: enabled, client: client, log: log, got: cache.NewLRUExpireCache(cloudEntries),
		acrSuffix: azureRegistrySuffixes[cmp.Or(azureCloud, "AzureCloud")]}
	for _, r := range ecrRegions {
		k.ecrKeys = append(k.ecrKeys, r+"."+ecrPartitionSuffix(r))
	}
	k.azure = &lazy[azcore.TokenCredential]{make: azureCredential}
	k.google = &lazy[oauth2.TokenSource]{make: googleTokenSource}
	return k
}

func (k *cloudKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), r)
}

// ResolveContext waits for the credentials as long as ctx lets it: the lookup's deadline, not the
// identity endpoint's, bounds a review.
func (k *cloudKeychain) ResolveContext(ctx context.Context, r authn.Resource) (authn.Authenticator, error) {
	host := r.RegistryStr()
	p, key, ok := cloudOf(host)
	if !ok || !slices.Contains(k.enabled, p.cloud) || !k.configured(p.cloud, host, key) {
		return authn.Anonymous, nil
	}
	key = string(p.cloud) + "/" + key
	if v, ok := k.got.Get(key); ok {
		return answerAuth(v.(cloudAnswer))
	}
	ch := k.flight.DoChan(key, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.Background(), cloudFetchTimeout)
		defer cancel()
		auth, until, identity, err := p.fetch(k, fctx, host)
		if err != nil {
			err = &cloudError{name: p.name, err: err}
			// Once per failure period: the operator's reason, whatever the pods' answers say.
			k.log.Error(err, "Cloud registry credentials unavailable; its images are answered unauthorized until this is fixed",
				"cloud", p.cloud, "registry", host, "fix", "set imageResolver.cloudCredentials and the ServiceAccount annotation for "+p.name+" (deploy/helm/wincompat/cloud-registries.md)")
			k.got.Add(key, cloudAnswer{err: err}, cloudFailureTTL)
			return cloudAnswer{err: err}, nil
		}
		ttl := cloudDefaultTTL
		if !until.IsZero() {
			// Never below the failure period: a token that claims to be expired already (a skewed
			// clock) must not make every lookup fetch another.
			ttl = max(time.Until(until)/2, cloudFailureTTL)
		}
		k.log.Info("Cloud registry credentials obtained", "cloud", p.cloud, "registry", host, "identity", identity, "kept", ttl.Round(time.Second).String())
		a := cloudAnswer{auth: auth}
		k.got.Add(key, a, ttl)
		return a, nil
	})
	select {
	case res := <-ch:
		return answerAuth(res.Val.(cloudAnswer))
	case <-ctx.Done():
		return nil, &cloudError{name: p.name, err: fmt.Errorf("no answer from the identity endpoint in time: %w", ctx.Err())}
	}
}

// configured says whether host is of the operator's regions (ECR) or cloud (ACR).
func (k *cloudKeychain) configured(c Cloud, host, key string) bool {
	switch c {
	case CloudECR:
		return slices.Contains(k.ecrKeys, key)
	case CloudACR:
		return strings.HasSuffix(host, k.acrSuffix)
	}
	return true
}

func answerAuth(a cloudAnswer) (authn.Authenticator, error) {
	if a.err != nil {
		return nil, a.err
	}
	return authn.FromConfig(a.auth), nil
}

// ecr asks ECR for a registry token with the AWS SDK's default chain, which finds IRSA
// (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE), EKS Pod Identity (AWS_CONTAINER_CREDENTIALS_FULL_URI)
// and, last, the node's instance role (IMDS). One fetch serves a region for half the token's 12 hours.
func (k *cloudKeychain) ecr(ctx context.Context, host string) (authn.AuthConfig, time.Time, string, error) {
	region := ecrHost.FindStringSubmatch(host)[1]
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region))
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, "", err
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, "", err
	}
	out, err := ecr.NewFromConfig(cfg).GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, "", err
	}
	if len(out.AuthorizationData) == 0 || out.AuthorizationData[0].AuthorizationToken == nil {
		return authn.AuthConfig{}, time.Time{}, "", errors.New("ECR returned no authorization token")
	}
	d := out.AuthorizationData[0]
	raw, err := base64.StdEncoding.DecodeString(*d.AuthorizationToken)
	user, pass, ok := strings.Cut(string(raw), ":")
	if err != nil || !ok {
		return authn.AuthConfig{}, time.Time{}, "", errors.New("ECR returned a malformed authorization token")
	}
	var until time.Time
	if d.ExpiresAt != nil {
		until = *d.ExpiresAt
	}
	return authn.AuthConfig{Username: user, Password: pass}, until, "AWS " + creds.Source, nil
}

// azureCredential is the pod's workload identity where the Azure workload identity webhook gave it
// one (AZURE_FEDERATED_TOKEN_FILE), else a managed identity: the node's (AZURE_CLIENT_ID names one of
// several) or, on App Service and Arc, the platform's.
func azureCredential() (azcore.TokenCredential, string, error) {
	id := os.Getenv("AZURE_CLIENT_ID")
	if os.Getenv("AZURE_FEDERATED_TOKEN_FILE") != "" {
		c, err := azidentity.NewWorkloadIdentityCredential(nil)
		return c, "Azure workload identity " + id, err
	}
	var o azidentity.ManagedIdentityCredentialOptions
	if id != "" {
		o.ID = azidentity.ClientID(id)
	}
	c, err := azidentity.NewManagedIdentityCredential(&o)
	return c, strings.TrimSpace("Azure managed identity " + id), err
}

// acr exchanges an Entra ID token for the registry's refresh token (ACR's /oauth2/exchange), which the
// registry's token endpoint then turns into access tokens, as `az acr login` does.
func (k *cloudKeychain) acr(ctx context.Context, host string) (authn.AuthConfig, time.Time, string, error) {
	cred, identity, err := k.azure.get()
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, "", err
	}
	tok, err := cred.GetToken(ctx, azpolicy.TokenRequestOptions{Scopes: []string{acrScope}})
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, "", err
	}
	client, err := azcontainerregistry.NewAuthenticationClient("https://"+host, &azcontainerregistry.AuthenticationClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: k.client}})
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, "", err
	}
	o := &azcontainerregistry.AuthenticationClientExchangeAADAccessTokenForACRRefreshTokenOptions{AccessToken: &tok.Token}
	if t := os.Getenv("AZURE_TENANT_ID"); t != "" {
		o.Tenant = &t
	}
	resp, err := client.ExchangeAADAccessTokenForACRRefreshToken(ctx, azcontainerregistry.PostContentSchemaGrantTypeAccessToken, host, o)
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, "", fmt.Errorf("token exchange with %s: %w", host, err)
	}
	if resp.RefreshToken == nil || *resp.RefreshToken == "" {
		return authn.AuthConfig{}, time.Time{}, "", fmt.Errorf("token exchange with %s returned no refresh token", host)
	}
	until := tok.ExpiresOn
	if exp, ok := jwtExpiry(*resp.RefreshToken); ok && exp.Before(until) {
		until = exp
	}
	// The username ACR documents for tokens; the refresh token goes to the registry's OAuth2 endpoint.
	return authn.AuthConfig{Username: "00000000-0000-0000-0000-000000000000", IdentityToken: *resp.RefreshToken}, until, identity, nil
}

// jwtExpiry reads a JWT's exp claim, unverified: only to know when to fetch another.
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) > 8<<10 {
		return time.Time{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var c struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(c.Exp, 0), true
}

// googleTokenSource is application default credentials: on GKE with workload identity, the GKE
// metadata server answers as the Google service account the Kubernetes one is bound to; on a node
// without it, as the node's service account. GOOGLE_APPLICATION_CREDENTIALS or gcloud's ADC file are
// used where set (the CLI on a workstation). gcloud itself is never run.
func googleTokenSource() (oauth2.TokenSource, string, error) {
	creds, err := google.FindDefaultCredentials(context.Background(), gcpScope)
	if err != nil {
		return nil, "", err
	}
	identity := "GCP metadata server"
	if len(creds.JSON) > 0 {
		identity = "GCP credentials file"
	}
	return oauth2.ReuseTokenSource(nil, creds.TokenSource), identity, nil
}

// gar reads an access token: Artifact Registry and GCR take it as a password, for every host.
func (k *cloudKeychain) gar(ctx context.Context, _ string) (authn.AuthConfig, time.Time, string, error) {
	ts, identity, err := k.google.get()
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, "", err
	}
	type result struct {
		tok *oauth2.Token
		err error
	}
	// oauth2's Token takes no context: the fetch's own deadline bounds the wait.
	ch := make(chan result, 1)
	go func() {
		tok, err := ts.Token()
		ch <- result{tok, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return authn.AuthConfig{}, time.Time{}, "", r.err
		}
		return authn.AuthConfig{Username: "oauth2accesstoken", Password: r.tok.AccessToken}, r.tok.Expiry, identity, nil
	case <-ctx.Done():
		return authn.AuthConfig{}, time.Time{}, "", ctx.Err()
	}
}

// lazy makes an identity on first use and keeps it once made; a failure is tried again later, so an
// identity that was not there at start (a webhook not yet injected, a metadata server starting) is
// found when it comes.
type lazy[T any] struct {
	make     func() (T, string, error)
	mu       sync.Mutex
	made     bool
	v        T
	identity string
}

func (l *lazy[T]) get() (T, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.made {
		v, id, err := l.make()
		if err != nil {
			return v, "", err
		}
		l.v, l.identity, l.made = v, id, true
	}
	return l.v, l.identity, nil
}
