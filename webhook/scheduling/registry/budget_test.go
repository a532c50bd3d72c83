package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/bytebudget"
)

// TestBodyHoldsBudget: a response takes budget for the bytes it read, refuses to read past the budget
// (the lookup ends busy), and gives everything back when closed.
func TestBodyHoldsBudget(t *testing.T) {
	b := bytebudget.NewShared(64<<10, 64<<10)
	body := &limitedBody{ReadCloser: io.NopCloser(bytes.NewReader(make([]byte, 100<<10))), what: "manifest",
		held: b.Reserve("registry.example")}
	_, err := io.ReadAll(body)
	if !errors.Is(err, errBusy) {
		t.Errorf("reading 100 KiB (200 KiB weighted) within 64 KiB: %v, want errBusy", err)
	}
	if b.Peak() > b.Size() {
		t.Errorf("peak %d over the budget %d", b.Peak(), b.Size())
	}
	if b.Held() == 0 {
		t.Error("nothing held before Close")
	}
	body.Close()
	if b.Held() != 0 || b.HeldBy("registry.example") != 0 {
		t.Errorf("after Close: %d held, by the registry %d", b.Held(), b.HeldBy("registry.example"))
	}
	// One registry holds at most its share; another registry still gets the rest.
	shared := bytebudget.NewShared(100, 60)
	if !shared.Reserve("a").Grow(60) || shared.Reserve("a").Grow(1) || !shared.Reserve("b").Grow(40) || shared.Reserve("c").Grow(1) {
		t.Errorf("shares: %+v", shared)
	}
}

// bigIndex is a valid index of n bytes at least: one Windows entry and padding in an annotation.
func bigIndex(n int) []byte {
	head := fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,"manifests":[{"mediaType":%q,"digest":"sha256:%s","size":1,`+
		`"platform":{"os":"windows","architecture":"amd64","os.version":"10.0.20348.2461"}}],"annotations":{"pad":"`,
		types.OCIImageIndex, types.OCIManifestSchema1, strings.Repeat("a", 64))
	return []byte(head + strings.Repeat("x", max(0, n-len(head)-3)) + `"}}`)
}

// TestLookupsHoldAtMostTheBudget: many concurrent lookups of large manifests, held by the registry in
// the middle of their bodies, never hold more than MaxBytesInFlight between them; each is answered or
// told busy, and nothing stays held.
func TestLookupsHoldAtMostTheBudget(t *testing.T) {
	index := bigIndex(1 << 20)
	g := newGate(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			w.WriteHeader(http.StatusOK) // the ping
			return
		}
		w.Header().Set("Content-Type", string(types.OCIImageIndex))
		w.Write(index[:len(index)/2])
		w.(http.Flusher).Flush()
		g.hold(r)
		w.Write(index[len(index)/2:])
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	r := newResolver(t, Config{MaxBytesInFlight: MinBytesInFlight, MaxLookups: 16, MaxLookupsPerRegistry: 16, Timeout: time.Hour, BackgroundTimeout: time.Hour})
	var req policy.ImageRequest
	for i := range 12 {
		req.Images = append(req.Images, fmt.Sprintf("%s/app:%d", host, i))
	}
	done := make(chan map[string]policy.Image)
	go func() { done <- r.Lookup(context.Background(), req) }()
	// Each request sent half its body and waits: 12 × 512 KiB, 12 MiB weighted, against 8 MiB. Some
	// lookups may end busy before their request arrives here, so wait for any.
	<-g.arrived
	g.open()
	got := <-done
	answered, busy := 0, 0
	for image, img := range got {
		switch {
		case img.Busy:
			busy++
		case img.Err == "" && samePlatforms(img.Platforms, []policy.Platform{ltsc2022}):
			answered++
		default:
			t.Errorf("%s: %+v", image, img)
		}
	}
	peak, size := r.bytes.Peak(), r.bytes.Size()
	t.Logf("%d answered, %d busy; peak %d bytes held of %d", answered, busy, peak, size)
	if peak > size || peak == 0 {
		t.Errorf("peak %d, budget %d", peak, size)
	}
	if held := r.bytes.Held(); held != 0 {
		t.Errorf("%d bytes still held", held)
	}
}

// BenchmarkReadManifestMemory measures what reading a 4 MiB manifest holds: a valid index padded to
// 4 MiB, and a hostile one of empty entries (which a decoder into structs turns into a million of
// them). Its B/op, over the manifest's size, is what bodyWeight must cover.
func BenchmarkReadManifestMemory(b *testing.B) {
	var empty strings.Builder
	empty.WriteString(`{"manifests":[`)
	for empty.Len() < maxBody-8 {
		empty.WriteString(`{},`)
	}
	empty.WriteString(`{}]}`)
	for name, doc := range map[string][]byte{"padded index": bigIndex(maxBody), "empty entries": []byte(empty.String())} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			var peak uint64
			for b.Loop() {
				// As a lookup reads it: into a buffer that grows as the body arrives, then decoded.
				peak = max(peak, heapDuring(func() {
					raw, _ := readBody(&http.Response{Body: io.NopCloser(bytes.NewReader(doc)), ContentLength: int64(len(doc))})
					platformsFromManifest(string(types.OCIImageIndex), raw)
				}))
			}
			b.ReportMetric(float64(peak)/float64(len(doc)), "peak-heap/byte")
		})
	}
}

// heapDuring samples the live heap while f runs and returns its growth at the peak.
func heapDuring(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var s runtime.MemStats
		for {
			select {
			case <-stop:
				return
			default:
			}
			runtime.ReadMemStats(&s)
			if s.HeapAlloc > base && s.HeapAlloc-base > peak.Load() {
				peak.Store(s.HeapAlloc - base)
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
	f()
	close(stop)
	wg.Wait()
	return peak.Load()
}

// BenchmarkConcurrentLookupMemory is issue 24's measure: 64 lookups at once of 4 MiB indexes from a
// registry on loopback, with the default bounds. It reports the peak growth of the live heap and how
// many lookups were answered or told busy.
func BenchmarkConcurrentLookupMemory(b *testing.B) {
	index := bigIndex(maxBody)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", string(types.OCIImageIndex))
		w.Write(index)
	}))
	b.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	for b.Loop() {
		r := newResolver(b, Config{})
		var req policy.ImageRequest
		for i := range 64 {
			req.Images = append(req.Images, fmt.Sprintf("%s/app:%d", host, i))
		}
		var got map[string]policy.Image
		peak := heapDuring(func() { got = r.Lookup(context.Background(), req) })
		answered, busy := 0, 0
		for _, img := range got {
			if img.Busy {
				busy++
			} else if img.Err == "" {
				answered++
			}
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(answered), "answered")
		b.ReportMetric(float64(busy), "busy")
		b.ReportMetric(float64(r.bytes.Peak())/(1<<20), "budget-peak-MiB")
	}
}
