package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/webhook/server"
)

// issue signs a certificate for the webhook's address (or a CA when parent is nil) and returns it with
// its key, PEM encoded.
func issue(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, host string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte) {
	t.Helper()
	return issueFor(t, parent, parentKey, host, x509.ExtKeyUsageServerAuth)
}

// issueFor is issue for a name (an IP address is also a SAN) and a use: a server's or a client's.
func issueFor(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if parent == nil {
		tmpl.Subject, tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = pkix.Name{CommonName: "test-ca"}, true, true, x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	} else {
		tmpl.Subject, tmpl.ExtKeyUsage = pkix.Name{CommonName: name}, []x509.ExtKeyUsage{usage}
		if ip := net.ParseIP(name); ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// TestCertDirHotReload: with certificates from a Secret volume (cert-manager's path), a renewed tls.crt
// and tls.key are served without a restart, while the API server keeps calling wincompat.
func TestCertDirHotReload(t *testing.T) {
	cl := newCluster(t)
	host := cl.webhook.Host
	ca1, ca1Key, ca1PEM, _ := issue(t, nil, nil, host)
	ca2, ca2Key, ca2PEM, _ := issue(t, nil, nil, host)
	_, _, cert1, key1 := issue(t, ca1, ca1Key, host)
	_, _, cert2, key2 := issue(t, ca2, ca2Key, host)
	dir := t.TempDir()
	write := func(cert, key []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(cert1, key1)
	// The API server trusts both CAs, as during a cert-manager CA renewal.
	var wc admissionregistrationv1.MutatingWebhookConfiguration
	if err := cl.c.Get(context.Background(), client.ObjectKey{Name: webhookConfigName}, &wc); err != nil {
		t.Fatal(err)
	}
	for i := range wc.Webhooks {
		wc.Webhooks[i].ClientConfig.CABundle = append(append([]byte{}, ca1PEM...), ca2PEM...)
	}
	if err := cl.c.Update(context.Background(), &wc); err != nil {
		t.Fatal(err)
	}
	cl.serve(t, func(o *server.Options) { o.CertDir = dir })

	bundle := append(append([]byte{}, ca1PEM...), ca2PEM...)
	if got := servedCert(t, cl, bundle); got.CheckSignatureFrom(ca1) != nil {
		t.Fatal("not serving the first certificate")
	}
	write(cert2, key2)
	deadline := time.Now().Add(20 * time.Second)
	for servedCert(t, cl, bundle).CheckSignatureFrom(ca2) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate in --cert-dir was not picked up without a restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cl.waitUntilMutating(t, readyNamespace) // the API server still reaches wincompat
}
