package bytebudget

import (
	"sync"
	"testing"
)

// One key holds at most its share; another key still gets the rest; a refusal takes nothing.
func TestShares(t *testing.T) {
	b := NewShared(100, 60)
	a1, a2, bb, c := b.Reserve("a"), b.Reserve("a"), b.Reserve("b"), b.Reserve("c")
	if !a1.Grow(60) || a2.Grow(1) || !bb.Grow(40) || c.Grow(1) {
		t.Fatalf("shares: %+v", b)
	}
	if a2.Held() != 0 || c.Held() != 0 || b.Held() != 100 || b.HeldBy("a") != 60 {
		t.Errorf("a refused reservation took something: a2 %d, c %d, held %d, by a %d", a2.Held(), c.Held(), b.Held(), b.HeldBy("a"))
	}
	a1.Release()
	bb.Release()
	if b.Held() != 0 || len(b.byKey) != 0 {
		t.Errorf("after Release: %d held, by key %v", b.Held(), b.byKey)
	}
	if b.Peak() != 100 {
		t.Errorf("peak %d, want 100", b.Peak())
	}
}

// A reservation grows to what it needs, gives back all but what it keeps, and never holds more than
// the budget: past it, it fails at once and keeps what it had.
func TestReservation(t *testing.T) {
	b := New(1 << 10)
	r := b.Reserve("")
	if !r.Grow(100) || !r.GrowTo(50) || r.Held() != 100 || !r.GrowTo(600) || r.Held() != 600 {
		t.Fatalf("grew to %d", r.Held())
	}
	if r.GrowTo(1<<10+1) || r.Held() != 600 || b.Held() != 600 {
		t.Errorf("over the budget: holds %d, budget holds %d", r.Held(), b.Held())
	}
	r.ShrinkTo(200)
	if r.Held() != 200 || b.Held() != 200 {
		t.Errorf("after ShrinkTo(200): holds %d, budget holds %d", r.Held(), b.Held())
	}
	r.Release()
	if r.Held() != 0 || b.Held() != 0 {
		t.Errorf("after Release: holds %d, budget holds %d", r.Held(), b.Held())
	}
	if New(10).Reserve("").Grow(11) {
		t.Error("a holder needing more than all of the budget was let through")
	}
}

// No budget bounds nothing.
func TestNoBudget(t *testing.T) {
	var none *Budget
	for _, r := range []*Reservation{{}, none.Reserve("x")} {
		if !r.Grow(1<<40) || !r.GrowTo(1<<41) {
			t.Error("a reservation of no budget was refused")
		}
		r.ShrinkTo(0)
		r.Release()
	}
}

// Holders racing for the budget never take more than it has, and give it all back.
func TestConcurrent(t *testing.T) {
	b := NewShared(1000, 400)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := b.Reserve(string(rune('a' + i%4)))
			for n := range 200 {
				r.GrowTo(int64(n % 150))
				r.ShrinkTo(int64(n % 7))
			}
			r.Release()
		}()
	}
	wg.Wait()
	if b.Peak() > b.Size() || b.Held() != 0 || len(b.byKey) != 0 {
		t.Errorf("peak %d of %d, %d still held, by key %v", b.Peak(), b.Size(), b.Held(), b.byKey)
	}
}
