package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wincompat/wincompat/policy"
)

// modeResolver answers lookups with answer and caches what cached holds; it counts lookups, so that a
// test sees whether admission asked a registry at all.
type modeResolver struct {
	answer  policy.Image
	cached  map[string]policy.Image
	lookups int
}

func (r *modeResolver) Lookup(_ context.Context, req policy.ImageRequest) map[string]policy.Image {
	r.lookups++
	out := map[string]policy.Image{}
	for _, image := range req.Images {
		out[image] = r.answer
	}
	return out
}

func (r *modeResolver) Warm(req policy.ImageRequest) map[string]policy.Image { return r.Cached(req) }

func (r *modeResolver) Cached(req policy.ImageRequest) map[string]policy.Image {
	out := map[string]policy.Image{}
	for _, image := range req.Images {
		if img, ok := r.cached[image]; ok {
			out[image] = img
		}
	}
	return out
}

func TestImageModes(t *testing.T) {
	const image = "mcr.microsoft.com/windows/nanoserver:ltsc2019"
	ltsc2019 := policy.Image{Platforms: []policy.Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.17763.5830"}}}
	for _, tc := range []struct {
		name        string
		mode        string
		resolver    modeResolver
		wantGated   string // the reason counted and annotated, "" for none
		wantLookups int
	}{
		{"lookup: a registry that did not answer in time gates", ImageModeLookup, modeResolver{answer: policy.Image{Err: "unreachable", Pending: true}}, gatedTimeout, 1},
		{"lookup: wincompat's own bounds gate", ImageModeLookup, modeResolver{answer: policy.Image{Err: "busy", Busy: true, Pending: true}}, gatedBusy, 1},
		{"lookup: an answer decides", ImageModeLookup, modeResolver{answer: ltsc2019}, "", 1},
		{"gate: a miss gates, and no registry is asked", ImageModeGate, modeResolver{answer: ltsc2019}, gatedNotCached, 0},
		{"gate: the cache decides", ImageModeGate, modeResolver{cached: map[string]policy.Image{image: ltsc2019}}, "", 0},
		{"fallback: never gates", ImageModeFallback, modeResolver{answer: policy.Image{Err: "unreachable", Pending: true}}, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.resolver
			h, m := newTestHandler(t, func(c Config) *Handler {
				c.Images, c.ImageMode = &r, tc.mode
				return NewPodHandler(c)
			})
			resp := h.Handle(context.Background(), podRequest("demo", windowsPodJSON))
			if !resp.Allowed || r.lookups != tc.wantLookups {
				t.Fatalf("allowed %v, lookups %d (want %d): %v", resp.Allowed, r.lookups, tc.wantLookups, resp.Result)
			}
			gatePatched := strings.Contains(string(resp.Patch), `"/spec/schedulingGates"`)
			if gatePatched != (tc.wantGated != "") || resp.AuditAnnotations["gated"] != tc.wantGated {
				t.Errorf("gate in patch %v, audit annotation %q; want %q", gatePatched, resp.AuditAnnotations["gated"], tc.wantGated)
			}
			for _, reason := range []string{gatedTimeout, gatedBusy, gatedNotCached} {
				want := 0.0
				if reason == tc.wantGated {
					want = 1
				}
				if got := testutil.ToFloat64(m.gated.WithLabelValues(reason)); got != want {
					t.Errorf("wincompat_pods_gated_total{reason=%q} = %v, want %v", reason, got, want)
				}
			}
		})
	}
}
