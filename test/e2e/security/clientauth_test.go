package security

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// issueClient writes a client certificate for cn, signed by ca, and its key, and returns their paths.
func issueClient(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	_, _, certPEM, keyPEM := e2eutil.IssueFor(t, ca, caKey, cn, x509.ExtKeyUsageClientAuth)
	certFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
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
	ca, caKey, caPEM, _ := e2eutil.Issue(t, nil, nil, "")
	caFile := filepath.Join(dir, "client-ca.crt")
	writeFile(t, caFile, caPEM)
	certFile, keyFile := issueClient(t, ca, caKey, dir, "kube-apiserver-webhook-client")
	otherCert, otherKey := issueClient(t, ca, caKey, dir, "someone-else")

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
	cl := e2eutil.StartClusterWith(t, []controlplane.Option{controlplane.WithAPIServerFlag("admission-control-config-file", admission)},
		func(o *server.Options) {
			o.Serving = server.Serving{ClientCAFile: caFile, ClientNames: []string{"kube-apiserver-webhook-client"}}
		})

	review := e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{
		UID: "direct", Kind: e2eutil.PodKind, Resource: e2eutil.PodResource, Namespace: e2eutil.ReadyNamespace, Object: e2eutil.PodJSON(t, e2eutil.ReadyNamespace),
	})
	call := func(cert *tls.Certificate) error {
		cfg := cl.WebhookTLS(t)
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Post("https://"+cl.WebhookAddr()+"/mutate-pod", "application/json", strings.NewReader(string(review)))
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
