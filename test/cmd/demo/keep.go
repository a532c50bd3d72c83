package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"
)

// keepRunning is -keep: once the story is told, it starts wincompat serve again (the last section
// stopped every replica), writes an administrator's kubeconfig, says how to explore the cluster, and
// waits for Ctrl-C; main then stops everything as it does after the story.
func (d *demo) keepRunning(ctx context.Context) error {
	d.section("The cluster stays up (-keep): explore it, Ctrl-C stops everything")
	if d.serve == nil {
		logPath := filepath.Join(d.work, "wincompat-kept.log")
		var err error
		if d.serve, err = startProcess(d.wincompatBin, d.serveArgs, logPath); err != nil {
			return err
		}
		if err := d.poll(ctx, 30*time.Second, func() (bool, error) { return httpStatus(d.readyz) == "200 OK", nil }); err != nil {
			return fmt.Errorf("wincompat serve did not become ready again: %w", err)
		}
		d.detail("wincompat serve started again (webhook failurePolicy Ignore, as the chart sets it with engine hybrid); log %s", logPath)
	}
	if err := d.cp.WriteKubeConfig(d.kubeconfig, "demo-admin", "system:masters"); err != nil {
		return err
	}
	d.keptKubeconfig = d.kubeconfig
	_, lookErr := exec.LookPath("kubectl")
	for _, line := range exploreLines(d.rel(d.kubeconfig), d.rel(d.wincompatBin), lookErr == nil) {
		d.say("%s", line)
	}
	d.detail("wincompat serve's log: %s", d.serve.logPath)
	select {
	case <-ctx.Done():
		return nil
	case <-d.serve.exited:
		return d.serve.exitedEarly()
	}
}

// exploreLines say how to explore the kept cluster: with kubeconfig, which every command names so that
// none reaches another cluster by the user's default kubeconfig; with kubectl only when there is one.
func exploreLines(kubeconfig, wincompat string, kubectl bool) []string {
	flag := "--kubeconfig " + kubeconfig
	lines := []string{
		"an administrator's kubeconfig: " + kubeconfig + " (removed when the demo stops)",
		fmt.Sprintf("  %s nodes %s    # Windows builds, taints, RuntimeClasses", wincompat, flag),
		fmt.Sprintf("  %s audit %s    # what wincompat changed and what needs attention", wincompat, flag),
	}
	if kubectl {
		lines = append(lines,
			fmt.Sprintf("  kubectl %s get pods -A -o wide", flag),
			fmt.Sprintf("  kubectl %s -n %s run iis --image=mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", flag, demoNamespace),
			fmt.Sprintf("  kubectl %s -n %s get pod iis -o yaml    # a pod that chose no OS, made a Windows pod", flag, demoNamespace))
	} else {
		lines = append(lines, "  (no kubectl on PATH: "+wincompat+" needs none; any kubectl can use the kubeconfig)")
	}
	return append(lines, "of kube-controller-manager only the service account controller and the garbage collector run, and no kubelet:",
		"  workloads make no pods of their own, and bound pods never start")
}
