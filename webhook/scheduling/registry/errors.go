package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// msgUnreachable is the one answer for every failure below HTTP, and for HTTP answers no registry gives:
// a pod's author names the host, so telling refused from filtered, untrusted TLS from plain HTTP, or
// an unknown name from a timeout would map wincompat's network for them.
const msgUnreachable = "registry unreachable (the cluster operator sees why in wincompat's log)"

// explain turns an error from reading an image of registry into one short sentence for an admission
// warning, and the reason the operator's metric counts; podSecrets says whether the lookup offered the
// pod's pull secrets. The log has the full error.
func (r *Resolver) explain(registry string, creds credentials, err error) (string, string) {
	var (
		plain  *plainHTTPError
		egress *egressError
		large  *tooLargeError
		bad    *malformedError
		secret *pullSecretError
		cloud  *cloudError
		status *transport.Error
		dns    *net.DNSError
		cert   *tls.CertificateVerificationError
		x509UA x509.UnknownAuthorityError
		x509H  x509.HostnameError
		recErr tls.RecordHeaderError
		alert  tls.AlertError
	)
	if errors.As(err, &secret) {
		msg, reason := r.explain(registry, creds, secret.err)
		if reason == reasonUnauthorized || reason == reasonNotFound {
			reason = reasonCredentials
		}
		// Which secrets, and why: the log's. The author learns only that theirs did not serve.
		return msg + "; the pod's pull secrets could not be read", reason
	}
	var reason string
	switch {
	case errors.Is(err, errBusy):
		return "", reasonBusy
	// Before the others: a registry reached over https that failed, then refused over http, is
	// best explained by the refusal.
	case errors.As(err, &plain), errors.As(err, &egress):
		reason = reasonPolicy
	case errors.As(err, &cloud):
		// The identity, not the registry, failed: the pod's author learns what the operator sets, the
		// log why.
		return registry + ": " + msgNotReadable + r.cloudHint(cloud.name), reasonCredentials
	case errors.As(err, &large):
		return large.Error(), reasonTooLarge
	case errors.Is(err, errTooManyRedirects):
		reason = reasonHTTP
	case errors.As(err, &bad):
		return bad.msg, reasonMalformed
	case errors.As(err, &status):
		return r.explainStatus(registry, creds, status)
	case errors.Is(err, context.DeadlineExceeded):
		reason = reasonTimeout
	case errors.As(err, &dns):
		reason = reasonDNS
	case errors.As(err, &cert), errors.As(err, &x509UA), errors.As(err, &x509H), errors.As(err, &recErr), errors.As(err, &alert):
		reason = reasonTLS
	// net/http has no error type for a plain HTTP answer to a TLS handshake, only these words.
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		reason = reasonTLS
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		reason = reasonRefused
	default:
		reason = reasonOther
	}
	return registry + ": " + r.unreachable(err), reason
}

// maxCauseBytes bounds the cause an unreachable registry's message repeats: the error may quote what
// the registry sent.
const maxCauseBytes = 512

// unreachable is msgUnreachable, or with Config.ShowCauses, the cause itself.
func (r *Resolver) unreachable(cause error) string {
	if !r.c.ShowCauses || cause == nil {
		return msgUnreachable
	}
	msg := cause.Error()
	if len(msg) > maxCauseBytes {
		msg = strings.ToValidUTF8(msg[:maxCauseBytes], "") + "..."
	}
	return "registry unreachable: " + msg
}

// msgNotReadable is the answer for both "unauthorized" and "no such image": which of the two a registry
// says of a repository is what a pod's author could otherwise learn, through wincompat's credentials,
// about a private registry's contents.
const msgNotReadable = "no such image, or not readable with the credentials wincompat may use for this pod"

func (r *Resolver) explainStatus(registry string, creds credentials, e *transport.Error) (string, string) {
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
		return registry + ": " + msgNotReadable + r.unauthorizedHint(registry, creds), reasonUnauthorized
	case http.StatusNotFound:
		return registry + ": " + msgNotReadable + r.unauthorizedHint(registry, creds), reasonNotFound
	case http.StatusTooManyRequests:
		return registry + ": rate limited (HTTP 429)", reasonRateLimited
	}
	// Any other status is no registry's answer about an image: a service that is no registry, or a
	// registry failing. Either way, what it is is the operator's to learn.
	return registry + ": " + r.unreachable(e), reasonHTTP
}

// unauthorizedHint names only credentials the lookup could have used: a pod that listed no pull
// secrets, or whose secrets the policy does not read, is not helped by fixing them. A cloud's registry
// whose cloud is not enabled is also told about that cloud's identity.
// cloudHint is the advice for a cloud registry whose identity failed; none where the namespace may
// not use wincompat's credentials (such a lookup never asks the identity).
func (r *Resolver) cloudHint(name string) string {
	if r.c.CloudHint == "" {
		return ""
	}
	return " (" + fmt.Sprintf(r.c.CloudHint, name) + ")"
}

func (r *Resolver) unauthorizedHint(registry string, creds credentials) string {
	podSecrets, hint := creds.secrets != nil, r.c.UnauthorizedHint
	if p, _, ok := cloudOf(registry); ok && !slices.Contains(r.c.CloudCredentials, p.cloud) && r.c.CloudHint != "" {
		hint = strings.TrimPrefix(hint+", or "+fmt.Sprintf(r.c.CloudHint, p.name), ", or ")
	}
	if creds.anonymous {
		// Config.Keychain is not this namespace's to use: its advice would not help.
		hint = ""
	}
	switch {
	case podSecrets && hint != "":
		return " (" + hint + " or the pod's imagePullSecrets)"
	case podSecrets:
		return " (check the pod's imagePullSecrets)"
	case hint != "":
		return " (" + hint + ")"
	}
	return ""
}
