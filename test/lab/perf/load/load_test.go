package load

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"
)

// The runs below are short and their counts depend on the machine's speed; the tests check what holds
// at any speed: every operation is accounted for exactly once.

func TestClosedAccountsForEveryOperation(t *testing.T) {
	var calls atomic.Int64
	r := Closed(context.Background(), 4, 20*time.Millisecond, func(_ context.Context, worker int) error {
		if worker < 0 || worker >= 4 {
			t.Errorf("worker %d of 4", worker)
		}
		if calls.Add(1)%3 == 0 {
			return errors.New("every third fails")
		}
		return nil
	})
	if r.OK+r.ErrorCount() != calls.Load() || r.OK == 0 {
		t.Errorf("%d calls, %d OK, %d errors", calls.Load(), r.OK, r.ErrorCount())
	}
	if r.Latency.TotalCount() != r.OK {
		t.Errorf("%d latencies recorded for %d successful operations", r.Latency.TotalCount(), r.OK)
	}
	if r.Errors["every third fails"] != r.ErrorCount() {
		t.Errorf("errors by text: %v", r.Errors)
	}
}

func TestOpenSchedulesRateTimesDuration(t *testing.T) {
	var calls atomic.Int64
	r := Open(context.Background(), 2, 2000, 50*time.Millisecond, time.Second, func(context.Context, int) error {
		calls.Add(1)
		return nil
	})
	if got := r.OK + r.ErrorCount() + r.Missed; got != 100 {
		t.Errorf("2000/s for 50ms: %d OK + %d errors + %d missed, want 100 in all", r.OK, r.ErrorCount(), r.Missed)
	}
	if calls.Load() != r.OK {
		t.Errorf("%d calls, %d OK", calls.Load(), r.OK)
	}
	if r.SendLag.TotalCount() != r.OK {
		t.Errorf("%d send lags for %d operations", r.SendLag.TotalCount(), r.OK)
	}
}

// An operation slower than the whole schedule leaves the rest unsent: they count as missed, not lost.
func TestOpenCountsWhatItCouldNotSend(t *testing.T) {
	r := Open(context.Background(), 1, 1000, 10*time.Millisecond, time.Millisecond, func(context.Context, int) error {
		time.Sleep(50 * time.Millisecond)
		return nil
	})
	if r.OK+r.Missed != 10 || r.Missed == 0 {
		t.Errorf("%d OK, %d missed: want 10 in all, some missed", r.OK, r.Missed)
	}
}

func TestMergeAndSummarize(t *testing.T) {
	a, b := Merge(), Merge()
	for i := int64(1); i <= 1000; i++ {
		_ = a.Latency.RecordValue(i) // 1 µs to 1 ms
		_ = b.Latency.RecordValue(1000 + i)
	}
	a.OK, b.OK = 1000, 1000
	a.Elapsed, b.Elapsed = time.Second, time.Second
	b.Errors["x"] = 5
	s := Merge(a, b).Summarize()
	if s.OK != 2000 || s.Errors != 5 || s.Throughput != 1000 {
		t.Errorf("merged: %d OK, %d errors, %v/s", s.OK, s.Errors, s.Throughput)
	}
	if s.Latency.P50 < 0.99 || s.Latency.P50 > 1.01 || s.Latency.Max < 1.99 {
		t.Errorf("percentiles of 1 µs..2 ms: %+v", s.Latency)
	}
	for i := 1; i < len(s.Distribution); i++ {
		prev, p := s.Distribution[i-1], s.Distribution[i]
		if p.Percentile < prev.Percentile || p.Ms < prev.Ms {
			t.Fatalf("distribution not monotonic at %d: %+v then %+v", i, prev, p)
		}
	}
	if first := s.Distribution[0]; first.Percentile != 0 || first.Ms != 0.001 {
		t.Errorf("distribution starts at %+v, want the minimum, 1 µs", first)
	}
}

func TestReadProc(t *testing.T) {
	p, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.RSS <= 0 || p.PeakRSS < p.RSS || p.CPU < 0 || p.RSSAnon <= 0 || p.RSSAnon > p.RSS {
		t.Errorf("this process: %+v", p)
	}
	if err := ResetPeakRSS(os.Getpid()); err != nil {
		t.Errorf("resetting the peak RSS: %v", err)
	}
}

func TestMachineCPU(t *testing.T) {
	busy, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	if busy <= 0 {
		t.Errorf("the machine has been busy for %v since boot", busy)
	}
}

func TestChildren(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	children, err := Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if children["sleep"] != cmd.Process.Pid {
		t.Errorf("children %v, want sleep with pid %d", children, cmd.Process.Pid)
	}
}
