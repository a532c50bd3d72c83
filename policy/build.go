package policy

import (
	"regexp"
	"strings"
)

// buildNumber matches a Windows build as the node.kubernetes.io/windows-build label carries it.
var buildNumber = regexp.MustCompile(`^10\.0\.\d{5}$`)

// IsBuildNumber reports whether s is a Windows build as a node's windows-build label carries it
// (10.0.20348), and not a catalog name: what a reader of the build annotation may trust as a build.
func IsBuildNumber(s string) bool { return buildNumber.MatchString(s) }

// buildPrefix finds a build number at the start of an image tag such as 10.0.20348.2031.
var buildPrefix = regexp.MustCompile(`^10\.0\.\d{5}`)

// lookupBuild resolves a build number or any catalog name (case-insensitive) to its catalog entry.
func (p *Policy) lookupBuild(s string) (Build, bool) {
	s = strings.TrimSpace(s)
	for _, b := range p.Builds {
		if strings.EqualFold(b.Number, s) {
			return b, true
		}
		for _, n := range b.Names {
			if strings.EqualFold(n, s) {
				return b, true
			}
		}
	}
	return Build{}, false
}

// buildByRuntimeClass finds the catalog build whose RuntimeClass is name.
func (p *Policy) buildByRuntimeClass(name string) (Build, bool) {
	for _, b := range p.Builds {
		if b.RuntimeClass != "" && b.RuntimeClass == name {
			return b, true
		}
	}
	return Build{}, false
}

// buildNames lists what the build annotations accept, for messages.
func (p *Policy) buildNames() string {
	var names []string
	for _, b := range p.Builds {
		names = append(names, b.Number)
		names = append(names, b.Names...)
	}
	return strings.Join(names, ", ")
}

// BuildOfImage infers the Windows build an image was made for from its tag. A digest-only reference, or
// a tag with no build token, gives false: the digest names content, not a build we can read.
func (p *Policy) BuildOfImage(image string) (Build, bool) {
	tag := imageTag(image)
	if tag == "" {
		return Build{}, false
	}
	if n := buildPrefix.FindString(tag); n != "" {
		if b, ok := p.lookupBuild(n); ok {
			return b, true
		}
		return Build{Number: n}, true
	}
	for _, token := range strings.FieldsFunc(strings.ToLower(tag), func(r rune) bool { return r == '-' || r == '_' }) {
		for _, b := range p.Builds {
			for _, t := range b.ImageTags {
				if strings.EqualFold(t, token) {
					return b, true
				}
			}
		}
	}
	return Build{}, false
}

// imageTag returns the tag of an image reference ("" when there is none). The tag follows the last ':'
// after the last '/', so a registry port (host:5000/app) is not mistaken for one.
func imageTag(image string) string {
	if at := strings.IndexByte(image, '@'); at >= 0 {
		image = image[:at]
	}
	slash := strings.LastIndexByte(image, '/')
	colon := strings.LastIndexByte(image, ':')
	if colon <= slash {
		return ""
	}
	return image[colon+1:]
}
