package operations

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestCertDirHotReload: with certificates from a Secret volume (cert-manager's path), a renewed tls.crt
// and tls.key are served without a restart, while the API server keeps calling wincompat.
func TestCertDirHotReload(t *testing.T) {
	cl := e2eutil.NewCluster(t)
	host := cl.Webhook.Host
	ca1, ca1Key, ca1PEM, _ := e2eutil.Issue(t, nil, nil, host)
	ca2, ca2Key, ca2PEM, _ := e2eutil.Issue(t, nil, nil, host)
	_, _, cert1, key1 := e2eutil.Issue(t, ca1, ca1Key, host)
	_, _, cert2, key2 := e2eutil.Issue(t, ca2, ca2Key, host)
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
	if err := cl.C.Get(context.Background(), client.ObjectKey{Name: e2eutil.WebhookConfigName}, &wc); err != nil {
		t.Fatal(err)
	}
	for i := range wc.Webhooks {
		wc.Webhooks[i].ClientConfig.CABundle = append(append([]byte{}, ca1PEM...), ca2PEM...)
	}
	if err := cl.C.Update(context.Background(), &wc); err != nil {
		t.Fatal(err)
	}
	cl.Serve(t, func(o *server.Options) { o.CertDir = dir })

	bundle := append(append([]byte{}, ca1PEM...), ca2PEM...)
	if got := e2eutil.ServedCert(t, cl, bundle); got.CheckSignatureFrom(ca1) != nil {
		t.Fatal("not serving the first certificate")
	}
	write(cert2, key2)
	deadline := time.Now().Add(20 * time.Second)
	for e2eutil.ServedCert(t, cl, bundle).CheckSignatureFrom(ca2) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate in --cert-dir was not picked up without a restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cl.WaitUntilMutating(t, e2eutil.ReadyNamespace) // the API server still reaches wincompat
}
