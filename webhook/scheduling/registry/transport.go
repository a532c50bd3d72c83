package registry

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/wincompat/wincompat/webhook/bytebudget"
)

const (
	// maxBody is the OCI distribution spec's limit for a manifest a registry must accept. Configs and
	// token responses are far smaller; go-containerregistry alone would read a 100 MiB manifest.
	maxBody = 4 << 20
	// maxRedirects is net/http's default, which go-containerregistry replaces with a check that lets
	// a registry redirect to itself forever.
	maxRedirects = 10
)

var errTooManyRedirects = errors.New("too many redirects")

// plainHTTPError is a request without TLS the resolver refuses: to any host but a loopback one, to a
// loopback one unless private networks are allowed, and after any redirect.
type plainHTTPError struct{ host string }

func (e *plainHTTPError) Error() string {
	return "plain HTTP to " + e.host + " refused: only loopback registries may use http, with --image-allow-private-networks, and never after a redirect"
}

type tooLargeError struct{ what string }

func (e *tooLargeError) Error() string { return e.what + " larger than 4 MiB" }

// guard sits under go-containerregistry's transports, so it sees every request of a lookup: pings,
// token requests, manifests, config blobs and every redirect. The egress policy itself is checked where
// connections are dialled (egress.go), on the addresses names resolve to.
type guard struct {
	next         http.RoundTripper
	allowPrivate bool
}

func (g guard) RoundTrip(req *http.Request) (*http.Response, error) {
	var refuse error
	switch {
	// go-containerregistry also falls back to http for private IP literals and *.localhost names,
	// and a registry may redirect anywhere: plain HTTP is for a registry on this host, asked directly.
	case req.URL.Scheme == "http" && (!g.allowPrivate || !isLoopback(req.URL.Hostname()) || req.Response != nil):
		refuse = &plainHTTPError{host: req.URL.Host}
	case redirects(req) > maxRedirects:
		refuse = errTooManyRedirects
	}
	if refuse != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, refuse
	}
	resp, err := g.next.RoundTrip(req)
	if err != nil || req.Method == http.MethodHead {
		return resp, err
	}
	what := bodyKind(req.URL.Path)
	if resp.ContentLength > maxBody {
		resp.Body.Close()
		return nil, &tooLargeError{what: what}
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, what: what, held: reservationOf(req.Context())}
	return resp, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redirects counts the responses that led to req: net/http links each redirected request to the
// response that caused it.
func redirects(req *http.Request) int {
	n := 0
	for resp := req.Response; resp != nil && n <= maxRedirects; n++ {
		if resp.Request == nil {
			return n + 1
		}
		resp = resp.Request.Response
	}
	return n
}

func bodyKind(path string) string {
	switch {
	case strings.Contains(path, "/manifests/"):
		return "manifest"
	case strings.Contains(path, "/blobs/"):
		// The resolver reads no blob but the config.
		return "image config"
	}
	return "registry response"
}

// bodyWeight is what one byte of a response costs the byte budget: the buffer a body is read into grows
// by doubling, so it holds up to twice what arrived. The garbage of growing and decoding is the
// collector's (BenchmarkReadManifestMemory measures the peak with it).
const bodyWeight = 2

// maxRead bounds one read, so that a response takes its budget as its bytes arrive, not as a
// caller's buffer is large.
const maxRead = 32 << 10

// limitedBody ends a response with tooLargeError once it passes maxBody, whether or not the registry
// announced its length, and holds the lookup's byte budget for what it read until it is closed.
type limitedBody struct {
	io.ReadCloser
	what string
	read int64
	held *bytebudget.Reservation
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.read > maxBody {
		return 0, &tooLargeError{what: b.what}
	}
	// One byte past the limit tells "exactly 4 MiB" from "more".
	if rest := maxBody + 1 - b.read; int64(len(p)) > rest {
		p = p[:rest]
	}
	if len(p) > maxRead {
		p = p[:maxRead]
	}
	before := b.held.Held()
	if !b.held.Grow(int64(len(p)) * bodyWeight) {
		return 0, errBusy
	}
	n, err := b.ReadCloser.Read(p)
	b.held.ShrinkTo(before + int64(n)*bodyWeight)
	b.read += int64(n)
	if b.read > maxBody {
		return n - int(b.read-maxBody), &tooLargeError{what: b.what}
	}
	return n, err
}

func (b *limitedBody) Close() error {
	b.held.Release()
	return b.ReadCloser.Close()
}
