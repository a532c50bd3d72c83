package images

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	// Image is set for a single-platform image: its platform is in its config blob, named by Config.
	Image  bool
	Config v1.Hash
	// listed counts an index's entries with a platform, kept or not.
	listed int
}

// platformsFromManifest reads a manifest served with Content-Type mediaType.
func platformsFromManifest(mediaType string, raw []byte) (contents, error) {
	return readManifest(mediaType, bytes.NewReader(raw))
}

// maxOther bounds the entries kept of other operating systems than Windows: the policy needs them only
// to name a Linux-only image's platforms in a message.
const maxOther = 8

// summary is what a manifest's fields say, read as a stream.
type summary struct {
	mediaType types.MediaType
	// manifests is set when the document has a manifests array (an index, or a document that looks
	// like one).
	manifests bool
	entries   entries
	config    *struct {
		MediaType types.MediaType `json:"mediaType"`
		Digest    string          `json:"digest"`
	}
	// fsLayers: schema 1 manifests name them; they carry no OS and go-containerregistry does not read them.
	fsLayers bool
}

// entries is what an index's manifests array says, kept as it streams by: a 4 MiB array of empty
// objects would otherwise become a million structs, twelve times the bytes that carried them.
type entries struct {
	platforms []policy.Platform
	indexes   []v1.Hash
	// listed counts the entries with a platform, kept or not.
	listed int
	// err is the first entry a registry got wrong; it matters only if the document is an index.
	err error
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
}

// readManifest reads a manifest served with Content-Type mediaType from r, an entry at a time: what it
// holds at once is one entry and what it keeps, never the whole document decoded.
func readManifest(mediaType string, r io.Reader) (contents, error) {
	m, err := decodeSummary(r)
	if err != nil {
		return contents{}, malformed("malformed manifest (not JSON)")
	}
	kind := types.MediaType(strings.TrimSpace(strings.Split(mediaType, ";")[0]))
	if !kind.IsIndex() && !kind.IsImage() && !kind.IsSchema1() {
		// Some registries serve manifests as application/json or octet-stream: trust the document.
		kind = m.mediaType
	}
	switch {
	case kind.IsIndex():
		return indexContents(&m.entries)
	case kind.IsImage():
		if m.config == nil {
			return contents{}, malformed("malformed manifest (no config)")
		}
		if mt := m.config.MediaType; mt != "" && mt != types.OCIConfigJSON && mt != types.DockerConfigJSON {
			return contents{}, malformed("not a container image (config is %s)", short(string(mt)))
		}
		return imageContents(m.config.Digest)
	case kind.IsSchema1() || m.fsLayers:
		return contents{}, malformed("Docker schema 1 manifest (unsupported)")
	case m.manifests:
		return indexContents(&m.entries)
	case m.config != nil:
		return imageContents(m.config.Digest)
	}
	return contents{}, malformed("not an image manifest (media type %s)", short(string(kind)))
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

var errNotJSON = errors.New("not a JSON object")

// decodeSummary reads the fields of a manifest that say what it is, as encoding/json would into a
// struct (keys matched without case, the last of duplicates winning, unknown keys skipped), and
// nothing else.
func decodeSummary(r io.Reader) (summary, error) {
	var m summary
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return m, errNotJSON
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return m, err
		}
		key, _ := t.(string)
		switch {
		case strings.EqualFold(key, "mediaType"):
			if err := dec.Decode(&m.mediaType); err != nil {
				return m, err
			}
		case strings.EqualFold(key, "manifests"):
			if m.manifests, m.entries, err = decodeEntries(dec); err != nil {
				return m, err
			}
		case strings.EqualFold(key, "config"):
			m.config = nil
			if err := dec.Decode(&m.config); err != nil {
				return m, err
			}
		case strings.EqualFold(key, "fsLayers"):
			// Like a json.RawMessage, even null counts as present.
			m.fsLayers = true
			if err := skipValue(dec); err != nil {
				return m, err
			}
		default:
			if err := skipValue(dec); err != nil {
				return m, err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return m, err
	}
	// Nothing may follow the object, as json.Unmarshal requires.
	if _, err := dec.Token(); err != io.EOF {
		return m, errNotJSON
	}
	return m, nil
}

// decodeEntries reads a manifests array (or null) an entry at a time.
func decodeEntries(dec *json.Decoder) (bool, entries, error) {
	var e entries
	t, err := dec.Token()
	if err != nil {
		return false, e, err
	}
	if t == nil {
		return false, e, nil
	}
	if t != json.Delim('[') {
		return false, e, errNotJSON
	}
	for i := 0; dec.More(); i++ {
		var entry indexEntry
		if err := dec.Decode(&entry); err != nil {
			return false, e, err
		}
		if e.err == nil {
			e.err = e.add(i, &entry)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return false, e, err
	}
	return true, e, nil
}

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
	if slices.Contains(e.platforms, p) {
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

// skipValue reads past one JSON value without keeping it.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
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
