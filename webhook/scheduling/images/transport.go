package images

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
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

// plainHTTPError is a request go-containerregistry would have sent without TLS to a registry that is
// not on this host: it does so for private IP literals and *.localhost names.
type plainHTTPError struct{ host string }

func (e *plainHTTPError) Error() string {
	return "plain HTTP to " + e.host + " refused: only loopback registries may use http"
}

type tooLargeError struct{ what string }

func (e *tooLargeError) Error() string { return e.what + " larger than 4 MiB" }

// guard sits under go-containerregistry's transports, so it sees every request of a lookup: pings,
// token requests, manifests, config blobs and every redirect.
type guard struct{ next http.RoundTripper }

func (g guard) RoundTrip(req *http.Request) (*http.Response, error) {
	var refuse error
	switch {
	case req.URL.Scheme == "http" && !isLoopback(req.URL.Hostname()):
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
	resp.Body = &limitedBody{ReadCloser: resp.Body, what: what}
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

// limitedBody ends a response with tooLargeError once it passes maxBody, whether or not the registry
// announced its length.
type limitedBody struct {
	io.ReadCloser
	what string
	read int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.read > maxBody {
		return 0, &tooLargeError{what: b.what}
	}
	// One byte past the limit tells "exactly 4 MiB" from "more".
	if rest := maxBody + 1 - b.read; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if b.read > maxBody {
		return n - int(b.read-maxBody), &tooLargeError{what: b.what}
	}
	return n, err
}
