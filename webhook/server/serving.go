package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/net/netutil"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Serving bounds what anything that reaches the webhook port can hold: the port admits every source
// unless the platform lets a NetworkPolicy or a client certificate narrow it, and nothing before the
// handler knows a review from an attack.
type Serving struct {
	// MaxConnections caps the open connections; past it new ones wait in the kernel's accept queue.
	MaxConnections int
	// ReadTimeout bounds reading one request, headers and body (and the TLS handshake before it).
	ReadTimeout time.Duration
	// ReviewBytes is the memory reviews in flight may hold at once, their bodies and what answering
	// them holds (webhook.Limits.Budget).
	ReviewBytes int64
	// ClientCAFile, when set, makes the server ask every caller for a client certificate signed by one
	// of its CAs and refuse the connection without one: the API server presents one when its admission
	// configuration gives it one for this webhook. Reloaded when the file changes.
	ClientCAFile string
	// ClientNames, when set, further requires the client certificate's common name or a DNS name to
	// be one of them.
	ClientNames []string
}

// Defaults of Serving, also serve's flag defaults.
const (
	DefaultMaxConnections = 256
	DefaultReadTimeout    = 10 * time.Second
	DefaultReviewBytes    = 96 << 20
)

// withDefaults fills the zero fields with the defaults.
func (s Serving) withDefaults() Serving {
	if s.MaxConnections == 0 {
		s.MaxConnections = DefaultMaxConnections
	}
	if s.ReadTimeout == 0 {
		s.ReadTimeout = DefaultReadTimeout
	}
	if s.ReviewBytes == 0 {
		s.ReviewBytes = DefaultReviewBytes
	}
	return s
}

// Validate reports a setting that cannot work, naming its flag.
func (s Serving) Validate(minReviewBytes int64) []error {
	var errs []error
	if s.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("--max-connections %d: use at least 1", s.MaxConnections))
	}
	if s.ReadTimeout <= 0 || s.ReadTimeout > 30*time.Second {
		errs = append(errs, fmt.Errorf("--read-timeout %v: use more than 0 and at most 30s (the API server waits at most 30s for a webhook)", s.ReadTimeout))
	}
	if s.ReviewBytes < minReviewBytes {
		errs = append(errs, fmt.Errorf("--max-review-bytes-in-flight %d: use at least %dMi, what answering a 3 MiB pod review holds", s.ReviewBytes, (minReviewBytes+1<<20-1)>>20))
	}
	if s.ClientCAFile != "" {
		if _, err := loadClientCAs(s.ClientCAFile); err != nil {
			errs = append(errs, fmt.Errorf("--client-ca-file: %w", err))
		}
	} else if len(s.ClientNames) > 0 {
		errs = append(errs, errors.New("--client-names needs --client-ca-file: names are read from a verified client certificate"))
	}
	return errs
}

