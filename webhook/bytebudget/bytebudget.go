// Package bytebudget bounds the bytes held at once by work whose size and number others choose: the
// admission reviews a server reads and answers, the registry responses its lookups read. Whoever reaches
// the port, or serves a registry, decides how many arrive at once and how big they are; a budget turns
// what would be memory without bound into a refusal.
//
// Bytes are taken without waiting: a holder that waited while holding part of what it needs could leave
// every holder holding part, waiting for the others. A refused holder gives up at once (an admission
// review answered 429, a registry lookup answered busy).
package bytebudget

import "sync"

// Budget is a number of bytes shared by holders, each under a key. A key holds at most its share, so
// that one source (a registry host) cannot take what every other needs; a budget made by New has one
// share as large as the whole. It is safe for concurrent use.
type Budget struct {
	mu    sync.Mutex
	size  int64
	share int64
	held  int64
	byKey map[string]int64
	peak  int64
}

// New returns a budget of size bytes, any key may hold all of it. A holder needing more than size is
// always refused.
func New(size int64) *Budget { return NewShared(size, size) }

// NewShared returns a budget of size bytes of which one key holds share at most.
func NewShared(size, share int64) *Budget {
	return &Budget{size: size, share: share, byKey: map[string]int64{}}
}

// Size is the bytes the budget holds at most.
func (b *Budget) Size() int64 { return b.size }

// Held is what all holders hold now.
func (b *Budget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// HeldBy is what the holders under key hold now.
func (b *Budget) HeldBy(key string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byKey[key]
}

// Peak is the most ever held at once, for tests and the operator's sizing.
func (b *Budget) Peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

func (b *Budget) tryAcquire(key string, n int64) bool {
	if n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.size || b.byKey[key]+n > b.share {
		return false
	}
	b.held += n
	b.byKey[key] += n
	b.peak = max(b.peak, b.held)
	return true
}

func (b *Budget) release(key string, n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.held -= n
	if b.byKey[key] -= n; b.byKey[key] == 0 {
		// Keys are chosen by others (registry hosts): one that holds nothing is forgotten.
		delete(b.byKey, key)
	}
	b.mu.Unlock()
}

// Reserve returns an empty reservation of b under key. A nil budget bounds nothing.
func (b *Budget) Reserve(key string) *Reservation { return &Reservation{budget: b, key: key} }

// Reservation is what one holder (a review, a response) holds of a Budget. It is not safe for
// concurrent use. The zero value, like a reservation of a nil Budget, bounds nothing and holds nothing.
type Reservation struct {
	budget *Budget
	key    string
	held   int64
}

// Budget is the budget reserved from; nil for none.
func (r *Reservation) Budget() *Budget { return r.budget }

// Held is what the reservation holds.
func (r *Reservation) Held() int64 { return r.held }

// Grow reserves n more bytes; false, and nothing more reserved, when the budget or the key's share has
// not that much left.
func (r *Reservation) Grow(n int64) bool {
	if r.budget == nil {
		return true
	}
	if !r.budget.tryAcquire(r.key, n) {
		return false
	}
	r.held += n
	return true
}

// GrowTo reserves more, if need be, so that n bytes are held in all.
func (r *Reservation) GrowTo(n int64) bool {
	if n <= r.held {
		return true
	}
	return r.Grow(n - r.held)
}

// ShrinkTo gives back all but n bytes.
func (r *Reservation) ShrinkTo(n int64) {
	if r.budget != nil && r.held > n {
		r.budget.release(r.key, r.held-n)
		r.held = n
	}
}

// Release gives back all the reservation holds.
func (r *Reservation) Release() { r.ShrinkTo(0) }
