package webhook

import (
	"context"
	"fmt"
	"net/http"

	"golang.org/x/sync/semaphore"
)

// Budget bounds the bytes of review bodies held at once by all the reviews a server answers: the
// memory a review costs grows with its body (decoded, copied, diffed), and whoever reaches the port
// chooses how many bodies arrive at once and how big they are.
type Budget struct {
	sem  *semaphore.Weighted
	size int64
}

// NewBudget returns a budget of size bytes. It must hold at least two of the largest body (7 MiB):
// a buffer that grows is copied while the old one is still held.
func NewBudget(size int64) *Budget {
	return &Budget{sem: semaphore.NewWeighted(size), size: size}
}

// MinBudget is the smallest budget that lets one review of the largest allowed body through.
const MinBudget = 2*maxReviewBytes + 1<<20

type overBudgetError struct{ size int64 }

func (e *overBudgetError) Error() string {
	return fmt.Sprintf("wincompat is holding as many review bytes as its bound allows (%d MiB, serve --max-review-bytes-in-flight); the API server applies the webhook's failurePolicy", e.size>>20)
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
