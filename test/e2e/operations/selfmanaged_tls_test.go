package operations

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/certs"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestSelfManagedTLS: issue 5. Without cert-manager, wincompat issues its own CA and serving certificate,
// puts the CA into the webhook configurations, and the real API server calls it over TLS with that CA.
// Then a forced rotation of the serving certificate, and of the CA, under a steady stream of pod
// creations (the mutating configuration) and policy checks (the validating one): no call may fail.
// Issue 24: the CA rotation revokes, the old CA leaves both configurations' caBundle and the Secret's
// bundle once the overlap (RetireAfter, here seconds) has passed, and the API server keeps calling.
func TestSelfManagedTLS(t *testing.T) {
	cl := e2eutil.NewCluster(t)
	// wincompat's own namespace holds the Secret; it exists before the server starts.
	e2eutil.SetUpNamespace(context.Background(), t, cl.C, e2eutil.OwnNamespace, nil, nil)
	const retireAfter = 3 * time.Second
	cl.Serve(t, func(o *server.Options) {
		o.Namespace = e2eutil.OwnNamespace
		o.SelfManagedTLS = &certs.Config{
			SecretName: "wincompat-tls", ServiceName: "wincompat", WebhookConfigName: e2eutil.WebhookConfigName,
			ExtraNames:    []string{o.Host},
			CheckInterval: 500 * time.Millisecond, ReloadInterval: 500 * time.Millisecond, PromoteAfter: 3 * time.Second,
			RetireAfter: retireAfter,
		}
	})
	ctx := context.Background()

	// The API server trusts wincompat's CA now, not envtest's: the caBundle was replaced.
	bundle := webhookBundles(t, cl)
	if bytes.Contains(bundle, cl.Webhook.CAData) {
		t.Fatal("the webhook configuration still trusts envtest's CA: wincompat did not inject its own")
	}
	firstSerial := e2eutil.ServedSerial(t, cl, bundle)

	// A stream of pod creations, and of policy checks, through the API server for the whole test.
	var created, checked, failed atomic.Int64
	var failures sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if err := cl.C.Create(ctx, newPolicyConfigMap(validPolicy), client.DryRunAll); err != nil {
				failed.Add(1)
				failures.Store(err.Error(), true)
				continue
			}
			checked.Add(1)
		}
	}()
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
				pod := e2eutil.WindowsPod(e2eutil.ReadyNamespace, fmt.Sprintf("stream-%d-%d", w, i))
				if err := cl.C.Create(ctx, pod, client.DryRunAll); err != nil {
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
		if err := cl.C.Get(ctx, client.ObjectKey{Namespace: e2eutil.OwnNamespace, Name: "wincompat-tls"}, &s); err != nil {
			t.Fatal(err)
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[annotation] = "now"
		if err := cl.C.Update(ctx, &s); err != nil {
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
	waitFor("a new serving certificate to be served", func() bool { return e2eutil.ServedSerial(t, cl, bundle) != firstSerial })
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
		return chainsTo(t, e2eutil.ServedCert(t, cl, webhookBundles(t, cl)), ca)
	})
	// The old CA stays trusted for the overlap: a replica may still serve its certificate. Read the
	// bundle first, the time second: a bundle without the old CA read before the overlap ended is a bug,
	// however slowly this test runs.
	stillTrusted := bytes.Contains(webhookBundles(t, cl), caBefore)
	if since := caSince(t, cl); !stillTrusted && time.Since(since) < retireAfter {
		t.Errorf("the old CA left the bundles %s after the new CA began signing, before the overlap of %s: replicas may still serve its certificate", time.Since(since), retireAfter)
	}

	// Then it leaves every bundle, and the API server calls both configurations' webhooks trusting the new CA alone.
	caAfter := secretData(t, cl, "ca.crt")
	waitFor("the old CA to leave the caBundle of both webhook configurations and the Secret's bundle", func() bool {
		return !bytes.Contains(webhookBundles(t, cl), caBefore) && !bytes.Contains(secretData(t, cl, "ca-bundle.crt"), caBefore)
	})
	if b := webhookBundles(t, cl); !bytes.Equal(b, caAfter) || !bytes.Equal(secretData(t, cl, "ca-bundle.crt"), caAfter) {
		t.Errorf("after the overlap the bundles should hold the new CA alone:\nwebhooks:\n%s\nSecret:\n%s", b, secretData(t, cl, "ca-bundle.crt"))
	}
	if !chainsTo(t, e2eutil.ServedCert(t, cl, caAfter), caAfter) {
		t.Error("the webhook does not serve a certificate of the new CA")
	}
	createdThen, checkedThen := created.Load(), checked.Load()
	waitFor("pod creations and policy checks through the API server after the old CA left", func() bool {
		return created.Load() >= createdThen+20 && checked.Load() >= checkedThen+5
	})
	close(stop)
	wg.Wait()

	// The policy checks reached wincompat, not a matchCondition that skipped it: an invalid one is refused.
	if err := cl.C.Create(ctx, newPolicyConfigMap("kind: Policy\narch: sparc\n"), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "is not a valid policy") {
		t.Errorf("an invalid policy was not refused by wincompat's validating webhook: %v", err)
	}

	t.Logf("through the API server during two rotations: %d pods admitted and mutated, %d policies checked, %d failed", created.Load(), checked.Load(), failed.Load())
	if failed.Load() > 0 {
		failures.Range(func(k, _ any) bool { t.Errorf("call failed: %v", k); return true })
	}
	if created.Load() < 20 || checked.Load() < 10 {
		t.Errorf("only %d creations and %d policy checks: the streams did not cover the rotations", created.Load(), checked.Load())
	}
}

