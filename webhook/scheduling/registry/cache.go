package registry

import (
	"container/list"
	"sync"
	"time"
)

// lru is a cache bounded by entries and by bytes, with an expiry per entry. Whoever creates pods
// chooses what the resolver caches (references up to 1 KiB, images with up to 256 platforms), so a
// bound on entries alone lets the memory of a full cache grow with what they choose; the bytes an
// entry is charged are an estimate of what it holds, from its key and value.
type lru struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int64
	bytes      int64
	order      *list.List // most recently used first
	items      map[string]*list.Element
	cost       func(key string, value any) int64
	now        func() time.Time
}

type lruEntry struct {
	key     string
	value   any
	cost    int64
	expires time.Time
}

// entryOverhead is what any entry costs besides its key and value: the map slot, the list element and
// the entry itself.
const entryOverhead = 160

func newLRU(maxEntries int, maxBytes int64, now func() time.Time, cost func(string, any) int64) *lru {
	return &lru{maxEntries: maxEntries, maxBytes: maxBytes, order: list.New(), items: map[string]*list.Element{}, cost: cost, now: now}
}

func (c *lru) Get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	e := el.Value.(*lruEntry)
	if !c.now().Before(e.expires) {
		c.remove(el)
		return nil, false
	}
	c.order.MoveToFront(el)
	return e.value, true
}

func (c *lru) Add(key string, value any, ttl time.Duration) {
	cost := entryOverhead + int64(len(key)) + c.cost(key, value)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.remove(el)
	}
	if cost > c.maxBytes {
		return // larger than the whole cache: not worth evicting everything for
	}
	c.items[key] = c.order.PushFront(&lruEntry{key: key, value: value, cost: cost, expires: c.now().Add(ttl)})
	c.bytes += cost
	for c.bytes > c.maxBytes || len(c.items) > c.maxEntries {
		c.remove(c.order.Back())
	}
}

func (c *lru) remove(el *list.Element) {
	e := c.order.Remove(el).(*lruEntry)
	delete(c.items, e.key)
	c.bytes -= e.cost
}

// Costs of the resolver's caches' values, in bytes.

func platformsCost(_ string, v any) int64 {
	e := v.(digestEntry)
	ps := e.platforms
	n := int64(40 + len(e.mirror) + 48*len(ps))
	for _, p := range ps {
		n += int64(len(p.OS) + len(p.Architecture) + len(p.OSVersion))
		for _, f := range p.OSFeatures {
			n += int64(16 + len(f))
		}
	}
	return n
}

func tagCost(_ string, v any) int64 {
	e := v.(tagEntry)
	return int64(80 + len(e.digest) + len(e.key) + len(e.mirror))
}

func stringCost(_ string, v any) int64 { return int64(16 + len(v.(string))) }

// refCost: a parsed reference keeps its registry, repository, tag or digest and the original.
func refCost(key string, _ any) int64 { return int64(128 + 2*len(key)) }
