package registrytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Cloud fakes, on loopback, what wincompat's cloud credentials talk to: AWS STS and the ECR API, Entra
// ID, the GCE metadata server, and registries of ECR, ACR and Artifact Registry that demand their
// cloud's token, each issued only to the identity the fake endpoints were given. Every HTTPS name
// reaches one TLS server through an HTTPS proxy that tunnels any CONNECT to it, so that real registry
// names (123456789012.dkr.ecr.us-west-2.amazonaws.com) need no hook in the code under test: Env says
// what the process must have (HTTPS_PROXY, SSL_CERT_FILE with the fake CA, each SDK's endpoint
// overrides and identity files). The images themselves are in a Registry (Start), pushed as usual.
type Cloud struct {
	// Registry holds the images, behind the authenticating front.
	Registry *Registry
	// The names each cloud's images are read from, and the identities the fakes accept.
	ECRHost, ACRHost, GARHost   string
	RoleARN, ClientID, TenantID string
	// Counts of token requests per endpoint: STS, ECR, Entra, ACR's exchange, the metadata server's
	// token, and the registries' own token endpoints.
	STS, ECRToken, Entra, ACRExchange, Metadata, RegistryTokens atomic.Int64
	// Credentials the EKS Pod Identity agent and EC2's instance metadata service gave.
	PodIdentity, InstanceRole atomic.Int64

	dir            string
	front, proxy   *httptest.Server
	sts, ecr, meta *httptest.Server
	podID, imds    *httptest.Server

	mu     sync.Mutex
	issued map[string]string // token → what it is for
}

// StartCloud starts the fakes, with files (CA, identity tokens) in dir.
func StartCloud(dir string) (*Cloud, error) {
	c := &Cloud{Registry: Start(), dir: dir, issued: map[string]string{},
		ECRHost: "123456789012.dkr.ecr.us-west-2.amazonaws.com", ACRHost: "wincompatdemo.azurecr.io", GARHost: "us-docker.pkg.dev",
		RoleARN: "arn:aws:iam::123456789012:role/wincompat", ClientID: "6f5b3c1e-0000-4000-8000-00000000c11d", TenantID: "72f988bf-0000-4000-8000-0000000000aa"}
	cert, caPEM, err := c.certificate()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), caPEM, 0o600); err != nil {
		return nil, err
	}
	for name, content := range map[string]string{"aws-token": "eks-projected-token", "azure-token": "aks-federated-token"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	backend, _ := url.Parse("http://" + c.Registry.Host)
	images := httputil.NewSingleHostReverseProxy(backend)
	c.front = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.serveFront(w, r, images) }))
	c.front.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	c.front.StartTLS()
	c.proxy = httptest.NewServer(http.HandlerFunc(c.serveProxy))
	c.sts = httptest.NewServer(http.HandlerFunc(c.serveSTS))
	c.ecr = httptest.NewServer(http.HandlerFunc(c.serveECR))
	c.meta = httptest.NewServer(http.HandlerFunc(c.serveMetadata))
	c.podID = httptest.NewServer(http.HandlerFunc(c.servePodIdentity))
	c.imds = httptest.NewServer(http.HandlerFunc(c.serveIMDS))
	return c, nil
}

// Close stops every fake.
func (c *Cloud) Close() {
	for _, s := range []*httptest.Server{c.front, c.proxy, c.sts, c.ecr, c.meta, c.podID, c.imds} {
		s.Close()
	}
	c.Registry.Close()
}

