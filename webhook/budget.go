package webhook

import (
	"context"
	"fmt"
	"net/http"

	"golang.org/x/sync/semaphore"
)

// Budget bounds the memory held at once by all the reviews a server answers: their bodies as they
// arrive, then what answering them holds (Limits.DecodeFactor times the body), since whoever reaches
// the port chooses how many bodies arrive at once and how big they are.
type Budget struct {
	sem  *semaphore.Weighted
	size int64
}

// NewBudget returns a budget of size bytes. A review needing more than all of it is always refused.
func NewBudget(size int64) *Budget {
	return &Budget{sem: semaphore.NewWeighted(size), size: size}
}

// MinBudget is the smallest budget worth setting: one pod review of 3 MiB (about the largest an API
// server sends: etcd keeps objects under 1.5 MiB, and an update carries two) with what answering it holds.
const MinBudget = PodDecodeFactor * 3 << 20

type overBudgetError struct{ size int64 }

func (e *overBudgetError) Error() string {
	return fmt.Sprintf("wincompat is holding as much review memory as its bound allows (%d MiB, serve --max-review-bytes-in-flight); the API server applies the webhook's failurePolicy", e.size>>20)
}

// reservation is what one review holds of a Budget; a nil budget bounds nothing.
type reservation struct {
	budget *Budget
	held   int64
}

// grow reserves n more bytes, or fails at once: waiting would let slow peers holding part of the
// budget starve the rest.
func (r *reservation) grow(n int64) error {
	if r.budget == nil {
		return nil
	}
	if !r.budget.sem.TryAcquire(n) {
		return &overBudgetError{size: r.budget.size}
	}
	r.held += n
	return nil
}

// growTo reserves more, if need be, so that n bytes are held in all.
func (r *reservation) growTo(n int64) error {
	if n <= r.held {
		return nil
	}
	return r.grow(n - r.held)
}

// shrinkTo gives back all but n bytes.
func (r *reservation) shrinkTo(n int64) {
	if r.budget != nil && r.held > n {
		r.budget.sem.Release(r.held - n)
		r.held = n
	}
}

func (r *reservation) release() { r.shrinkTo(0) }

type callerKey struct{}

// withCaller records in ctx whether the review came over a connection whose client certificate the
// server verified (serve --client-ca-file): only then is the review known to come from the API
// server, and only then may its namespace be trusted to choose whose pull secrets are read.
func withCaller(ctx context.Context, r *http.Request) context.Context {
	return withVerifiedCaller(ctx, r.TLS != nil && len(r.TLS.VerifiedChains) > 0)
}

func withVerifiedCaller(ctx context.Context, verified bool) context.Context {
	return context.WithValue(ctx, callerKey{}, verified)
}

// callerVerified reports what withCaller recorded; false when nothing was.
func callerVerified(ctx context.Context) bool {
	v, _ := ctx.Value(callerKey{}).(bool)
	return v
}
