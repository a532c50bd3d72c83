package registry

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wincompat/wincompat/policy"
)

// TestCacheBoundedByBytes: images with many platforms fill the platforms' cache by bytes long before
// its entry bound; the least recently used go first, and what a cache is charged never passes its
// budget.
func TestCacheBoundedByBytes(t *testing.T) {
	clk := newClock()
	c := newLRU(10000, 1<<20, clk.Now, platformsCost)
	platforms := make([]policy.Platform, maxPlatforms)
	for i := range platforms {
		platforms[i] = policy.Platform{OS: "windows", Architecture: "amd64", OSVersion: fmt.Sprintf("10.0.%d.%d", 20000+i, i)}
	}
	big := digestEntry{platforms: platforms, mirror: "registry.internal:5000"}
	per := entryOverhead + platformsCost("", big)
	for i := range 2000 {
		c.Add(fmt.Sprintf("registry.example/app@sha256:%064d", i), big, forever)
		if c.bytes > c.maxBytes {
			t.Fatalf("after %d images: %d bytes charged, over %d", i+1, c.bytes, c.maxBytes)
		}
	}
	if n, want := len(c.items), int((1<<20)/(per+80)); n > want+1 || n == 0 {
		t.Errorf("%d images kept of %d bytes each in 1 MiB, want about %d", n, per, want)
	}
	if _, ok := c.Get(fmt.Sprintf("registry.example/app@sha256:%064d", 0)); ok {
		t.Error("the least recently used image kept")
	}
	if _, ok := c.Get(fmt.Sprintf("registry.example/app@sha256:%064d", 1999)); !ok {
		t.Error("the latest image evicted")
	}
	// An entry larger than the whole cache is not kept, and evicts nothing.
	small := newLRU(10, 1000, clk.Now, stringCost)
	small.Add("a", "x", forever)
	small.Add("b", strings.Repeat("x", 2000), forever)
	if _, ok := small.Get("a"); !ok || len(small.items) != 1 {
		t.Errorf("oversized entry: %d items", len(small.items))
	}
	// Expiry.
	small.Add("c", "y", time.Second)
	clk.advance(time.Second)
	if _, ok := small.Get("c"); ok {
		t.Error("expired entry returned")
	}
}