const validPolicy = "apiVersion: wincompat.io/v1alpha1\nkind: Policy\n"

// newPolicyConfigMap is wincompat's policy ConfigMap with policy.yaml, which its validating webhook checks.
func newPolicyConfigMap(policyYAML string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e2eutil.OwnNamespace, Name: "wincompat-policy"},
		Data:       map[string]string{"policy.yaml": policyYAML},
	}
}

// caSince is when the Secret's serving certificate was first signed by its current CA.
func caSince(t *testing.T, cl *e2eutil.Cluster) time.Time {
	t.Helper()
	var s corev1.Secret
	if err := cl.C.Get(context.Background(), client.ObjectKey{Namespace: e2eutil.OwnNamespace, Name: "wincompat-tls"}, &s); err != nil {
		t.Fatal(err)
	}
	since, err := time.Parse(time.RFC3339Nano, s.Annotations[certs.AnnotationCASince])
	if err != nil {
		t.Fatalf("the Secret does not record since when its CA signs: %v", err)
	}
	return since
}

// webhookBundles returns the caBundle of wincompat's webhooks, in the mutating and the validating
// configuration, failing if they differ.
func webhookBundles(t *testing.T, cl *e2eutil.Cluster) []byte {
	t.Helper()
	// wincompat writes the two configurations one after the other: a read between the writes sees them
	// differ for a moment. They must agree again promptly, and stay apart never.
	var differ string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		bundle, why := readWebhookBundles(t, cl)
		if why == "" {
			return bundle
		}
		differ = why
		if time.Now().After(deadline) {
			break
		}
	}
	t.Fatalf("%s for 5 s", differ)
	return nil
}

// readWebhookBundles returns the caBundle of the webhooks of both configurations, or why they differ.
func readWebhookBundles(t *testing.T, cl *e2eutil.Cluster) ([]byte, string) {
	t.Helper()
	var m admissionregistrationv1.MutatingWebhookConfiguration
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := cl.C.Get(context.Background(), client.ObjectKey{Name: e2eutil.WebhookConfigName}, &m); err != nil {
		t.Fatal(err)
	}
	if err := cl.C.Get(context.Background(), client.ObjectKey{Name: e2eutil.WebhookConfigName}, &v); err != nil {
		t.Fatal(err)
	}
	first := m.Webhooks[0].ClientConfig.CABundle
	for _, w := range m.Webhooks[1:] {
		if !bytes.Equal(w.ClientConfig.CABundle, first) {
			return nil, fmt.Sprintf("webhook %s has another caBundle than %s", w.Name, m.Webhooks[0].Name)
		}
	}
	for _, w := range v.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, first) {
			return nil, fmt.Sprintf("validating webhook %s has another caBundle than mutating webhook %s", w.Name, m.Webhooks[0].Name)
		}
	}
	return first, ""
}

func secretData(t *testing.T, cl *e2eutil.Cluster, key string) []byte {
	t.Helper()
	var s corev1.Secret
	if err := cl.C.Get(context.Background(), client.ObjectKey{Namespace: e2eutil.OwnNamespace, Name: "wincompat-tls"}, &s); err != nil {
		t.Fatal(err)
	}
	return s.Data[key]
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
