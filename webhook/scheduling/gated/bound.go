package gated

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The bound is counted from the pod's creation, which the API server stamps: a leader that takes over
// after a failover, or starts late, keeps the bound the pod was created with, and ungates an overdue
// pod at once.
func age(pod *corev1.Pod, now time.Time) time.Duration {
	return max(now.Sub(pod.CreationTimestamp.Time), 0)
}

// Backoff between reads of a gated pod's images: each read waits at most the resolver's admission
// budget, and its lookup goes on in the background, so the next read usually finds the answer
// cached. Young pods are read again soon (a registry a few seconds slow answers a few seconds late);
// older ones less often, never later than the bound.
const (
	minRetry = time.Second
	maxRetry = 15 * time.Second
)

// retryAfter is when a pod of this age, whose images are still pending, is read again: a quarter of
// its age within [minRetry, maxRetry], and never past the bound (left is what remains of it).
func retryAfter(age, left time.Duration) time.Duration {
	d := min(max(age/4, minRetry), maxRetry)
	return max(min(d, left), 0)
}
