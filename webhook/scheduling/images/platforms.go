package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wincompat/wincompat/policy"
)

// This file is the pure half of the resolver: registry bytes in, platforms out, no I/O, so that the fuzz
// targets can reach every branch a hostile registry can.

const (
	// maxPlatforms bounds what one image keeps in the cache. Real indexes list tens of entries; a
	// 4 MiB manifest could list tens of thousands, and the cache holds MaxEntries images.
	maxPlatforms = 256
	// maxField bounds os, architecture and os.version, which end up in admission warnings.
	maxField = 64
)

// malformedError is content a registry served that is not what it claims to be.
type malformedError struct{ msg string }

func (e *malformedError) Error() string { return e.msg }

func malformed(format string, args ...any) error {
	return &malformedError{msg: fmt.Sprintf(format, args...)}
}

// contents is what one manifest says about platforms.
type contents struct {
	// Platforms of an index's image entries.
	Platforms []policy.Platform
	// Indexes are the digests of an index's entries that are indexes themselves, to fetch and flatten.
	Indexes []v1.Hash
	// Image is set for a single-platform image: its platform is in its config blob.
	Image bool
}

// manifest holds the fields of an OCI index, a Docker manifest list, an OCI image manifest and a Docker
// schema 2 manifest that say what kind of manifest it is and which platforms it has.
type manifest struct {
	MediaType types.MediaType `json:"mediaType"`
	Manifests []struct {
		MediaType types.MediaType `json:"mediaType"`
		Digest    string          `json:"digest"`
		Platform  *platform       `json:"platform"`
	} `json:"manifests"`
	Config *struct {
		MediaType types.MediaType `json:"mediaType"`
	} `json:"config"`
	// Schema 1 manifests name fsLayers; they carry no OS and go-containerregistry does not read them.
	FSLayers json.RawMessage `json:"fsLayers"`
}

type platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	OSVersion    string `json:"os.version"`
}

// platformsFromManifest reads a manifest served with Content-Type mediaType.
func platformsFromManifest(mediaType string, raw []byte) (contents, error) {
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return contents{}, malformed("malformed manifest (not JSON)")
	}
	kind := types.MediaType(strings.TrimSpace(strings.Split(mediaType, ";")[0]))
	if !kind.IsIndex() && !kind.IsImage() && !kind.IsSchema1() {
		// Some registries serve manifests as application/json or octet-stream: trust the document.
		kind = m.MediaType
	}
	switch {
	case kind.IsIndex():
		return indexContents(&m)
	case kind.IsImage():
		if m.Config == nil {
			return contents{}, malformed("malformed manifest (no config)")
		}
		if mt := m.Config.MediaType; mt != "" && mt != types.OCIConfigJSON && mt != types.DockerConfigJSON {
			return contents{}, malformed("not a container image (config is %s)", short(string(mt)))
		}
		return contents{Image: true}, nil
	case kind.IsSchema1() || m.FSLayers != nil:
		return contents{}, malformed("Docker schema 1 manifest (unsupported)")
	case m.Manifests != nil:
		return indexContents(&m)
	case m.Config != nil:
		return contents{Image: true}, nil
	}
	return contents{}, malformed("not an image manifest (media type %s)", short(string(kind)))
}

func indexContents(m *manifest) (contents, error) {
	var c contents
	for i, e := range m.Manifests {
		if e.MediaType.IsIndex() {
			h, err := v1.NewHash(e.Digest)
			if err != nil {
				return contents{}, malformed("malformed index (entry %d: bad digest)", i)
			}
			c.Indexes = append(c.Indexes, h)
			continue
		}
		// No platform: an artifact, or an image only its config could place. "unknown": buildx's
		// attestation manifests, which no node runs.
		if e.Platform == nil || e.Platform.OS == "" || e.Platform.OS == "unknown" {
			continue
		}
		p, err := e.Platform.check()
		if err != nil {
			return contents{}, malformed("malformed index (entry %d: %v)", i, err)
		}
		if len(c.Platforms) == maxPlatforms {
			return contents{}, malformed("index lists more than %d platforms", maxPlatforms)
		}
		c.Platforms = append(c.Platforms, p)
	}
	return c, nil
}

// platformFromConfig reads the os, architecture and os.version of an image config blob.
func platformFromConfig(raw []byte) (policy.Platform, error) {
	var p platform
	if err := json.Unmarshal(raw, &p); err != nil {
		return policy.Platform{}, malformed("malformed image config (not JSON)")
	}
	if p.OS == "" {
		return policy.Platform{}, malformed("image config names no OS")
	}
	pp, err := p.check()
	if err != nil {
		return policy.Platform{}, malformed("malformed image config (%v)", err)
	}
	return pp, nil
}

// check keeps fields to the characters real platforms use, so that a registry cannot put arbitrary text
// into warnings and logs.
func (p *platform) check() (policy.Platform, error) {
	for _, f := range []struct{ name, value string }{
		{"os", p.OS}, {"architecture", p.Architecture}, {"os.version", p.OSVersion},
	} {
		if !validField(f.value) {
			return policy.Platform{}, errors.New("invalid " + f.name)
		}
	}
	return policy.Platform{OS: p.OS, Architecture: p.Architecture, OSVersion: p.OSVersion}, nil
}

func validField(s string) bool {
	if len(s) > maxField {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '_', c == '+':
		default:
			return false
		}
	}
	return true
}

// short quotes at most maxField bytes of registry-controlled text for a message.
func short(s string) string {
	if len(s) > maxField {
		s = s[:maxField] + "…"
	}
	return fmt.Sprintf("%q", s)
}