// Env is what a process needs to find the fakes: set it before anything in the process makes an HTTPS
// request (net/http reads the proxy, crypto/x509 the roots, once).
func (c *Cloud) Env() map[string]string {
	return map[string]string{
		"HTTPS_PROXY":   c.proxy.URL,
		"NO_PROXY":      "",
		"SSL_CERT_FILE": filepath.Join(c.dir, "ca.pem"),
		"SSL_CERT_DIR":  c.dir,
		// AWS: IRSA, as the EKS Pod Identity webhook sets it (the region too: ECR credentials serve the
		// operator's regions only), with the service endpoints here.
		"AWS_REGION":                  "us-west-2",
		"AWS_ROLE_ARN":                c.RoleARN,
		"AWS_WEB_IDENTITY_TOKEN_FILE": filepath.Join(c.dir, "aws-token"),
		"AWS_ENDPOINT_URL_STS":        c.sts.URL,
		"AWS_ENDPOINT_URL_ECR":        c.ecr.URL,
		"AWS_CONFIG_FILE":             filepath.Join(c.dir, "none"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(c.dir, "none"),
		"AWS_EC2_METADATA_DISABLED":   "true",
		// Azure: workload identity, as its webhook sets it. The authority is Entra's own name, which
		// the proxy brings here.
		"AZURE_AUTHORITY_HOST":       "https://login.microsoftonline.com/",
		"AZURE_FEDERATED_TOKEN_FILE": filepath.Join(c.dir, "azure-token"),
		"AZURE_CLIENT_ID":            c.ClientID,
		"AZURE_TENANT_ID":            c.TenantID,
		// GCP: the GKE metadata server; no credentials file.
		"GCE_METADATA_HOST":              strings.TrimPrefix(c.meta.URL, "http://"),
		"GOOGLE_APPLICATION_CREDENTIALS": "",
		"CLOUDSDK_CONFIG":                filepath.Join(c.dir, "gcloud"),
	}
}

// PodIdentityEnv replaces IRSA in Env by EKS Pod Identity, as EKS sets it: the agent's URI and the
// token it wants.
func (c *Cloud) PodIdentityEnv() map[string]string {
	return map[string]string{"AWS_ROLE_ARN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI":     c.podID.URL + "/v1/credentials",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": filepath.Join(c.dir, "aws-token")}
}

// InstanceRoleEnv replaces IRSA in Env by the node's instance role, from the instance metadata
// service here.
func (c *Cloud) InstanceRoleEnv() map[string]string {
	return map[string]string{"AWS_ROLE_ARN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_EC2_METADATA_DISABLED": "false", "AWS_EC2_METADATA_SERVICE_ENDPOINT": c.imds.URL + "/"}
}

// awsCredentials is how the Pod Identity agent and IMDS hand out keys.
func (c *Cloud) awsCredentials(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": c.issue("aws-access-key"),
		"SecretAccessKey": "secret", "Token": "session", "Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"LastUpdated": time.Now().UTC().Format(time.RFC3339)})
}

// servePodIdentity is the EKS Pod Identity agent: keys for the pod's projected token.
func (c *Cloud) servePodIdentity(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "eks-projected-token" {
		http.Error(w, `{"message":"not the fake's identity"}`, http.StatusForbidden)
		return
	}
	c.PodIdentity.Add(1)
	c.awsCredentials(w)
}

// serveIMDS is EC2's instance metadata service (IMDSv2): a session token, the role's name, its keys.
func (c *Cloud) serveIMDS(w http.ResponseWriter, r *http.Request) {
	const session = "imds-session"
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
		fmt.Fprint(w, session)
	case r.Header.Get("X-Aws-Ec2-Metadata-Token") != session:
		w.WriteHeader(http.StatusUnauthorized)
	case strings.HasSuffix(r.URL.Path, "/security-credentials/") || strings.HasSuffix(r.URL.Path, "/security-credentials-extended/"):
		fmt.Fprint(w, "wincompat-node")
	case strings.HasSuffix(r.URL.Path, "/wincompat-node"):
		c.InstanceRole.Add(1)
		c.awsCredentials(w)
	default:
		http.NotFound(w, r)
	}
}

// certificate issues a CA and a serving certificate for every name the fakes answer.
func (c *Cloud) certificate() (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wincompat fake cloud CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "fake cloud"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"*.dkr.ecr.us-west-2.amazonaws.com", "*.azurecr.io", "*.pkg.dev", "gcr.io", "login.microsoftonline.com"}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// serveProxy tunnels every CONNECT to the front, whatever host it names.
func (c *Cloud) serveProxy(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	up, err := net.Dial("tcp", c.front.Listener.Addr().String())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		up.Close()
		return
	}
	fmt.Fprint(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() {
		defer up.Close()
		// What the client sent after the CONNECT may already be buffered.
		io.Copy(up, buf.Reader)
	}()
	go func() {
		defer conn.Close()
		io.Copy(conn, up)
	}()
}

// issue makes a token for what, remembered to be checked when it comes back.
func (c *Cloud) issue(what string) string {
	b := make([]byte, 12)
	rand.Read(b)
	tok := what + "-" + base64.RawURLEncoding.EncodeToString(b)
	c.mu.Lock()
	c.issued[tok] = what
	c.mu.Unlock()
	return tok
}

func (c *Cloud) was(tok, what string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return tok != "" && c.issued[tok] == what
}

// serveSTS answers AssumeRoleWithWebIdentity for the projected token of RoleARN only.
func (c *Cloud) serveSTS(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	if r.Form.Get("Action") != "AssumeRoleWithWebIdentity" || r.Form.Get("RoleArn") != c.RoleARN || r.Form.Get("WebIdentityToken") != "eks-projected-token" {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>not the fake's identity</Message></Error></ErrorResponse>`)
		return
	}
	c.STS.Add(1)
	key := c.issue("aws-access-key")
	fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>secret</SecretAccessKey><SessionToken>session</SessionToken><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>%s/wincompat</Arn><AssumedRoleId>AROA:wincompat</AssumedRoleId></AssumedRoleUser>
</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`,
		key, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), c.RoleARN)
}

// serveECR answers GetAuthorizationToken to requests signed with a key STS issued.
func (c *Cloud) serveECR(w http.ResponseWriter, r *http.Request) {
	_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	key, _, _ := strings.Cut(cred, "/")
	if r.Header.Get("X-Amz-Target") != "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken" || !c.was(key, "aws-access-key") {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"UnrecognizedClientException","message":"not signed by the fake's identity"}`)
		return
	}
	c.ECRToken.Add(1)
	pass := c.issue("ecr-password")
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	fmt.Fprintf(w, `{"authorizationData":[{"authorizationToken":%q,"expiresAt":%d,"proxyEndpoint":"https://%s"}]}`,
		base64.StdEncoding.EncodeToString([]byte("AWS:"+pass)), time.Now().Add(12*time.Hour).Unix(), c.ECRHost)
}

