package registry

import (
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/wincompat/wincompat/policy"
)

// A lookup reads from the sources the policy's registryMirrors give the reference's registry, as
// containerd pulls with a hosts.toml (containerd docs/hosts.md, core/remotes/docker/resolver.go): the
// mirrors in order, each only for what its capabilities allow (a tag needs pull and resolve, a digest
// pull), then the registry itself unless the entry is air-gapped. Any failure of a source, "no such
// image" included, moves on to the next, as containerd does; the first answer wins.

// source is one place a lookup may read an image from.
type source struct {
	// repo is the image's repository there: on a mirror, its host and the repository (after the
	// mirror's prefix); else the reference's own.
	repo name.Repository
	// mirror is how answers name the mirror, "" for the registry the reference names: "#2", its place
	// in the registry's registryMirrors entry. Answers reach the pod's author, and the mirror's host is
	// the operator's network; mirrorName (policy.Mirror.Name, the host) is for the operator's log.
	mirror, mirrorName string
	// ns is the registry the reference names, sent to a mirror as containerd does (?ns=), so that a
	// mirror of several registries knows which one is meant.
	ns string
}

// host is the registry host dialled: what the per-registry bounds count.
func (s source) host() string { return s.repo.RegistryStr() }

// label names the source in answers: "mirror #1 of mcr.microsoft.com" or the registry's host.
func (s source) label() string {
	if s.mirror != "" {
		return "mirror " + s.mirror + " of " + s.ns
	}
	return s.repo.RegistryStr()
}

// logLabel names the source in the log: "mirror registry.internal:5000" or the registry's host.
func (s source) logLabel() string {
	if s.mirror != "" {
		return "mirror " + s.mirrorName
	}
	return s.repo.RegistryStr()
}

// router finds a reference's sources in one request's mirrors.
type router struct {
	byHost map[string]*policy.RegistryMirror
	// fallback is the _default entry, for registries without one of their own.
	fallback *policy.RegistryMirror
}

func newRouter(mirrors []policy.RegistryMirror) router {
	var rt router
	for i := range mirrors {
		e := &mirrors[i]
		if e.Registry == policy.RegistryMirrorDefault {
			rt.fallback = e
			continue
		}
		// docker.io and index.docker.io name one registry, as references do.
		reg, err := name.NewRegistry(strings.ToLower(e.Registry))
		if err != nil {
			continue // the policy validated it; a host go-containerregistry refuses matches no reference
		}
		if rt.byHost == nil {
			rt.byHost = make(map[string]*policy.RegistryMirror, len(mirrors))
		}
		if _, dup := rt.byHost[reg.RegistryStr()]; !dup {
			rt.byHost[reg.RegistryStr()] = e
		}
	}
	return rt
}

// route gives ref's sources in order, and the key that keeps what they answer apart from what other
// routes answer ("" when the registry itself is the only source, as without mirrors). No source at all
// (an air-gapped entry whose mirrors may not answer ref) gives refusal, the answer.
func (rt router) route(ref name.Reference) (sources []source, key, refusal string) {
	own := ref.Context()
	host := own.RegistryStr()
	e := rt.byHost[host]
	if e == nil {
		e = rt.fallback
	}
	if e == nil {
		return []source{{repo: own}}, "", ""
	}
	_, isTag := ref.(name.Tag)
	var names []string
	for i, m := range e.Mirrors {
		if len(sources) == policy.MaxImageSources {
			break
		}
		if !m.Can(isTag) {
			continue
		}
		reg, err := name.NewRegistry(m.Host)
		if err != nil {
			continue
		}
		path := own.RepositoryStr()
		if m.RepositoryPrefix != "" {
			path = m.RepositoryPrefix + "/" + path
		}
		sources = append(sources, source{repo: reg.Repo(path), mirror: "#" + strconv.Itoa(i+1), mirrorName: m.Name(), ns: host})
		names = append(names, m.Name())
	}
	if !e.AirGapped && len(sources) < policy.MaxImageSources {
		sources = append(sources, source{repo: own})
		names = append(names, "")
	}
	if len(sources) == 0 {
		need := "pull"
		if isTag {
			need = "pull and resolve, which reading a tag needs"
		}
		return nil, "", host + ": no mirror of it may answer (capabilities " + need + ") and it is air-gapped (policy registryMirrors)"
	}
	if len(names) == 1 && names[0] == "" {
		return sources, "", "" // only the registry itself, as without mirrors
	}
	// The mirrors and whether the registry follows: a route that changes (the policy was edited) finds
	// none of the old route's tags or errors.
	return sources, "\x00via:" + strings.Join(names, ","), ""
}

// label names every source of a lookup, in order, for an answer that none of them gave in time.
func sourcesLabel(sources []source) string {
	if len(sources) == 1 {
		return sources[0].label()
	}
	labels := make([]string, len(sources))
	for i, s := range sources {
		labels[i] = s.label()
	}
	return strings.Join(labels, ", ")
}

// sourceFailure is what one source answered a lookup that failed.
type sourceFailure struct{ label, text string }

// failedEverywhere is a lookup's answer when every source failed: the sources grouped by what they
// answered, in the order they were tried, so that a mirror and the registry failing alike read as one
// sentence: "mirror registry.internal:5000, mcr.microsoft.com: registry unreachable (...)".
func failedEverywhere(failures []sourceFailure) string {
	var texts []string
	byText := map[string][]string{}
	for _, f := range failures {
		if _, seen := byText[f.text]; !seen {
			texts = append(texts, f.text)
		}
		byText[f.text] = append(byText[f.text], f.label)
	}
	parts := make([]string, len(texts))
	for i, t := range texts {
		parts[i] = strings.Join(byText[t], ", ") + ": " + t
	}
	return strings.Join(parts, "; ")
}
