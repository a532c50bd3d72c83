package e2eutil

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

const OwnNamespace = "wincompat-system"

// ServedCert dials the webhook as the API server would, trusting only bundle.
func ServedCert(t *testing.T, cl *Cluster, bundle []byte) *x509.Certificate {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	conn, err := tls.Dial("tcp", cl.WebhookAddr(), &tls.Config{RootCAs: pool, ServerName: cl.Webhook.Host})
	if err != nil {
		t.Fatalf("the webhook's certificate is not trusted by the bundle: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func ServedSerial(t *testing.T, cl *Cluster, bundle []byte) string {
	return ServedCert(t, cl, bundle).SerialNumber.String()
}
