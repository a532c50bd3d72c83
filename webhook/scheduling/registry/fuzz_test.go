package registry

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wincompat/wincompat/policy"
)

// testdata/fuzz keeps only inputs that found a bug, committed with its fix; the fuzzers start from the
// seeds below.

func FuzzPlatformsFromManifest(f *testing.F) {
	digest := "sha256:" + strings.Repeat("a", 64)
	f.Add("application/vnd.oci.image.index.v1+json", []byte(`{"schemaVersion": 2, "manifests": [{"mediaType": `+
		`"application/vnd.oci.image.manifest.v1+json", "digest": "`+digest+`", "size": 500, "platform": `+
		`{"os": "windows", "architecture": "amd64", "os.version": "10.0.20348.2461"}}]}`))
	f.Add("application/vnd.oci.image.manifest.v1+json", []byte(`{"schemaVersion": 2, "config": {"mediaType": `+
		`"application/vnd.oci.image.config.v1+json", "digest": "`+digest+`", "size": 500}, "layers": []}`))
	f.Fuzz(func(t *testing.T, mediaType string, raw []byte) {
		c, err := platformsFromManifest(mediaType, raw)
		if err != nil {
			checkMessage(t, err)
			if c.Image || c.Platforms != nil || c.Indexes != nil {
				t.Fatalf("contents %+v with error %v", c, err)
			}
			return
		}
		if c.Image && (c.Platforms != nil || c.Indexes != nil) {
			t.Fatalf("an image with index entries: %+v", c)
		}
		if len(c.Platforms) > maxPlatforms {
			t.Fatalf("%d platforms, over %d", len(c.Platforms), maxPlatforms)
		}
		for _, p := range c.Platforms {
			checkPlatform(t, p)
		}
		for _, h := range c.Indexes {
			if _, err := v1.NewHash(h.String()); err != nil {
				t.Fatalf("nested index digest %q: %v", h, err)
			}
		}
	})
}

func FuzzPlatformsFromConfig(f *testing.F) {
	f.Add([]byte(`{"architecture": "amd64", "os": "windows", "os.version": "10.0.20348.2461"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := platformFromConfig(raw)
		if err != nil {
			checkMessage(t, err)
			if !p.Equal(policy.Platform{}) {
				t.Fatalf("platform %+v with error %v", p, err)
			}
			return
		}
		checkPlatform(t, p)
	})
}

// checkPlatform holds what the policy and the warnings rely on.
func checkPlatform(t *testing.T, p policy.Platform) {
	t.Helper()
	if p.OS == "" || p.OS == "unknown" {
		t.Fatalf("platform without OS: %+v", p)
	}
	if len(p.OSFeatures) > maxFeatures {
		t.Fatalf("more than %d features: %+v", maxFeatures, p)
	}
	for _, s := range append([]string{p.OS, p.Architecture, p.OSVersion}, p.OSFeatures...) {
		if !validField(s) {
			t.Fatalf("field %q of %+v passed the check", s, p)
		}
	}
}

// checkMessage holds what an admission warning needs: our own error, short and printable.
func checkMessage(t *testing.T, err error) {
	t.Helper()
	var m *malformedError
	if !errors.As(err, &m) {
		t.Fatalf("error %v (%T) is not a malformedError", err, err)
	}
	if len(m.msg) > 200 {
		t.Fatalf("message of %d bytes: %q", len(m.msg), m.msg)
	}
	for _, r := range m.msg {
		if !unicode.IsPrint(r) {
			t.Fatalf("unprintable %q in message %q", r, m.msg)
		}
	}
}

func TestPlatformsFromManifest(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	entry := func(mediaType, platform string) string {
		e := fmt.Sprintf(`{"mediaType":%q,"digest":%q,"size":1`, mediaType, digest)
		if platform != "" {
			e += `,"platform":` + platform
		}
		return e + "}"
	}
	index := func(entries ...string) []byte {
		return []byte(`{"schemaVersion":2,"manifests":[` + strings.Join(entries, ",") + `]}`)
	}
	oci := string(types.OCIManifestSchema1)
	many := make([]string, maxPlatforms+1)
	for i := range many {
		many[i] = entry(oci, `{"os":"linux","architecture":"amd64"}`)
	}
	for _, tc := range []struct {
		name, mediaType string
		raw             []byte
		want            contents
		err             string
	}{
		{"attestations and entries without platform skipped", string(types.OCIImageIndex), index(
			entry(oci, `{"os":"windows","architecture":"amd64","os.version":"10.0.20348.1","variant":"x"}`),
			entry(oci, `{"os":"unknown","architecture":"unknown"}`),
			entry(oci, ""),
			entry(oci, `{"architecture":"amd64"}`),
		), contents{Platforms: []policy.Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.1"}}}, ""},
		{"nested index to fetch", string(types.DockerManifestList) + "; charset=utf-8", index(entry(string(types.OCIImageIndex), "")),
			contents{Indexes: []v1.Hash{{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}}}, ""},
		{"image manifest", "", []byte(`{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{"digest":"` + digest + `"}}`),
			contents{Image: true, Config: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}}, ""},
		{"image manifest without a config digest", "", []byte(`{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{}}`),
			contents{}, "malformed manifest (bad config digest)"},
		{"too many platforms", string(types.OCIImageIndex), index(many...), contents{},
			fmt.Sprintf("index lists more than %d platforms", maxPlatforms)},
		{"too long a version", string(types.OCIImageIndex), index(entry(oci,
			`{"os":"windows","architecture":"amd64","os.version":"`+strings.Repeat("1", maxField+1)+`"}`)),
			contents{}, "malformed index (entry 0: invalid os.version)"},
		{"os.features kept, sorted, one entry per set", string(types.OCIImageIndex), index(
			entry(oci, `{"os":"windows","architecture":"amd64","os.version":"10.0.20348.1","os.features":["win32k"]}`),
			entry(oci, `{"os":"windows","architecture":"amd64","os.version":"10.0.20348.1"}`),
			entry(oci, `{"os":"windows","architecture":"amd64","os.version":"10.0.20348.1","os.features":["x","win32k"]}`),
			entry(oci, `{"os":"windows","architecture":"amd64","os.version":"10.0.20348.1","os.features":["win32k","x"]}`),
		), contents{Platforms: []policy.Platform{
			{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.1", OSFeatures: []string{"win32k"}},
			{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.1"},
			{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.1", OSFeatures: []string{"win32k", "x"}},
		}}, ""},
		{"a feature a warning cannot carry", string(types.OCIImageIndex), index(entry(oci,
			`{"os":"windows","architecture":"amd64","os.features":["win32k","a b"]}`)),
			contents{}, "malformed index (entry 0: invalid os.features)"},
		{"too many features", string(types.OCIImageIndex), index(entry(oci,
			`{"os":"windows","architecture":"amd64","os.features":["a","b","c","d","e","f","g","h","i"]}`)),
			contents{}, fmt.Sprintf("malformed index (entry 0: more than %d os.features)", maxFeatures)},
		{"neither index nor image", "text/plain", []byte(`{"hello":"world"}`), contents{}, `not an image manifest (media type "")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := platformsFromManifest(tc.mediaType, tc.raw)
			if msg := fmt.Sprint(err); tc.err != "" && msg != tc.err || tc.err == "" && err != nil {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			got.listed = 0 // a count for the nested indexes' bound
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
