package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// go-containerregistry's remote.Get reads a whole manifest and then decodes it into its own structs,
// layers and all, whatever the manifest is: a hostile 4 MiB manifest of empty layer objects becomes
// hundreds of MiB. So the resolver uses go-containerregistry for what it does well (the ping, the
// token exchange, credentials) and reads manifests and config blobs itself, decoding only the fields
// it needs (platforms.go).

// manifestAccept is what a lookup accepts, as go-containerregistry asks: schema 1 too, to say it is
// unsupported rather than "no such image".
var manifestAccept = strings.Join([]string{
	string(types.OCIImageIndex), string(types.DockerManifestList),
	string(types.OCIManifestSchema1), string(types.DockerManifestSchema2),
	string(types.DockerManifestSchema1), string(types.DockerManifestSchema1Signed),
}, ",")

// session is one lookup's authenticated client for one repository.
type session struct {
	client *http.Client
	repo   name.Repository
	// ns, on a mirror, is the registry the reference names (containerd's ?ns= query parameter).
	ns string
}

func (r *Resolver) session(ctx context.Context, repo name.Repository, keychain authn.Keychain) (*session, error) {
	auth, err := authn.Resolve(ctx, keychain, repo)
	if err != nil {
		return nil, err
	}
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, transport.NewUserAgent(r.transport, "wincompat"), []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, err
	}
	// net/http's default redirect policy (at most 10) applies; the guard counts them again.
	return &session{client: &http.Client{Transport: rt}, repo: repo}, nil
}

func (s *session) url(kind, identifier string) string {
	u := url.URL{Scheme: s.repo.Scheme(), Host: s.repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/%s/%s", s.repo.RepositoryStr(), kind, identifier)}
	if s.ns != "" {
		u.RawQuery = url.Values{"ns": {s.ns}}.Encode()
	}
	return u.String()
}

func (s *session) do(ctx context.Context, method, u, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// head asks a tag's digest without its manifest.
func (s *session) head(ctx context.Context, tag name.Tag) (string, error) {
	resp, err := s.do(ctx, http.MethodHead, s.url("manifests", tag.Identifier()), manifestAccept)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	h, err := v1.NewHash(resp.Header.Get("Docker-Content-Digest"))
	if err != nil {
		return "", fmt.Errorf("HEAD %s: no usable Docker-Content-Digest: %w", tag, err)
	}
	return h.String(), nil
}

// manifest reads ref's manifest and returns what it says and its digest, checked against ref's when
// ref is a digest.
func (s *session) manifest(ctx context.Context, ref name.Reference) (contents, string, error) {
	resp, err := s.do(ctx, http.MethodGet, s.url("manifests", ref.Identifier()), manifestAccept)
	if err != nil {
		return contents{}, "", err
	}
	defer resp.Body.Close()
	raw, err := readBody(resp)
	if err != nil {
		return contents{}, "", err
	}
	sum := sha256.Sum256(raw)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if d, ok := ref.(name.Digest); ok && d.DigestStr() != digest {
		// A digest of another algorithm fails the same way: sha256 is what registries use.
		return contents{}, "", malformed("manifest does not match its digest")
	}
	c, err := platformsFromManifest(resp.Header.Get("Content-Type"), raw)
	return c, digest, err
}

// readBody reads a whole response. Its buffer grows as bytes arrive, never by the length a registry
// announces: a registry that announces 4 MiB and sends nothing must not make wincompat reserve them.
// Growing by doubling holds up to twice what arrived, which bodyWeight covers.
func readBody(resp *http.Response) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(resp.Body)
	return buf.Bytes(), err
}

// config reads an image config blob: small, and read whole (by the limits of the transport).
func (s *session) config(ctx context.Context, digest v1.Hash) ([]byte, error) {
	resp, err := s.do(ctx, http.MethodGet, s.url("blobs", digest.String()), "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := readBody(resp)
	if err != nil {
		return nil, err
	}
	if digest.Algorithm == "sha256" {
		if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != digest.Hex {
			return nil, malformed("image config does not match its digest")
		}
	}
	return raw, nil
}
