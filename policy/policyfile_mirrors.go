package policy

import (
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RegistryMirrors says where the image resolver reads a registry's images, as containerd's hosts.toml
// says where a node pulls them (containerd docs/hosts.md; core/remotes/docker/config/hosts.go). One
// entry is one hosts.toml: Registry is its directory's name, Mirrors its [host."..."] tables in the
// order the file lists them, and the registry itself (hosts.toml's server) is tried after them unless
// AirGapped. wincompat only reads, so it reads nothing else of the file: no push, no skip_verify (a
// mirror's certificate must be trusted by the system roots wincompat runs with), no headers, no
// client certificates.
type RegistryMirror struct {
	// Registry is a registry host as image references name it (mcr.microsoft.com, docker.io,
	// registry.example:5000), or RegistryMirrorDefault for every registry without an entry of its own.
	Registry string `json:"registry"`
	// Mirrors are tried in order, each for what its capabilities allow.
	Mirrors []Mirror `json:"mirrors"`
	// AirGapped: the registry itself is never contacted, only its mirrors (hosts.toml with server set to
	// a mirror).
	AirGapped bool `json:"airGapped"`
}

// Mirror is one [host."https://HOST/v2/PREFIX"] table of a hosts.toml.
type Mirror struct {
	// Host is host[:port]: https always, plain http only to a loopback mirror with private networks
	// allowed, as for any registry.
	Host string `json:"host"`
	// RepositoryPrefix is put before the repository on the mirror (harbor.example's mcr-proxy/
	// project: windows/nanoserver is read as mcr-proxy/windows/nanoserver), as hosts.toml's
	// [host."https://harbor.example/v2/mcr-proxy"] with override_path = true. "": none.
	RepositoryPrefix string `json:"repositoryPrefix"`
	// Capabilities are what the mirror is trusted with: pull (read content by digest) and resolve (say
	// which digest a tag names). A tag is read from a mirror with both, a digest from one with pull;
	// resolve alone answers nothing, as in containerd. Empty: both, as hosts.toml's default.
	Capabilities []string `json:"capabilities"`
}

// RegistryMirrorDefault is the entry for every registry without one of its own, as hosts.toml's
// _default directory.
const RegistryMirrorDefault = "_default"

// Capabilities of a mirror, hosts.toml's names.
const (
	// CapabilityPull: the mirror may answer for content by digest, which the resolver verifies.
	CapabilityPull = "pull"
	// CapabilityResolve: the mirror may say which digest a tag names, which nothing verifies.
	CapabilityResolve = "resolve"
)

// MaxImageSources bounds the sources one image lookup tries, mirrors and the registry itself: each
// costs a connection and a share of the review's deadline.
const MaxImageSources = 4

// maxRegistryMirrors bounds the entries, which each image lookup searches.
const maxRegistryMirrors = 64

// Can reports whether the mirror may answer a reference: a tag needs resolve, and every read pull.
func (m Mirror) Can(tag bool) bool {
	caps := m.Capabilities
	if len(caps) == 0 {
		return true
	}
	return slices.Contains(caps, CapabilityPull) && (!tag || slices.Contains(caps, CapabilityResolve))
}

// Name is the mirror as records and warnings name it: host, and the prefix when there is one.
func (m Mirror) Name() string {
	if m.RepositoryPrefix == "" {
		return m.Host
	}
	return m.Host + "/" + m.RepositoryPrefix
}

// repositoryComponent is a path component of a repository name, the OCI distribution spec's grammar.
var repositoryComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)

