// Package load runs an operation over and over, either at a fixed rate (open loop) or as fast as a fixed
// number of workers can (closed loop), and records each latency in an HDR histogram.
//
// The open loop measures each latency from the time the operation was scheduled, not from when a
// worker got round to sending it: a slow answer delays the operations queued behind it, and that delay
// is the system's, so it is counted (no coordinated omission).
package load

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Op performs one operation on behalf of worker (0 ≤ worker < workers), so that it can use state of
// that worker's own, such as a connection. A nil error is a success.
type Op func(ctx context.Context, worker int) error

// Latencies are recorded in microseconds, from 1 µs to 1 minute, to 3 significant digits.
const (
	lowest  = 1
	highest = int64(time.Minute / time.Microsecond)
	digits  = 3
)

// NewHistogram returns an empty histogram in the unit and range this package records.
func NewHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(lowest, highest, digits) }

// Result is what one run measured.
type Result struct {
	Workers int
	// Rate is the open loop's target in operations per second; 0 for a closed loop.
	Rate float64
	// Elapsed runs from the first scheduled operation to the last completed one.
	Elapsed time.Duration
	OK      int64
	// Errors counts failed operations by error text.
	Errors map[string]int64
	// Missed counts operations the open loop had scheduled but could not start before its deadline,
	// because every worker was still busy: the system fell that far behind.
	Missed int64
	// Latency holds successful operations only, in microseconds: from the scheduled time in an open
	// loop, from the start of the operation in a closed loop.
	Latency *hdrhistogram.Histogram
	// SendLag is how late the open loop started operations after their scheduled time (timer wake-up
	// and waiting for a free worker); it is part of Latency, and tells the generator's share apart.
	SendLag *hdrhistogram.Histogram
}

// ErrorCount is the number of failed operations.
func (r *Result) ErrorCount() int64 {
	var n int64
	for _, c := range r.Errors {
		n += c
	}
	return n
}

// Throughput is successful operations per second.
func (r *Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// maxErrorKinds bounds the distinct error texts kept, so a failing run cannot grow the map without end.
const maxErrorKinds = 20

type worker struct {
	latency, lag *hdrhistogram.Histogram
	ok           int64
	errors       map[string]int64
	last         time.Time
}

func newWorker() *worker {
	return &worker{latency: NewHistogram(), lag: NewHistogram(), errors: map[string]int64{}}
}

func (w *worker) done(err error, latency time.Duration, end time.Time) {
	w.last = end
	if err != nil {
		text := err.Error()
		if _, ok := w.errors[text]; !ok && len(w.errors) >= maxErrorKinds {
			text = "(other errors)"
		}
		w.errors[text]++
		return
	}
	w.ok++
	_ = w.latency.RecordValue(max(int64(latency/time.Microsecond), lowest))
}

// Closed runs op on workers workers back to back for d, each starting its next operation as soon as
// the last one ends, and waits for the operations in flight at the end.
func Closed(ctx context.Context, workers int, d time.Duration, op Op) *Result {
	start := time.Now()
	deadline := start.Add(d)
	ws := run(workers, func(i int, w *worker) {
		for ctx.Err() == nil {
			t := time.Now()
			if !t.Before(deadline) {
				return
			}
			err := op(ctx, i)
			end := time.Now()
			w.done(err, end.Sub(t), end)
		}
	})
	return merge(ws, start, 0)
}

// Open schedules rate operations per second for d, the n-th at start + n/rate, and hands each to the
// next free worker of workers. Operations not started within grace after d are counted as Missed.
func Open(ctx context.Context, workers int, rate float64, d, grace time.Duration, op Op) *Result {
	total := int64(rate * d.Seconds())
	var next atomic.Int64
	var missed atomic.Int64
	start := time.Now()
	deadline := start.Add(d + grace)
	ws := run(workers, func(i int, w *worker) {
		for ctx.Err() == nil {
			n := next.Add(1) - 1
			if n >= total {
				return
			}
			scheduled := start.Add(time.Duration(float64(n) * float64(time.Second) / rate))
			if wait := time.Until(scheduled); wait > 0 {
				time.Sleep(wait)
			}
			t := time.Now()
			if t.After(deadline) {
				// This worker is this late, so every later operation is too: count them all missed once.
				if left := total - next.Swap(total); left > 0 {
					missed.Add(left)
				}
				missed.Add(1)
				return
			}
			_ = w.lag.RecordValue(max(int64(t.Sub(scheduled)/time.Microsecond), lowest))
			err := op(ctx, i)
			end := time.Now()
			w.done(err, end.Sub(scheduled), end)
		}
	})
	r := merge(ws, start, rate)
	r.Missed = missed.Load()
	return r
}

func run(workers int, body func(i int, w *worker)) []*worker {
	ws := make([]*worker, workers)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = newWorker()
		wg.Go(func() { body(i, ws[i]) })
	}
	wg.Wait()
	return ws
}

func merge(ws []*worker, start time.Time, rate float64) *Result {
	r := &Result{Workers: len(ws), Rate: rate, Errors: map[string]int64{}, Latency: NewHistogram(), SendLag: NewHistogram()}
	end := start
	for _, w := range ws {
		r.OK += w.ok
		for text, n := range w.errors {
			r.Errors[text] += n
		}
		r.Latency.Merge(w.latency)
		r.SendLag.Merge(w.lag)
		if w.last.After(end) {
			end = w.last
		}
	}
	r.Elapsed = end.Sub(start)
	return r
}

// Merge adds results of the same kind of run, such as alternating rounds, into one: counts and
// histograms add up, and so do the elapsed times, so Throughput is over the time actually measured.
func Merge(rs ...*Result) *Result {
	m := &Result{Errors: map[string]int64{}, Latency: NewHistogram(), SendLag: NewHistogram()}
	for _, r := range rs {
		m.Workers, m.Rate = r.Workers, r.Rate
		m.Elapsed += r.Elapsed
		m.OK += r.OK
		m.Missed += r.Missed
		for text, n := range r.Errors {
			m.Errors[text] += n
		}
		m.Latency.Merge(r.Latency)
		m.SendLag.Merge(r.SendLag)
	}
	return m
}
