package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// testCA signs certificates for the serving tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		DNSNames: []string{cn}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startServer serves "ok" on /mutate-pod with s's bounds on a free loopback port.
func startServer(t *testing.T, s Serving, serving tls.Certificate) (addr string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := newBoundedServer("127.0.0.1", port, "", []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &serving, nil }
		c.NextProtos = []string{"http/1.1"}
	}}, s.withDefaults(), logr.Discard())
	srv.Register("/mutate-pod", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for srv.StartedChecker()(nil) != nil {
		time.Sleep(10 * time.Millisecond)
	}
	return addr
}

func get(addr string, roots *x509.CertPool, client *tls.Certificate) error {
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
	resp, err := c.Get("https://" + addr + "/mutate-pod")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "ok" {
		return errors.New(string(body))
	}
	return nil
}

// With --client-ca-file only callers with a certificate of those CAs are answered (and with
// --client-names only the names listed); a changed file is taken without a restart.
func TestServingRequiresClientCertificates(t *testing.T) {
	servingCA, apiServerCA, otherCA := newTestCA(t, "serving"), newTestCA(t, "api-server-clients"), newTestCA(t, "other")
	roots := x509.NewCertPool()
	roots.AddCert(servingCA.cert)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, apiServerCA.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	s := Serving{ClientCAFile: caFile, ClientNames: []string{"kube-apiserver"}}
	if errs := s.withDefaults().Validate(1); len(errs) > 0 {
		t.Fatal(errs)
	}
	addr := startServer(t, s, servingCA.issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth))

	apiServer := apiServerCA.issue(t, "kube-apiserver", x509.ExtKeyUsageClientAuth)
	if err := get(addr, roots, &apiServer); err != nil {
		t.Errorf("the API server's certificate: %v", err)
	}
	for name, cert := range map[string]*tls.Certificate{
		"no certificate":         nil,
		"another CA's":           new(otherCA.issue(t, "kube-apiserver", x509.ExtKeyUsageClientAuth)),
		"a name not in the list": new(apiServerCA.issue(t, "someone", x509.ExtKeyUsageClientAuth)),
	} {
		if err := get(addr, roots, cert); err == nil {
			t.Errorf("%s: answered", name)
		}
	}
}

// Past --max-connections a new connection is not served (its handshake waits in the accept queue)
// until one of the others closes.
func TestServingCapsConnections(t *testing.T) {
	ca := newTestCA(t, "serving")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	addr := startServer(t, Serving{MaxConnections: 2}, ca.issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	dial := func(timeout time.Duration) (*tls.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout, Deadline: time.Now().Add(timeout)}, "tcp", addr, &tls.Config{RootCAs: roots})
	}
	var held []*tls.Conn
	for range 2 {
		c, err := dial(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// Only a bound on the test: a server without the cap completes this handshake at once.
	if c, err := dial(500 * time.Millisecond); err == nil {
		c.Close()
		t.Fatal("a third connection was served while two were open")
	}
	held[0].Close()
	c, err := dial(30 * time.Second)
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	c.Close()
	held[1].Close()
}

// A stray request (not a POST to a webhook path) gets its connection closed with the answer, so idle
// keep-alive connections cannot be collected with one cheap request each.
func TestServingClosesAfterStrayRequests(t *testing.T) {
	ca := newTestCA(t, "serving")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	addr := startServer(t, Serving{}, ca.issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 30 * time.Second}
	for _, tc := range []struct {
		method, path string
		close        bool
	}{{http.MethodGet, "/", true}, {http.MethodGet, "/mutate-pod", true}, {http.MethodPost, "/nowhere", true}, {http.MethodPost, "/mutate-pod", false}} {
		req, _ := http.NewRequest(tc.method, "https://"+addr+tc.path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Close != tc.close {
			t.Errorf("%s %s: connection closed %v, want %v", tc.method, tc.path, resp.Close, tc.close)
		}
	}
}
