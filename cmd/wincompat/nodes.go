package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wincompat/wincompat/webhook/scheduling/inventory"
	"github.com/wincompat/wincompat/webhook/termsafe"
)

const nodesUsage = `Usage: wincompat nodes [flags]

Prints the cluster's Windows builds: node counts (ready/total), architectures, taints, and the
RuntimeClass the policy's catalog names for each build (managed by wincompat, unmanaged, or missing).
"(tolerated)" marks the taints Windows pods get a toleration for: the policy's windowsNodeTaints, and
operating-system taints such as node.kubernetes.io/os=windows found on Windows nodes, ready or joining. Then lists what
needs attention: Windows nodes with no operating-system taint (pods that choose no OS may land there;
see wincompat.io/default-os=linux) or without a windows-build label, builds with nodes but no
RuntimeClass, RuntimeClasses whose build has no node.

Flags:
`

func runNodes(args []string, stdout, stderr io.Writer) int {
	fl := newFlagSet("nodes", nodesUsage, stderr)
	kubeconfig := fl.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	policyFile := fl.String("policy", "", "policy file whose catalog and taints to compare against (default: built-in)")
	if code, done := parseFlags(fl, args, stderr); done {
		return code
	}
	pol, err := loadPolicy(*policyFile)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat nodes: %v\n", err)
		return 1
	}
	c, err := newClient(*kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat nodes: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, findings, err := inventory.Report(ctx, c, pol)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat nodes: %v (check the kubeconfig and that you may list nodes and runtimeclasses)\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BUILD\tNAMES\tNODES (READY/ALL)\tARCH\tTAINTS\tRUNTIMECLASS")
	for _, r := range rows {
		class := "-"
		if r.RuntimeClass != "" {
			class = r.RuntimeClass + " (" + r.ClassState + ")"
		}
		// Nodes' labels and taints are validated, but by whoever runs the API server: escaped all the same.
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", termsafe.String(r.Build), termsafe.String(dash(r.Names)), r.Ready, r.Nodes,
			termsafe.String(dash(strings.Join(r.Archs, ","))), termsafe.String(dash(strings.Join(r.Taints, ","))), termsafe.String(class))
	}
	_ = tw.Flush()
	if len(findings) > 0 {
		fmt.Fprintln(stdout, "\nNeeds attention:")
		for _, f := range findings {
			fmt.Fprintln(stdout, "  - "+termsafe.String(f))
		}
	}
	return 0
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
