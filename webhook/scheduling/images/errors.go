package images

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// explain turns an error from reading an image of registry into one short sentence for an admission
// warning; podSecrets says whether the lookup offered the pod's pull secrets. The log has the full error.
func (r *Resolver) explain(registry string, podSecrets bool, err error) string {
	var (
		plain  *plainHTTPError
		large  *tooLargeError
		bad    *malformedError
		secret *pullSecretError
		status *transport.Error
		dns    *net.DNSError
		cert   *tls.CertificateVerificationError
		x509UA x509.UnknownAuthorityError
		x509H  x509.HostnameError
		op     *net.OpError
	)
	if errors.As(err, &secret) {
		return r.explain(registry, podSecrets, secret.err) + "; the pod's pull secrets are unreadable: " + brief(secret.secrets)
	}
	switch {
	// Before the others: a registry reached over https that failed, then refused over http, is
	// best explained by the refusal.
	case errors.As(err, &plain):
		return registry + ": plain HTTP refused (only loopback registries may use http)"
	case errors.As(err, &large):
		return large.Error()
	case errors.Is(err, errTooManyRedirects):
		return registry + ": too many redirects"
	case errors.As(err, &bad):
		return bad.msg
	case errors.As(err, &status):
		return r.explainStatus(registry, podSecrets, status)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("%s: no answer within %v", registry, r.c.BackgroundTimeout)
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return registry + ": no such host"
		}
		return registry + ": DNS lookup failed"
	case errors.As(err, &cert), errors.As(err, &x509UA), errors.As(err, &x509H):
		return registry + ": TLS certificate not trusted"
	case errors.Is(err, syscall.ECONNREFUSED):
		return registry + ": connection refused"
	case errors.As(err, &op) && op.Op == "dial":
		return registry + ": unreachable"
	}
	return registry + ": " + brief(err)
}

func (r *Resolver) explainStatus(registry string, podSecrets bool, e *transport.Error) string {
	code := e.StatusCode
	for _, d := range e.Errors {
		switch d.Code {
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			code = http.StatusUnauthorized
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
			code = http.StatusNotFound
		case transport.TooManyRequestsErrorCode:
			code = http.StatusTooManyRequests
		}
	}
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return registry + ": unauthorized" + r.unauthorizedHint(podSecrets)
	case http.StatusNotFound:
		if e.Request != nil && strings.Contains(e.Request.URL.Path, "/blobs/") {
			return "image config missing from the registry"
		}
		return "no such image"
	case http.StatusTooManyRequests:
		return registry + ": rate limited (HTTP 429)"
	}
	return fmt.Sprintf("%s: HTTP %d %s", registry, e.StatusCode, http.StatusText(e.StatusCode))
}

// unauthorizedHint names only credentials the lookup could have used: a pod that listed no pull
// secrets, or whose secrets the policy does not read, is not helped by fixing them.
func (r *Resolver) unauthorizedHint(podSecrets bool) string {
	switch hint := r.c.UnauthorizedHint; {
	case podSecrets && hint != "":
		return " (" + hint + " or the pod's imagePullSecrets)"
	case podSecrets:
		return " (check the pod's imagePullSecrets)"
	case hint != "":
		return " (" + hint + ")"
	}
	return ""
}

// brief keeps an unforeseen error short: without the request URL, and cut.
func brief(err error) string {
	var u *url.Error
	if errors.As(err, &u) {
		err = u.Err
	}
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
