package webhook

import (
	"context"

	"github.com/wincompat/wincompat/policy"
)

// How admission reads what registries say of a pod's images (imageResolver.mode, --image-resolver-mode).
const (
	// ImageModeLookup reads registries within the admission budget; a pod whose images are not
	// answered in time waits behind policy.SchedulingGate for the leader to decide its build.
	ImageModeLookup = "lookup"
	// ImageModeGate reads only what the resolver has cached: the webhook port never makes wincompat
	// connect out, and every pod with an image not cached waits behind the gate.
	ImageModeGate = "gate"
	// ImageModeFallback never gates: an image not answered in time counts by its tag, and the build
	// may come from the namespace, the cluster or the policy's default.
	ImageModeFallback = "fallback"
)

// ImageModes are the modes, in the order help lists them.
var ImageModes = []string{ImageModeLookup, ImageModeGate, ImageModeFallback}

// CachedImages gives what a resolver has cached for a request, starting no lookup: the answers it has,
// and nothing for the images it has not.
type CachedImages interface {
	Cached(req policy.ImageRequest) map[string]policy.Image
}

// notCached is the answer gate mode gives an image its resolver has not cached.
const notCached = "not read at admission (imageResolver.mode: gate); the leader reads it"

// cacheOnly is a resolver for gate mode: cached answers for everyone; for a pod, an image not cached is
// pending, and the pod waits behind the gate.
type cacheOnly struct{ cache CachedImages }

func (c cacheOnly) Lookup(_ context.Context, req policy.ImageRequest) map[string]policy.Image {
	out := c.cache.Cached(req)
	if out == nil {
		out = make(map[string]policy.Image, len(req.Images))
	}
	for _, image := range req.Images {
		if _, answered := out[image]; !answered {
			out[image] = policy.Image{Err: notCached, Pending: true}
		}
	}
	return out
}

// Warm gives a workload template what is cached, and starts nothing: its pods are gated instead.
func (c cacheOnly) Warm(req policy.ImageRequest) map[string]policy.Image { return c.cache.Cached(req) }

// resolverFor is the resolver admission uses in mode: r, or in gate mode its cache alone (nil when r
// caches nothing it can give: then no image is read at all).
func resolverFor(mode string, r ImageResolver) ImageResolver {
	if mode != ImageModeGate || r == nil {
		return r
	}
	if c, ok := r.(CachedImages); ok {
		return cacheOnly{c}
	}
	return nil
}

// Why a pod was gated, the closed set of wincompat_pods_gated_total's reason label.
const (
	gatedTimeout   = "timeout"
	gatedBusy      = "busy"
	gatedNotCached = "not-cached"
)

// gateReason says why a gated pod's images were pending: wincompat's own bounds before a slow registry,
// gate mode's cache before both.
func gateReason(images map[string]policy.Image) string {
	reason := gatedTimeout
	for _, img := range images {
		switch {
		case !img.Pending:
		case img.Err == notCached:
			return gatedNotCached
		case img.Busy:
			reason = gatedBusy
		}
	}
	return reason
}
