package policy

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Image is what a registry says of one container image, as the image resolver read it: the platform of
// every entry of its index, or of the single image. The policy never reads a registry itself; the
// server (and `wincompat mutate --resolve-images`) fill Facts.Images before Decide.
type Image struct {
	// Digest is the manifest digest the reference resolved to, for messages and audit.
	Digest string
	// Platforms are the image's entries: every manifest of an index (nested indexes flattened), or the
	// one platform of a single-platform image (from its config).
	Platforms []Platform
	// Err says why the registry gave no answer (timeout, unreachable, unauthorized, malformed manifest).
	// The decision then falls back to the other build sources and records Err in its warning.
	Err string
	// Busy says the registry was not asked, or not to the end, because wincompat's own bounds on
	// registry lookups were reached: the image may be anything. Err says so too. The policy's
	// imagesWithoutWindows: deny then refuses the pod with a message to retry, rather than admit an
	// image it could not check.
	Busy bool
	// Pending says the answer may still come: the registry did not answer within the admission budget
	// (its lookup goes on), wincompat's bounds held the lookup back (Busy), or admission reads only the
	// cache (imageResolver.mode: gate) and it held none. Where gating is on (Facts.Gate), a pod with a
	// pending image waits behind SchedulingGate rather than take a fallback build (build_gate.go).
	Pending bool
	// Mirror is the mirror that answered, by its place in the registry's RegistryMirror ("#2": its
	// host is the operator's network, and the pod's author reads this), and MirrorFor the registry
	// the reference names; both "" when that registry answered itself.
	Mirror    string
	MirrorFor string
}

// Platform is one entry of an image.
type Platform struct {
	OS           string
	Architecture string
	// OSVersion is the entry's os.version, e.g. 10.0.17763.5830; empty when the image does not say, and
	// then the entry runs on any Windows build, as containerd treats it.
	OSVersion string
	// OSFeatures are the entry's os.features, sorted: what the host must offer (win32k, which
	// containerd ignores, aside). nil when it names none.
	OSFeatures []string
}

// Equal compares two entries, features included.
func (pl Platform) Equal(o Platform) bool {
	return pl.OS == o.OS && pl.Architecture == o.Architecture && pl.OSVersion == o.OSVersion && slices.Equal(pl.OSFeatures, o.OSFeatures)
}

// containerImage is what one container's image tells about the node builds that can run it.
type containerImage struct {
	at    containerAt
	image string
	// source is SourceImageManifest when the registry answered, SourceImage when only the tag names a
	// build, "" when nothing is known.
	source string
	// entries are its Windows entries (of the policy's architecture): os.version ("" when it names
	// none) and os.features. From a tag, the one entry of the build it names.
	entries []Platform
	// platforms are every entry, for messages: windows/amd64:10.0.17763.5830, linux/arm64.
	platforms []string
	// lookupErr says why the registry gave no answer.
	lookupErr string
	// busy: the registry was not asked because of wincompat's own bounds (Image.Busy).
	busy bool
	// pending: the answer may still come (Image.Pending).
	pending bool
	// mirror answered for registry mirrorFor (Image.Mirror), "" when the registry itself did.
	mirror, mirrorFor string
}

// constrains reports whether the image limits where the pod can run: it names builds, and no Windows
// entry of it runs anywhere.
func (ci containerImage) constrains() bool {
	return ci.source != "" && !slices.ContainsFunc(ci.entries, runsAnywhere)
}

// linuxOnly reports whether the registry says the image has no Windows entry at all.
func (ci containerImage) linuxOnly() bool {
	return ci.source == SourceImageManifest && len(ci.entries) == 0
}

func (p *Policy) runs(ci containerImage, host string) bool {
	return slices.ContainsFunc(ci.entries, p.hostRuns(host))
}

// runsAll reports whether a node of build host can run every image that limits where the pod runs.
func (p *Policy) runsAll(images []containerImage, host string) bool {
	runs := p.hostRuns(host)
	return !slices.ContainsFunc(images, func(ci containerImage) bool { return ci.constrains() && !slices.ContainsFunc(ci.entries, runs) })
}

// describe names the image and what is known of it: example.com/app:1.0 (windows/amd64:10.0.17763.5830).
func (ci containerImage) describe() string {
	if ci.source == SourceImage {
		return describedImage(ci.shown(), "tag: Windows build "+ci.entries[0].OSVersion)
	}
	return describedImage(ci.shown(), ci.platformsDescribed())
}

// platformsDescribed lists the entries the registry gave for the image.
func (ci containerImage) platformsDescribed() string {
	if len(ci.platforms) == 0 {
		return "no platform"
	}
	return strings.Join(ci.platforms, ", ")
}

