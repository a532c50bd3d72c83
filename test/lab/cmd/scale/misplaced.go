package main

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// misplacedCheck is whether the leader reported every misplaced pod: "nothing lost".
type misplacedCheck struct {
	// Labelled and Legacy are the misplaced pods the fill made, with wincompat's label and without (created
	// before wincompat was installed); the Reported counts are those with exactly one Event
	// WindowsBuildMismatch. Duplicates counts pods reported more than once.
	Labelled, LabelledReported int
	Legacy, LegacyReported     int
	Duplicates                 int
	// Gauge is wincompat_misplaced_pods on the leader, summed over causes.
	Gauge float64
	// Seconds is how long after the leader's sync the last report came (or the wait ended).
	Seconds float64
}

// ok: every misplaced pod reported once, and counted by the gauge.
func (m misplacedCheck) ok() bool {
	return m.LabelledReported == m.Labelled && m.LegacyReported == m.Legacy && m.Duplicates == 0 && int(m.Gauge) == m.Labelled+m.Legacy
}

// checkMisplaced waits up to timeout for an Event WindowsBuildMismatch about every misplaced pod and for
// the leader's gauge to count them all, then counts what it finds.
func checkMisplaced(ctx context.Context, cs kubernetes.Interface, c *cluster, leader *replica, timeout time.Duration) (misplacedCheck, error) {
	start := time.Now()
	var m misplacedCheck
	for {
		events, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", reasonMismatch).String()})
		if err != nil {
			return m, err
		}
		reports := map[string]int{}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Pod" {
				reports[e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name+"/"+string(e.InvolvedObject.UID)]++
			}
		}
		m = misplacedCheck{}
		for _, p := range c.misplacedPods {
			n := reports[p.ns+"/"+p.name+"/"+string(p.uid)]
			legacy := p.role == roleLegacyMisplaced
			if legacy {
				m.Legacy++
			} else {
				m.Labelled++
			}
			switch {
			case n == 1 && legacy:
				m.LegacyReported++
			case n == 1:
				m.LabelledReported++
			case n > 1:
				m.Duplicates++
			}
		}
		if m.Gauge, _, err = leader.gauge(ctx, "wincompat_misplaced_pods"); err != nil {
			return m, err
		}
		m.Seconds = time.Since(start).Seconds()
		if m.ok() || time.Since(start) > timeout {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
