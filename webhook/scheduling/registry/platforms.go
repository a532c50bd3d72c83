package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// maxField bounds os, architecture, os.version and each of os.features, which end up in admission
	// warnings.
	maxField = 64
	// maxFeatures bounds an entry's os.features: the image spec defines one (win32k) for Windows.
	maxFeatures = 8
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
	// Image is set for a single-platform image: its platform is in its config blob, named by Config.
	Image  bool
	Config v1.Hash
	// listed counts an index's entries with a platform, kept or not.
	listed int
}

// platformsFromManifest reads a manifest served with Content-Type mediaType. Only the fields that say
// what it is are decoded, and an index's entries one at a time: what it holds besides raw is one entry
// and what it keeps, never the whole document decoded.
func platformsFromManifest(mediaType string, raw []byte) (contents, error) {
	var m summary
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
		if m.Manifests == nil {
			return indexContents(&entries{})
		}
		return indexContents(m.Manifests)
	case kind.IsImage():
		if m.Config == nil {
			return contents{}, malformed("malformed manifest (no config)")
		}
		if mt := m.Config.MediaType; mt != "" && mt != types.OCIConfigJSON && mt != types.DockerConfigJSON {
			return contents{}, malformed("not a container image (config is %s)", short(string(mt)))
		}
		return imageContents(m.Config.Digest)
	case kind.IsSchema1() || bool(m.FSLayers):
		return contents{}, malformed("Docker schema 1 manifest (unsupported)")
	case m.Manifests != nil:
		return indexContents(m.Manifests)
	case m.Config != nil:
		return imageContents(m.Config.Digest)
	}
	return contents{}, malformed("not an image manifest (media type %s)", short(string(kind)))
}

// maxOther bounds the entries kept of other operating systems than Windows: the policy needs them only
// to name a Linux-only image's platforms in a message.
const maxOther = 8

// summary holds the fields of an OCI index, a Docker manifest list, an OCI image manifest and a Docker
// schema 2 manifest that say what kind of manifest it is and which platforms it has. encoding/json
// skips every other field without allocating.
type summary struct {
	MediaType types.MediaType `json:"mediaType"`
	// Manifests is nil without a manifests array (or with null).
	Manifests *entries `json:"manifests"`
	Config    *struct {
		MediaType types.MediaType `json:"mediaType"`
		Digest    string          `json:"digest"`
	} `json:"config"`
	// FSLayers: schema 1 manifests name them; they carry no OS and go-containerregistry does not read
	// them. Like a json.RawMessage, even null counts.
	FSLayers present `json:"fsLayers"`
}

type present bool

func (p *present) UnmarshalJSON([]byte) error {
	*p = true
	return nil
}

// entries is what an index's manifests array says, kept as it is decoded an entry at a time: a 4 MiB
// array of empty objects would otherwise become a million structs, twelve times the bytes that
// carried them.
type entries struct {
	platforms []policy.Platform
	indexes   []v1.Hash
	// listed counts the entries with a platform, kept or not.
	listed int
	// err is the first entry a registry got wrong; it matters only if the document is an index.
	err error
}

// UnmarshalJSON reads the array an entry at a time; encoding/json hands it the array's bytes
// without copying them.
func (e *entries) UnmarshalJSON(data []byte) error {
	var err error
	*e, err = decodeEntries(json.NewDecoder(bytes.NewReader(data)))
	return err
}

type indexEntry struct {
	MediaType types.MediaType `json:"mediaType"`
	Digest    string          `json:"digest"`
	Platform  *platform       `json:"platform"`
}

type platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	OSVersion    string `json:"os.version"`
	// OSFeatures are what the host must offer: containerd matches them (github.com/containerd/platforms,
	// NewMatcher) and the policy with it, so they are kept.
	OSFeatures []string `json:"os.features"`
}

func imageContents(config string) (contents, error) {
	h, err := v1.NewHash(config)
	if err != nil {
		return contents{}, malformed("malformed manifest (bad config digest)")
	}
	return contents{Image: true, Config: h}, nil
}

func indexContents(e *entries) (contents, error) {
	if e.err != nil {
		return contents{}, e.err
	}
	if e.listed > maxPlatforms {
		return contents{}, malformed("index lists more than %d platforms", maxPlatforms)
	}
	return contents{Platforms: e.platforms, Indexes: e.indexes, listed: e.listed}, nil
}

// decodeEntries reads a manifests array an entry at a time.
func decodeEntries(dec *json.Decoder) (entries, error) {
	var e entries
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return e, errNotArray
	}
	for i := 0; dec.More(); i++ {
		var entry indexEntry
		if err := dec.Decode(&entry); err != nil {
			return e, err
		}
		if e.err == nil {
			e.err = e.add(i, &entry)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return e, err
	}
	return e, nil
}

var errNotArray = errors.New("not a JSON array")

func (e *entries) add(i int, entry *indexEntry) error {
	if entry.MediaType.IsIndex() {
		h, err := v1.NewHash(entry.Digest)
		if err != nil {
			return malformed("malformed index (entry %d: bad digest)", i)
		}
		// One more than the lookup fetches is enough for it to refuse the image.
		if len(e.indexes) <= maxNested {
			e.indexes = append(e.indexes, h)
		}
		return nil
	}
	// No platform: an artifact, or an image only its config could place. "unknown": buildx's
	// attestation manifests, which no node runs.
	if entry.Platform == nil || entry.Platform.OS == "" || entry.Platform.OS == "unknown" {
		return nil
	}
	p, err := entry.Platform.check()
	if err != nil {
		return malformed("malformed index (entry %d: %v)", i, err)
	}
	if e.listed < maxPlatforms+1 {
		e.keep(p)
	} else {
		e.listed++
	}
	return nil
}

// keep counts p and keeps it unless it is a duplicate, or one entry of another OS too many.
func (e *entries) keep(p policy.Platform) {
	e.listed++
	if slices.ContainsFunc(e.platforms, p.Equal) {
		return
	}
	if p.OS != windows && len(e.platforms)-windowsCount(e.platforms) >= maxOther {
		return
	}
	e.platforms = append(e.platforms, p)
}

const windows = "windows"

func windowsCount(ps []policy.Platform) int {
	n := 0
	for _, p := range ps {
		if p.OS == windows {
			n++
		}
	}
	return n
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
	if len(p.OSFeatures) > maxFeatures {
		return policy.Platform{}, fmt.Errorf("more than %d os.features", maxFeatures)
	}
	var features []string
	for _, f := range p.OSFeatures {
		if f == "" || !validField(f) {
			return policy.Platform{}, errors.New("invalid os.features")
		}
		features = append(features, f)
	}
	// Sorted, so that equal entries compare equal; duplicates are kept, because containerd strips only
	// one win32k before it matches.
	slices.Sort(features)
	return policy.Platform{OS: p.OS, Architecture: p.Architecture, OSVersion: p.OSVersion, OSFeatures: features}, nil
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
