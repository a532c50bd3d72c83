// Package registrytest runs go-containerregistry's in-memory registry on loopback and pushes small images
// whose platforms say what a test needs (Windows builds, Linux only), as real OCI indexes and Docker
// manifest lists. Tests, the demo and the load tools use it; nothing in the server does.
package registrytest

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wincompat/wincompat/policy"
)

// Registry is an in-memory registry on 127.0.0.1 (plain HTTP, which clients allow for loopback only).
type Registry struct {
	// Host is host:port, the registry part of the references Push returns.
	Host string
	srv  *httptest.Server
	// delay, in nanoseconds, is added to every manifest request: a slow registry.
	delay atomic.Int64
	// Requests counts manifest requests (GET and HEAD), to tell cache hits from registry round trips.
	Requests atomic.Int64
}

// Start starts a registry; Close stops it.
func Start() *Registry {
	r := &Registry{}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.Contains(req.URL.Path, "/manifests/") && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
			r.Requests.Add(1)
			time.Sleep(time.Duration(r.delay.Load()))
		}
		inner.ServeHTTP(w, req)
	}))
	r.Host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// Close stops the registry.
func (r *Registry) Close() { r.srv.Close() }

// SetDelay makes every later manifest request take d longer.
func (r *Registry) SetDelay(d time.Duration) { r.delay.Store(int64(d)) }

// Platform is one entry to push, as the policy describes an image's entries.
type Platform = policy.Platform

// Windows is an amd64 Windows entry of the given os.version (10.0.20348.2227; "" for none).
func Windows(osVersion string) Platform {
	return Platform{OS: "windows", Architecture: "amd64", OSVersion: osVersion}
}

// Linux is a linux entry of arch.
func Linux(arch string) Platform { return Platform{OS: "linux", Architecture: arch} }

// PushIndex pushes Index(mediaType, platforms...) under repo:tag and returns the reference as a pod
// would name it.
func (r *Registry) PushIndex(repo, tag string, mediaType types.MediaType, platforms ...Platform) (string, error) {
	idx, err := Index(mediaType, platforms...)
	if err != nil {
		return "", err
	}
	ref, parsed, err := r.reference(repo, tag)
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(parsed, idx); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, nil
}

// PushImage pushes a single-platform OCI image (its platform only in the config) under repo:tag.
func (r *Registry) PushImage(repo, tag string, p Platform) (string, error) {
	img, err := Image(p, true)
	if err != nil {
		return "", err
	}
	ref, parsed, err := r.reference(repo, tag)
	if err != nil {
		return "", err
	}
	if err := remote.Write(parsed, img); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, nil
}

// Tag puts the manifest ref names under each of tags in the same repository, with one read of it: many
// references no cache has seen, for load that must miss. It returns the new references.
func (r *Registry) Tag(ref string, tags ...string) ([]string, error) {
	src, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(src)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	out := make([]string, 0, len(tags))
	for _, tag := range tags {
		dst := src.Context().Tag(tag)
		if err := remote.Tag(dst, desc); err != nil {
			return nil, fmt.Errorf("tagging %s as %s: %w", ref, dst, err)
		}
		out = append(out, dst.String())
	}
	return out, nil
}

func (r *Registry) reference(repo, tag string) (string, name.Reference, error) {
	ref := r.Host + "/" + repo + ":" + tag
	parsed, err := name.ParseReference(ref)
	return ref, parsed, err
}

// Index is an index of mediaType (types.OCIImageIndex or types.DockerManifestList) with one small image
// per platform, each entry carrying its platform.
func Index(mediaType types.MediaType, platforms ...Platform) (v1.ImageIndex, error) {
	oci := mediaType == types.OCIImageIndex
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		img, err := Image(p, oci)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture, OSVersion: p.OSVersion}}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, mediaType), adds...), nil
}

// Image is a small random image whose config names p (an OCI manifest and config when oci, else Docker
// schema 2).
func Image(p Platform, oci bool) (v1.Image, error) {
	img, err := random.Image(64, 1)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.OSVersion = p.OS, p.Architecture, p.OSVersion
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	if oci {
		img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	return img, nil
}
