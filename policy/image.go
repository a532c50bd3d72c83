package policy

import "slices"

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