// describedImage is an image followed by what is known of it, in parentheses.
func describedImage(image, known string) string { return image + " (" + known + ")" }

// owner is the container as warnings name it: containers[app].
func (ci containerImage) owner() string { return strings.TrimPrefix(ci.at.path(""), "spec.") }

// imagePath is the record path of the container's image.
func (ci containerImage) imagePath() string { return ci.at.path(".image") }

// shown is the image reference as messages give it: the pod author's string, clipped.
func (ci containerImage) shown() string { return clipName(ci.image) }

// containerImages reads what the facts and the tags say of every container and init container image.
// Ephemeral containers are added to running pods and never decide placement.
func (p *Policy) containerImages(spec *corev1.PodSpec, facts Facts) []containerImage {
	out := make([]containerImage, 0, len(spec.InitContainers)+len(spec.Containers))
	add := func(at containerAt, c *corev1.Container) {
		ci := containerImage{at: at, image: c.Image}
		img, known := facts.Images[c.Image]
		switch {
		case known && img.Err == "":
			ci.source, ci.mirror, ci.mirrorFor = SourceImageManifest, img.Mirror, img.MirrorFor
			for _, pl := range img.Platforms {
				ci.platforms = append(ci.platforms, pl.String())
				if pl.OS == string(corev1.Windows) && (p.Arch == "" || pl.Architecture == "" || pl.Architecture == p.Arch) {
					ci.entries = append(ci.entries, pl)
				}
			}
		default:
			if known {
				ci.lookupErr, ci.busy, ci.pending = img.Err, img.Busy, img.Pending
			}
			if b, ok := p.BuildOfImage(c.Image); ok {
				ci.source, ci.entries = SourceImage, []Platform{{OS: windowsOS, OSVersion: b.Number}}
			}
		}
		out = append(out, ci)
	}
	forEachPlacingContainer(spec, add)
	return out
}

// recordMirrors says, for each container whose image a mirror answered, which mirror and for which
// registry: the build decision rests on what the mirror said, and the operator chose to trust it.
func recordMirrors(images []containerImage, rec *recorder) {
	for _, ci := range images {
		if ci.mirror != "" && rec.room(RuleImageMirror) {
			rec.add(Change{Action: Warn, Path: ci.imagePath(), Reason: "read from mirror " + ci.mirror + " for " + ci.mirrorFor, Rule: RuleImageMirror})
		}
	}
}

// String renders a platform as os/architecture[:os.version][+feature...].
func (pl Platform) String() string {
	s := pl.OS + "/" + pl.Architecture
	if pl.OSVersion != "" {
		s += ":" + pl.OSVersion
	}
	for _, f := range pl.OSFeatures {
		s += "+" + f
	}
	return s
}

// ImageLookup is what the webhook should read from registries before Decide: the images of a Windows
// pod (or template) in scope. Wait is false for workload templates, whose lookups only warm the cache for
// the pods that follow.
type ImageLookup struct {
	Images      []string
	PullSecrets []string
	Wait        bool
}

// ImagesToLookUp says which images Decide will want in Facts.Images for obj; nothing when the object is
// out of scope, not Windows, a HostProcess pod, or a pod whose build an earlier pass already recorded.
// It changes nothing.
func (p *Policy) ImagesToLookUp(obj any, facts Facts) ImageLookup {
	var meta *metav1.ObjectMeta
	var spec *corev1.PodSpec
	wait := false
	if pod, ok := obj.(*corev1.Pod); ok {
		if facts.Operation != Create || pod.Annotations[AnnotationBuildSource] != "" {
			return ImageLookup{}
		}
		meta, spec, wait = &pod.ObjectMeta, &pod.Spec, true
	} else if tpl, err := PodTemplateOf(obj); err == nil && tpl != nil {
		meta, spec = &tpl.ObjectMeta, &tpl.Spec
	} else {
		return ImageLookup{}
	}
	if p.inScope(meta, facts.Namespace) != "" || !p.IsWindows(spec, facts.Namespace) || HostProcess(spec) {
		return ImageLookup{}
	}
	var l ImageLookup
	// A map past a few dozen containers keeps a pod of thousands linear in its size.
	var listed map[string]bool
	if len(spec.InitContainers)+len(spec.Containers) > manyChanges {
		listed = map[string]bool{}
	}
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			switch {
			case c.Image == "":
			case listed != nil:
				if !listed[c.Image] {
					listed[c.Image] = true
					l.Images = append(l.Images, c.Image)
				}
			case !slices.Contains(l.Images, c.Image):
				l.Images = append(l.Images, c.Image)
			}
		}
	}
	if p.PodImagePullSecrets {
		for _, s := range spec.ImagePullSecrets {
			l.PullSecrets = append(l.PullSecrets, s.Name)
		}
	}
	l.Wait = wait
	return l
}