func loadClientCAs(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// boundedServer is controller-runtime's webhook server (its mux and per-path metrics) listening with
// the bounds of Serving: controller-runtime's own listener has no connection cap, no read deadline and
// no way to reload client CAs.
type boundedServer struct {
	crwebhook.Server
	host    string
	port    int
	certDir string // tls.crt and tls.key, when no option sets GetCertificate
	tlsOpts []func(*tls.Config)
	serving Serving
	log     logr.Logger
	started atomic.Bool
	// clientCAs is the pool of the last good --client-ca-file.
	clientCAs atomic.Pointer[x509.CertPool]
}

func newBoundedServer(host string, port int, certDir string, tlsOpts []func(*tls.Config), s Serving, log logr.Logger) *boundedServer {
	return &boundedServer{
		// Only its Register (which instruments each path) and WebhookMux are used.
		Server:  crwebhook.NewServer(crwebhook.Options{Host: host, Port: port}),
		host:    host,
		certDir: certDir,
		port:    port,
		tlsOpts: tlsOpts,
		serving: s,
		log:     log,
	}
}

func (s *boundedServer) Start(ctx context.Context) error {
	cfg := &tls.Config{NextProtos: []string{"h2"}}
	for _, op := range s.tlsOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		watcher, err := certwatcher.New(filepath.Join(s.certDir, "tls.crt"), filepath.Join(s.certDir, "tls.key"))
		if err != nil {
			return err
		}
		cfg.GetCertificate = watcher.GetCertificate
		go func() {
			if err := watcher.Start(ctx); err != nil {
				s.log.Error(err, "certificate watcher")
			}
		}()
	}
	if s.serving.ClientCAFile != "" {
		pool, err := loadClientCAs(s.serving.ClientCAFile)
		if err != nil {
			return fmt.Errorf("--client-ca-file: %w", err)
		}
		s.clientCAs.Store(pool)
		go s.watchClientCAs(ctx)
		base := cfg
		cfg = base.Clone()
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := base.Clone()
			c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, s.clientCAs.Load()
			c.VerifyConnection = s.verifyName
			return c, nil
		}
	}
	inner, err := net.Listen("tcp", net.JoinHostPort(s.host, strconv.Itoa(s.port)))
	if err != nil {
		return err
	}
	listener := tls.NewListener(netutil.LimitListener(inner, s.serving.MaxConnections), cfg)
	srv := &http.Server{
		// Reviews do not inherit ctx: on shutdown, those in flight are finished (Shutdown waits for them),
		// not cancelled; each is bounded by its own deadline instead.
		Handler: closingStrays(s.WebhookMux()),
		// The API server sends small headers and whole bodies at once; a peer that trickles either is
		// cut off, and the TLS handshake is bounded by the same deadlines.
		MaxHeaderBytes:    64 << 10,
		ReadHeaderTimeout: min(5*time.Second, s.serving.ReadTimeout),
		ReadTimeout:       s.serving.ReadTimeout,
		// A review may wait for registries (2s at most); the API server waits at most 30s.
		WriteTimeout: 35 * time.Second,
		IdleTimeout:  90 * time.Second, // the API server's keep-alive
		// Failed handshakes are what a scanner, a peer without a client certificate, or the readiness
		// check's bare TCP connection cause: detail for debugging (-v=1), not the default log.
		ErrorLog: log.New(logWriter{s.log.V(1)}, "", 0),
	}
	s.log.Info("serving webhook", "host", s.host, "port", s.port, "maxConnections", s.serving.MaxConnections,
		"readTimeout", s.serving.ReadTimeout, "clientCertificates", s.serving.ClientCAFile != "")
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			s.log.Error(err, "shutting down the webhook server")
		}
	}()
	s.started.Store(true)
	if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}

// closingStrays closes the connection after any request that is not a POST to a registered path: the
// API server sends nothing else, and a peer holding --max-connections idle keep-alive connections with
// one stray request each would otherwise keep them for the whole idle timeout.
func closingStrays(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); r.Method != http.MethodPost || pattern == "" {
			w.Header().Set("Connection", "close")
		}
		mux.ServeHTTP(w, r)
	})
}

// verifyName checks the verified client certificate against ClientNames.
func (s *boundedServer) verifyName(cs tls.ConnectionState) error {
	if len(s.serving.ClientNames) == 0 || len(cs.PeerCertificates) == 0 {
		return nil
	}
	leaf := cs.PeerCertificates[0]
	if slices.Contains(s.serving.ClientNames, leaf.Subject.CommonName) || slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return slices.Contains(s.serving.ClientNames, n) }) {
		return nil
	}
	return fmt.Errorf("client certificate %q is not one of --client-names", leaf.Subject.CommonName)
}

// watchClientCAs reloads --client-ca-file when its content changes; a bad content keeps the last good.
func (s *boundedServer) watchClientCAs(ctx context.Context) {
	last, _ := os.ReadFile(s.serving.ClientCAFile)
	var bad []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
		data, err := os.ReadFile(s.serving.ClientCAFile)
		if err != nil || bytes.Equal(data, last) || bytes.Equal(data, bad) {
			continue
		}
		pool, err := loadClientCAs(s.serving.ClientCAFile)
		if err != nil {
			bad = data
			s.log.Error(err, "client CA file changed to something unusable; keeping the last good one")
			continue
		}
		last = data
		s.clientCAs.Store(pool)
		s.log.Info("client CAs reloaded", "file", s.serving.ClientCAFile)
	}
}

// StartedChecker is ready once the server listens and accepts a TCP connection. It does not complete
// a TLS handshake: with client certificates required, it has none to offer.
func (s *boundedServer) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server has not been started yet")
		}
		host := s.host
		if host == "" {
			host = "localhost"
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(s.port)), 5*time.Second)
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}

var _ crwebhook.Server = (*boundedServer)(nil)

// logWriter turns net/http's log lines into logr messages.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
