package certs

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestServingCertChainsToTheCA(t *testing.T) {
	now := time.Now()
	ca, err := newCA(now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Namespace: "wincompat-system", ServiceName: "wincompat", ExtraNames: []string{"localhost", "127.0.0.1"}}
	certPEM, keyPEM, err := newServingCert(ca, cfg.dnsNames(), cfg.ipAddresses(), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := parsePair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	if _, err := serving.cert.Verify(x509.VerifyOptions{DNSName: "wincompat.wincompat-system.svc", Roots: roots, CurrentTime: now}); err != nil {
		t.Errorf("the API server would not trust the serving certificate: %v", err)
	}
	if _, err := serving.cert.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: roots, CurrentTime: now}); err != nil {
		t.Errorf("a caller by IP would not trust the serving certificate: %v", err)
	}
	if !ca.cert.IsCA || serving.cert.IsCA {
		t.Error("CA flags wrong")
	}
}

func TestRenewDueAtTwoThirds(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &x509.Certificate{NotBefore: start, NotAfter: start.Add(90 * 24 * time.Hour)}
	if renewDue(c, start.Add(59*24*time.Hour)) {
		t.Error("renewed with more than a third of the validity left")
	}
	if !renewDue(c, start.Add(61*24*time.Hour)) {
		t.Error("not renewed with less than a third left")
	}
}

func TestBundleKeepsOnlyUnexpiredCAs(t *testing.T) {
	now := time.Now()
	old, _ := newCA(now.Add(-48*time.Hour), 24*time.Hour) // expired a day ago
	cur, _ := newCA(now, 24*time.Hour)
	bundle := joinPEM(joinPEM(nil, old.certPEM), cur.certPEM)
	if got := joinPEM(bundle, cur.certPEM); len(got) != len(bundle) {
		t.Error("joinPEM added a certificate the bundle already holds")
	}
	kept := unexpired(bundle, now)
	b, rest := pem.Decode(kept)
	if b == nil || len(rest) != 0 || string(pem.EncodeToMemory(b)) != string(cur.certPEM) {
		t.Errorf("unexpired kept the wrong certificates:\n%s", kept)
	}
}
