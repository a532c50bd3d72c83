package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// ImageResolver reads what registries say of images: *registry.Resolver.
type ImageResolver interface {
	Lookup(ctx context.Context, req policy.ImageRequest) map[string]policy.Image
}

// imageFacts are what registries said of the images of Windows pods and templates, with
// --resolve-images: each distinct image is asked once per run. It reports images with no Windows entry.
type imageFacts struct {
	resolver ImageResolver // nil: images are judged by their tags alone
	pol      *policy.Policy
	out      *sink
	// answers holds what registries said of each image asked about, so each is asked once per run.
	answers      map[string]policy.Image
	lookupErrors int
	lookupFailed []string // the first few, for the note
}

func newImageFacts(resolver ImageResolver, pol *policy.Policy, out *sink) *imageFacts {
	return &imageFacts{resolver: resolver, pol: pol, out: out, answers: map[string]policy.Image{}}
}

// resolving reports whether registries are asked (--resolve-images).
func (f *imageFacts) resolving() bool { return f.resolver != nil }

// resolve asks the registries about the images of specs not asked about yet, one Lookup per page so
// that a page's lookups run together. Each distinct image is asked once per run.
func (f *imageFacts) resolve(ctx context.Context, specs []*corev1.PodSpec) {
	if f.resolver == nil {
		return
	}
	var want []string
	for _, spec := range specs {
		for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for _, c := range list {
				if _, done := f.answers[c.Image]; !done && c.Image != "" && !slices.Contains(want, c.Image) {
					want = append(want, c.Image)
				}
			}
		}
	}
	if len(want) == 0 {
		return
	}
	for image, img := range f.resolver.Lookup(ctx, policy.ImageRequest{Images: want, Mirrors: f.pol.RegistryMirrors}) {
		f.answers[image] = img
		if img.Err != "" {
			f.lookupErrors++
			if len(f.lookupFailed) < 3 {
				f.lookupFailed = append(f.lookupFailed, image+" ("+img.Err+")")
			}
		}
	}
}

// known reports whether a registry or a tag says which builds some image of spec runs on.
func (f *imageFacts) known(spec *corev1.PodSpec) bool {
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			if img, ok := f.answers[c.Image]; ok && img.Err == "" {
				return true
			}
			if _, ok := f.pol.BuildOfImage(c.Image); ok {
				return true
			}
		}
	}
	return false
}

// linuxOnly reports, on every run, a Windows pod or template with an image that has no Windows entry,
// and says whether it did: such an object runs on no Windows build, whatever it is pinned to. changes
// are what wincompat recorded on it.
func (f *imageFacts) linuxOnly(ns, obj string, spec *corev1.PodSpec, changes []policy.Change) bool {
	var linux []string
	for owner, list := range map[string][]corev1.Container{"initContainers": spec.InitContainers, "containers": spec.Containers} {
		for _, c := range list {
			// The registry's answer of this run is fresher than admission's, either way.
			if img, ok := f.answers[c.Image]; ok && img.Err == "" {
				if !f.hasWindowsEntry(img) {
					var platforms []string
					for _, pl := range img.Platforms {
						platforms = append(platforms, pl.String())
					}
					linux = append(linux, fmt.Sprintf("%s[%s]: image %s (%s) has no Windows entry", owner, c.Name, c.Image, strings.Join(platforms, ", ")))
				}
				continue
			}
			if what, ok := policy.RecordedLinuxOnly(changes, "spec."+owner+"["+c.Name+"]", c.Image); ok {
				linux = append(linux, owner+"["+c.Name+"]: image "+what)
			}
		}
	}
	if len(linux) == 0 {
		return false
	}
	slices.Sort(linux)
	f.out.finding(LinuxOnlyImage, ns, obj, strings.Join(linux, "; "))
	return true
}

// hasWindowsEntry mirrors the policy: an entry of another architecture than the policy's does not count.
func (f *imageFacts) hasWindowsEntry(img policy.Image) bool {
	return slices.ContainsFunc(img.Platforms, func(pl policy.Platform) bool {
		return pl.OS == string(corev1.Windows) && (f.pol.Arch == "" || pl.Architecture == "" || pl.Architecture == f.pol.Arch)
	})
}

// finish notes the images no registry answered for.
func (f *imageFacts) finish() {
	if f.lookupErrors > 0 {
		f.out.note(fmt.Sprintf("%d images could not be read from their registries, so their tags were used: %s",
			f.lookupErrors, strings.Join(f.lookupFailed, ", ")))
	}
}