// serveMetadata answers the GKE metadata server's token request.
func (c *Cloud) serveMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Metadata-Flavor", "Google")
	if r.Header.Get("Metadata-Flavor") != "Google" || r.URL.Path != "/computeMetadata/v1/instance/service-accounts/default/token" {
		http.NotFound(w, r)
		return
	}
	c.Metadata.Add(1)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"expires_in":3599,"token_type":"Bearer"}`, c.issue("gcp-access-token"))
}

// serveFront is the HTTPS side: Entra ID, and the three registries, by host.
func (c *Cloud) serveFront(w http.ResponseWriter, r *http.Request, images http.Handler) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	switch {
	case host == "login.microsoftonline.com":
		c.serveEntra(w, r)
	case host == c.ECRHost:
		// ECR: Basic with the password GetAuthorizationToken gave.
		if user, pass, ok := r.BasicAuth(); !ok || user != "AWS" || !c.was(pass, "ecr-password") {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Basic realm="https://%s/",service="ecr.amazonaws.com"`, host))
			registryError(w, http.StatusUnauthorized)
			return
		}
		images.ServeHTTP(w, r)
	case host == c.ACRHost && r.URL.Path == "/oauth2/exchange":
		r.ParseForm()
		if r.Form.Get("grant_type") != "access_token" || r.Form.Get("service") != host || !c.was(r.Form.Get("access_token"), "entra-access-token") {
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
			return
		}
		c.ACRExchange.Add(1)
		claims, _ := json.Marshal(map[string]any{"exp": time.Now().Add(3 * time.Hour).Unix(), "tok": c.issue("acr-refresh-token")})
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"refresh_token": "e30." + base64.RawURLEncoding.EncodeToString(claims) + ".sig"})
	case host == c.ACRHost && r.URL.Path == "/oauth2/token":
		r.ParseForm()
		if r.Form.Get("grant_type") != "refresh_token" || !c.acrRefresh(r.Form.Get("refresh_token")) {
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
			return
		}
		c.RegistryTokens.Add(1)
		json.NewEncoder(w).Encode(map[string]string{"access_token": c.issue("acr-access-token")})
	case host == c.ACRHost:
		c.bearer(w, r, images, host, "/oauth2/token", "acr-access-token")
	case host == c.GARHost && r.URL.Path == "/v2/token":
		if user, pass, ok := r.BasicAuth(); !ok || user != "oauth2accesstoken" || !c.was(pass, "gcp-access-token") {
			registryError(w, http.StatusUnauthorized)
			return
		}
		c.RegistryTokens.Add(1)
		json.NewEncoder(w).Encode(map[string]string{"token": c.issue("gar-registry-token")})
	case host == c.GARHost:
		c.bearer(w, r, images, host, "/v2/token", "gar-registry-token")
	default:
		http.NotFound(w, r)
	}
}

func (c *Cloud) acrRefresh(tok string) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Tok string `json:"tok"`
	}
	json.Unmarshal(raw, &claims)
	return c.was(claims.Tok, "acr-refresh-token")
}

// bearer serves images to a bearer token the registry's token endpoint issued, and challenges others.
func (c *Cloud) bearer(w http.ResponseWriter, r *http.Request, images http.Handler, host, realm, what string) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || !c.was(tok, what) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="https://%s%s",service="%s"`, host, realm, host))
		registryError(w, http.StatusUnauthorized)
		return
	}
	images.ServeHTTP(w, r)
}

func registryError(w http.ResponseWriter, code int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
}

// serveEntra answers the tenant's OpenID configuration and client-credential grants whose assertion is
// the federated token of ClientID.
func (c *Cloud) serveEntra(w http.ResponseWriter, r *http.Request) {
	base := "https://login.microsoftonline.com/" + c.TenantID
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/" + c.TenantID + "/v2.0/.well-known/openid-configuration":
		json.NewEncoder(w).Encode(map[string]string{"token_endpoint": base + "/oauth2/v2.0/token",
			"authorization_endpoint": base + "/oauth2/v2.0/authorize", "issuer": base + "/v2.0"})
	case "/" + c.TenantID + "/oauth2/v2.0/token":
		r.ParseForm()
		if r.Form.Get("client_id") != c.ClientID || r.Form.Get("client_assertion") != "aks-federated-token" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"not the fake's identity"}`)
			return
		}
		c.Entra.Add(1)
		json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599,
			"access_token": c.issue("entra-access-token")})
	default:
		http.NotFound(w, r)
	}
}
