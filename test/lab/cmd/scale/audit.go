package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"time"

	"github.com/wincompat/wincompat/test/lab/perf"
)

// auditResult is one whole-cluster `wincompat audit -o json` run.
type auditResult struct {
	Seconds    float64 `json:"seconds"`
	PeakRSSMiB float64 `json:"peakRssMiB"`
	// Pods is how many Windows pods the report names: a check that it read the whole cluster.
	WindowsPods int `json:"windowsPods"`
	// Misplaced is how many misplaced findings it reports.
	Misplaced int `json:"misplaced"`
}

// runAudit runs the audit against the lab's kubeconfig, as an operator would, and reads its peak
// resident set as it runs (perf.RunPeakRSS).
func runAudit(ctx context.Context, bin, kubeconfig string) (auditResult, error) {
	cmd := exec.CommandContext(ctx, bin, "audit", "-A", "-o", "json", "--kubeconfig", kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	peak, err := perf.RunPeakRSS(cmd)
	res := auditResult{Seconds: time.Since(start).Seconds(), PeakRSSMiB: float64(peak) / (1 << 20)}
	if err != nil {
		return res, fmt.Errorf("wincompat audit: %w: %s", err, tail(stderr.String(), 2000))
	}
	var report struct {
		Namespaces []struct {
			WindowsPods int `json:"windowsPods"`
		} `json:"namespaces"`
		Findings []struct {
			Kind string `json:"kind"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		return res, fmt.Errorf("wincompat audit -o json: %w", err)
	}
	for _, ns := range report.Namespaces {
		res.WindowsPods += ns.WindowsPods
	}
	for _, f := range report.Findings {
		if f.Kind == auditMisplaced {
			res.Misplaced++
		}
	}
	return res, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
