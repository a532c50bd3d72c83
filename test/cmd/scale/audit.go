package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"syscall"
	"time"
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
// resident set from the kernel's rusage (Maxrss, in KiB on Linux) once it has exited.
func runAudit(ctx context.Context, bin, kubeconfig string) (auditResult, error) {
	cmd := exec.CommandContext(ctx, bin, "audit", "-A", "-o", "json", "--kubeconfig", kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := auditResult{Seconds: time.Since(start).Seconds()}
	if err != nil {
		return res, fmt.Errorf("wincompat audit: %w: %s", err, tail(stderr.String(), 2000))
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.PeakRSSMiB = float64(ru.Maxrss) / 1024
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
