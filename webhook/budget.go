package webhook

import (
	"fmt"

	"github.com/wincompat/wincompat/webhook/bytebudget"
)

// MinBudget is the smallest Limits.Budget worth setting: one pod review of 3 MiB (about the largest an
// API server sends: etcd keeps objects under 1.5 MiB, and an update carries two) with what answering it
// holds.
const MinBudget = PodDecodeFactor * 3 << 20

type overBudgetError struct{ size int64 }

func (e *overBudgetError) Error() string {
	return fmt.Sprintf("wincompat is holding as much review memory as its bound allows (%d MiB, serve --max-review-bytes-in-flight); the API server applies the webhook's failurePolicy", e.size>>20)
}

// overBudget is why a review that held could not grow was refused.
func overBudget(held *bytebudget.Reservation) error {
	return &overBudgetError{size: held.Budget().Size()}
}