// registryHost says what is wrong with host as a registry host[:port], "" when nothing is.
func registryHost(host string) string {
	if host == "" {
		return "empty: name a registry host such as registry.example:5000"
	}
	if strings.Contains(host, "/") {
		return "a host[:port] alone, without scheme or path (https is always used, and a repository prefix has its own key)"
	}
	name, port, hasPort := host, "", false
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "an IPv6 address in brackets must end with ]"
		}
		name = host[1:end]
		if rest := host[end+1:]; rest != "" {
			if rest[0] != ':' {
				return "only :port may follow an IPv6 address in brackets"
			}
			port, hasPort = rest[1:], true
		}
		if a, err := netip.ParseAddr(name); err != nil || !a.Is6() || a.Zone() != "" {
			return "not an IPv6 address in brackets"
		}
	} else {
		if i := strings.LastIndexByte(host, ':'); i >= 0 {
			name, port, hasPort = host[:i], host[i+1:], true
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return "not a host name (lower case, as references name it): " + strings.Join(msgs, "; ")
		}
	}
	if n, err := strconv.Atoi(port); hasPort && (err != nil || n < 1 || n > 65535) {
		return "the port must be a number from 1 to 65535"
	}
	return ""
}

// validateMirrors checks registryMirrors: hosts, prefixes, closed capability sets, one entry per
// registry, and at most MaxImageSources sources per registry.
func (p *Policy) validateMirrors() field.ErrorList {
	var errs field.ErrorList
	at := field.NewPath("registryMirrors")
	if len(p.RegistryMirrors) > maxRegistryMirrors {
		errs = append(errs, field.TooMany(at, len(p.RegistryMirrors), maxRegistryMirrors))
	}
	seen := map[string]int{}
	for i, e := range p.RegistryMirrors {
		entry := at.Index(i)
		if e.Registry != RegistryMirrorDefault {
			if msg := registryHost(e.Registry); msg != "" {
				errs = append(errs, field.Invalid(entry.Child("registry"), e.Registry, msg+", or "+RegistryMirrorDefault+" for every other registry"))
			}
		}
		key := strings.ToLower(e.Registry)
		if key == "docker.io" || key == "registry-1.docker.io" {
			key = "index.docker.io" // the names of Docker Hub references, as their registry
		}
		if first, dup := seen[key]; dup {
			errs = append(errs, field.Duplicate(entry.Child("registry"), e.Registry+" (also entry "+strconv.Itoa(first)+")"))
		} else {
			seen[key] = i
		}
		sources := len(e.Mirrors)
		if !e.AirGapped {
			sources++
		}
		switch {
		case len(e.Mirrors) == 0 && e.AirGapped:
			errs = append(errs, field.Required(entry.Child("mirrors"), "airGapped with no mirror leaves nothing to read the registry's images from: list a mirror, or set airGapped: false"))
		case sources > MaxImageSources:
			errs = append(errs, field.TooMany(entry.Child("mirrors"), len(e.Mirrors), MaxImageSources-btoi(!e.AirGapped)))
		}
		names := map[string]bool{}
		for j, m := range e.Mirrors {
			mat := entry.Child("mirrors").Index(j)
			if msg := registryHost(m.Host); msg != "" {
				errs = append(errs, field.Invalid(mat.Child("host"), m.Host, msg))
			}
			if m.RepositoryPrefix != "" {
				if len(m.RepositoryPrefix) > 128 || slices.ContainsFunc(strings.Split(m.RepositoryPrefix, "/"), func(c string) bool { return !repositoryComponent.MatchString(c) }) {
					errs = append(errs, field.Invalid(mat.Child("repositoryPrefix"), m.RepositoryPrefix, "a repository path such as mcr-proxy or mirrors/mcr: lower-case components of letters and digits separated by ., _, __ or -, joined by /, at most 128 characters"))
				}
			}
			for k, c := range m.Capabilities {
				if c != CapabilityPull && c != CapabilityResolve {
					errs = append(errs, field.NotSupported(mat.Child("capabilities").Index(k), c, []string{CapabilityPull, CapabilityResolve}))
				} else if slices.Index(m.Capabilities, c) != k {
					errs = append(errs, field.Duplicate(mat.Child("capabilities").Index(k), c))
				}
			}
			if names[strings.ToLower(m.Name())] {
				errs = append(errs, field.Duplicate(mat, m.Name()))
			}
			names[strings.ToLower(m.Name())] = true
		}
	}
	return errs
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
