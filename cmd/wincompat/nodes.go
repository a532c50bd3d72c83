package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/webhook/scheduling/inventory"
	"github.com/wincompat/wincompat/webhook/termsafe"
)

const nodesUsage = `Usage: wincompat nodes [-o table|json|yaml] [--policy FILE] [kubectl's flags: --context, --as, ...]

Prints the cluster's Windows builds: node counts (ready/total), architectures, taints, and the
RuntimeClass the policy's catalog names for each build (managed by wincompat, unmanaged, or missing).
"(tolerated)" marks the taints Windows pods get a toleration for: the policy's windowsNodeTaints, and
operating-system taints such as node.kubernetes.io/os=windows found on Windows nodes, ready or joining. Then lists what
needs attention: Windows nodes with no operating-system taint (pods that choose no OS may land there;
see wincompat.io/default-os=linux) or without a windows-build label, builds with nodes but no
RuntimeClass, RuntimeClasses whose build has no node.

Flags:
`

func newNodesCommand(stdout, stderr io.Writer) *cobra.Command {
	var policyFile, output string
	var kube *kubeFlags
	cmd := newCommand("nodes", nodesUsage, func(*cobra.Command) int {
		return runNodes(kube, policyFile, output, stdout, stderr)
	})
	cmd.Flags().StringVar(&policyFile, "policy", "", "policy file whose catalog and taints to compare against (default: built-in)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml (the shape is in cmd/wincompat/README.md)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagFilename("policy", "yaml", "yml")
	kube = addKubeFlags(cmd, true)
	return cmd
}

func runNodes(kube *kubeFlags, policyFile, output string, stdout, stderr io.Writer) int {
	if !slices.Contains([]string{"table", "json", "yaml"}, output) {
		fmt.Fprintf(stderr, "wincompat nodes: -o %q: use table, json or yaml\n", output)
		return 2
	}
	pol, err := loadPolicy(policyFile)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat nodes: %v\n", err)
		return 1
	}
	c, err := kube.newClient()
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
	if output != "table" {
		if err := writeNodesData(stdout, output, rows, findings); err != nil {
			fmt.Fprintf(stderr, "wincompat nodes: %v\n", err)
			return 1
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BUILD\tNAMES\tNODES (READY/ALL)\tARCH\tTAINTS\tRUNTIMECLASS")
	for _, r := range rows {
		class := "-"
		if r.RuntimeClass != "" {
			class = r.RuntimeClass + " (" + r.ClassState + ")"
		}
		// Nodes' labels and taints are validated, but by whoever runs the API server: escaped all the same.
		taints := make([]string, len(r.Taints))
		for i, t := range r.Taints {
			taints[i] = t.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", termsafe.String(r.Build), termsafe.String(dash(strings.Join(r.Names, ","))), r.Ready, r.Nodes,
			termsafe.String(dash(strings.Join(r.Archs, ","))), termsafe.String(dash(strings.Join(taints, ","))), termsafe.String(class))
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

// nodesReport is what nodes -o json and -o yaml print; cmd/wincompat/README.md documents it. Fields
// are only ever added.
type nodesReport struct {
	Builds         []nodesBuild `json:"builds"`
	NeedsAttention []string     `json:"needsAttention"`
}

type nodesBuild struct {
	Build         string                `json:"build"`
	Names         []string              `json:"names"`
	Nodes         int                   `json:"nodes"`
	Ready         int                   `json:"ready"`
	Architectures []string              `json:"architectures"`
	Taints        []inventory.NodeTaint `json:"taints"`
	RuntimeClass  *runtimeClass         `json:"runtimeClass"`
}

type runtimeClass struct {
	Name  string `json:"name"`
	State string `json:"state"`
}

func writeNodesData(w io.Writer, output string, rows []inventory.BuildRow, findings []string) error {
	rep := nodesReport{Builds: []nodesBuild{}, NeedsAttention: findings}
	if rep.NeedsAttention == nil {
		rep.NeedsAttention = []string{}
	}
	for _, r := range rows {
		// Empty lists, not null, for scripts that iterate them.
		b := nodesBuild{Build: r.Build, Names: nonNil(r.Names), Nodes: r.Nodes, Ready: r.Ready,
			Architectures: nonNil(r.Archs), Taints: nonNil(r.Taints)}
		if r.RuntimeClass != "" {
			b.RuntimeClass = &runtimeClass{Name: r.RuntimeClass, State: r.ClassState}
		}
		rep.Builds = append(rep.Builds, b)
	}
	if output == "yaml" {
		data, err := sigsyaml.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "    ")
	return enc.Encode(rep)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
