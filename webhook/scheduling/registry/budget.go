package registry

import (
	"context"
	"errors"
	"sync"

	"github.com/wincompat/wincompat/webhook/bytebudget"
)

// Whoever creates pods chooses how many distinct images, and which registries, wincompat reads. What a
// registry can hold of wincompat is bounded twice: by lookups in flight (each a goroutine and its
// connections) and by bytes of responses being read; each bound has a share per registry, so that
// one slow or hostile registry cannot take what every other registry's lookups need.

// errBusy marks a lookup not done, or cut short, by wincompat's own bounds: it says nothing of the
// image, so it is never remembered, and the policy does not take it for an answer.
var errBusy = errors.New("too many registry lookups in flight")

// slots bounds lookups in flight, in all and per registry. A lookup that finds none free waits for
// one, within the review's deadline, but only so many wait: past that, the answer is busy at once.
type slots struct {
	mu      sync.Mutex
	max     int
	perHost int
	inUse   int
	byHost  map[string]int
	waiting int
	// freed is closed, and replaced, whenever a slot is released.
	freed chan struct{}
}

func newSlots(max, perHost int) *slots {
	return &slots{max: max, perHost: perHost, byHost: map[string]int{}, freed: make(chan struct{})}
}

// acquire takes a slot for a lookup of host, waiting until ctx ends; false when it got none. waiting
// is called once if it has to wait.
func (s *slots) acquire(ctx context.Context, host string, waiting func()) bool {
	s.mu.Lock()
	waited := false
	defer func() {
		if waited {
			s.waiting--
		}
		s.mu.Unlock()
	}()
	for {
		if s.inUse < s.max && s.byHost[host] < s.perHost {
			s.inUse++
			s.byHost[host]++
			return true
		}
		if !waited {
			// Waiting lookups are goroutines too: as many may wait as may run.
			if s.waiting >= s.max {
				return false
			}
			s.waiting++
			waited = true
			waiting()
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-freed:
			s.mu.Lock()
		case <-ctx.Done():
			s.mu.Lock()
			return false
		}
	}
}

func (s *slots) release(host string) {
	s.mu.Lock()
	s.inUse--
	if s.byHost[host]--; s.byHost[host] == 0 {
		delete(s.byHost, host)
	}
	close(s.freed)
	s.freed = make(chan struct{})
	s.mu.Unlock()
}

// account is one lookup's claim on the byte budget, carried to the transport by the request context:
// its registry, whatever host a redirect leads to. A response takes its bytes as they arrive and gives
// them back when it is closed; a response that cannot take more ends the lookup with errBusy at once.
type account struct {
	budget *bytebudget.Budget
	host   string
}

type accountKey struct{}

func withAccount(ctx context.Context, a *account) context.Context {
	return context.WithValue(ctx, accountKey{}, a)
}

// reservationOf is an empty reservation of the lookup's account in ctx; with none, it bounds nothing.
func reservationOf(ctx context.Context) *bytebudget.Reservation {
	a, _ := ctx.Value(accountKey{}).(*account)
	if a == nil {
		return &bytebudget.Reservation{}
	}
	return a.budget.Reserve(a.host)
}
