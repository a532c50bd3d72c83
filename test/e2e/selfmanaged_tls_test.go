package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/certs"
	"github.com/wincompat/wincompat/webhook/server"
)

const ownNamespace = "wincompat-system"

// TestSelfManagedTLS: issue 5. Without cert-manager, wincompat issues its own CA and serving certificate,
// puts the CA into the webhook configuration, and the real API server calls it over TLS with that CA.
// Then a forced rotation of the serving certificate, and of the CA, under a steady stream of pod
// creations: no creation may fail.
func TestSelfManagedTLS(t *testing.T) {
	cl := newCluster(t)
	// wincompat's own namespace holds the Secret; it exists before the server starts.
	setUpNamespace(context.Background(), t, cl.c, ownNamespace, nil, nil)
	cl.serve(t, func(o *server.Options) {
		o.Namespace = ownNamespace
		o.SelfManagedTLS = &certs.Config{
			SecretName: "wincompat-tls", ServiceName: "wincompat", WebhookConfigName: "wincompat",
			ExtraNames:    []string{o.Host},
			CheckInterval: 500 * time.Millisecond, ReloadInterval: 500 * time.Millisecond, PromoteAfter: 3 * time.Second,
		}
	})
	ctx := context.Background()

	// The API server trusts wincompat's CA now, not envtest's: the caBundle was replaced.
	bundle := webhookBundles(t, cl)
	if bytes.Contains(bundle, cl.webhook.CAData) {
		t.Fatal("the webhook configuration still trusts envtest's CA: wincompat did not inject its own")
	}
	firstSerial := servedSerial(t, cl, bundle)

	// A stream of pod creations through the API server for the whole test.
	var created, failed atomic.Int64
	var failures sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pod := windowsPod(readyNamespace, fmt.Sprintf("stream-%d-%d", w, i))
				if err := cl.c.Create(ctx, pod, client.DryRunAll); err != nil {
					failed.Add(1)
					failures.Store(err.Error(), true)
					continue
				}
				if pod.Annotations[policy.AnnotationVersion] == "" {
					failed.Add(1)
					failures.Store("created without wincompat's mutation", true)
					continue
				}
				created.Add(1)
			}
		}()
	}

	force := func(annotation string) {
		t.Helper()
		var s corev1.Secret
		if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ownNamespace, Name: "wincompat-tls"}, &s); err != nil {
			t.Fatal(err)
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[annotation] = "now"
		if err := cl.c.Update(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	time.Sleep(2 * time.Second) // some traffic before the rotation
	force(certs.AnnotationRotateServing)
	waitFor("a new serving certificate to be served", func() bool { return servedSerial(t, cl, bundle) != firstSerial })
	if !bytes.Equal(webhookBundles(t, cl), bundle) {
		t.Error("a serving-certificate rotation changed the CA bundle; it must not")
	}
	time.Sleep(2 * time.Second)

	caBefore := secretData(t, cl, "ca.crt")
	force(certs.AnnotationRotateCA)
	waitFor("the new CA to sign the served certificate", func() bool {
		ca := secretData(t, cl, "ca.crt")
		if bytes.Equal(ca, caBefore) {
			return false
		}
		return chainsTo(t, servedCert(t, cl, webhookBundles(t, cl)), ca)
	})
	if !bytes.Contains(webhookBundles(t, cl), caBefore) {
		t.Error("the old CA left the bundle while certificates it signed may still be served")
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()

	t.Logf("pod creations through the API server during two rotations: %d admitted and mutated, %d failed", created.Load(), failed.Load())
	if failed.Load() > 0 {
		failures.Range(func(k, _ any) bool { t.Errorf("creation failed: %v", k); return true })
	}
	if created.Load() < 20 {
		t.Errorf("only %d creations: the stream did not cover the rotations", created.Load())
	}
}

// webhookBundles returns the caBundle of wincompat's webhooks, failing if they differ.
func webhookBundles(t *testing.T, cl *cluster) []byte {
	t.Helper()
	var wc admissionregistrationv1.MutatingWebhookConfiguration
	if err := cl.c.Get(context.Background(), client.ObjectKey{Name: "wincompat"}, &wc); err != nil {
		t.Fatal(err)
	}
	for _, w := range wc.Webhooks[1:] {
		if !bytes.Equal(w.ClientConfig.CABundle, wc.Webhooks[0].ClientConfig.CABundle) {
			t.Fatalf("webhook %s has another caBundle than %s", w.Name, wc.Webhooks[0].Name)
		}
	}
	return wc.Webhooks[0].ClientConfig.CABundle
}

func secretData(t *testing.T, cl *cluster, key string) []byte {
	t.Helper()
	var s corev1.Secret
	if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: ownNamespace, Name: "wincompat-tls"}, &s); err != nil {
		t.Fatal(err)
	}
	return s.Data[key]
}

// servedCert dials the webhook as the API server would, trusting only bundle.
func servedCert(t *testing.T, cl *cluster, bundle []byte) *x509.Certificate {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	conn, err := tls.Dial("tcp", cl.webhookAddr(), &tls.Config{RootCAs: pool, ServerName: cl.webhook.Host})
	if err != nil {
		t.Fatalf("the webhook's certificate is not trusted by the bundle: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func servedSerial(t *testing.T, cl *cluster, bundle []byte) string {
	return servedCert(t, cl, bundle).SerialNumber.String()
}

func chainsTo(t *testing.T, cert *x509.Certificate, caPEM []byte) bool {
	t.Helper()
	b, _ := pem.Decode(caPEM)
	if b == nil {
		return false
	}
	ca, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.CheckSignatureFrom(ca) == nil
}
