package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/server"
)

// clientCA signs the client certificate the API server presents to webhooks.
type clientCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newClientCA(t *testing.T) clientCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook-clients"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return clientCA{cert: cert, key: key}
}

// issue writes a client certificate and key for cn and returns their paths.
func (ca clientCA) issue(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return certFile, keyFile
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestWebhookAnswersOnlyTheAPIServer runs the recipe of the chart's README ("Client certificates"): the
// API server's admission configuration gives it a client certificate for webhooks, and wincompat serve
// --client-ca-file --client-names answers only a caller presenting it. Pods created through the API
// server are mutated; a direct caller without the certificate, or with another name, is refused at the
// TLS handshake.
func TestWebhookAnswersOnlyTheAPIServer(t *testing.T) {
	dir := t.TempDir()
	ca := newClientCA(t)
	caFile := filepath.Join(dir, "client-ca.crt")
	writeFile(t, caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	certFile, keyFile := ca.issue(t, dir, "kube-apiserver-webhook-client")
	otherCert, otherKey := ca.issue(t, dir, "someone-else")

	// "*" is the kubeconfig user for every webhook the API server calls (k8s.io/apiserver's
	// AuthenticationInfoResolver); a platform would name the Service, wincompat.<namespace>.svc.
	kubeconfig := filepath.Join(dir, "webhook-kubeconfig.yaml")
	writeFile(t, kubeconfig, []byte(`apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: `+certFile+`
    client-key: `+keyFile+`
`))
	admission := filepath.Join(dir, "admission.yaml")
	writeFile(t, admission, []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: `+kubeconfig+`
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: `+kubeconfig+`
`))
	// waitUntilMutating inside startClusterWith proves the API server's calls are answered.
	cl := startClusterWith(t, []controlplane.Option{controlplane.WithAPIServerFlag("admission-control-config-file", admission)},
		func(o *server.Options) {
			o.Serving = server.Serving{ClientCAFile: caFile, ClientNames: []string{"kube-apiserver-webhook-client"}}
		})

	review := reviewBody(t, "admission.k8s.io/v1", reviewRequest{
		UID: "direct", Kind: podKind, Resource: podResource, Namespace: readyNamespace, Object: podJSON(t, readyNamespace),
	})
	call := func(cert *tls.Certificate) error {
		cfg := cl.webhookTLS(t)
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Post("https://"+cl.webhookAddr()+"/mutate-pod", "application/json", strings.NewReader(string(review)))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	apiServers, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	others, err := tls.LoadX509KeyPair(otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := call(&apiServers); err != nil {
		t.Errorf("with the API server's certificate: %v", err)
	}
	if err := call(nil); err == nil {
		t.Error("a caller without a client certificate was answered")
	}
	if err := call(&others); err == nil {
		t.Error("a certificate of the same CA with a name not in --client-names was answered")
	}
}
