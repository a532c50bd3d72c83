package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/wincompat/wincompat/webhook/audit"
)

const auditUsage = `Usage: wincompat audit [-n NAMESPACE | -A] [-l SELECTOR] [-o table|json|csv] [--view VIEW]
       wincompat audit --audit-log FILE [-o table|json|csv]

Reports what wincompat changed, read from the annotations it leaves on Pods and the pod templates of
the eight workload kinds, page by page (it works on clusters with 100,000 pods; progress goes to stderr
when it takes more than a second). Also installed as the kubectl plugin kubectl-wincompat:
"kubectl wincompat audit".

Views: summary (default: per namespace, per change, findings), namespaces, changes, objects (one row per
Windows pod or changed workload), findings (Windows pods wincompat never saw and why, pods on a node of
another build than chosen, pods Pending because no ready node has their build, namespaces with Windows
pods but no label, annotations that do not parse). -o json prints every view; -o csv one view.

With --audit-log, summarises wincompat's auditAnnotations (changes, build) from an API server audit log
file (JSON lines, --audit-log-path) instead of reading the cluster.

Exit status: 0 complete; 1 nothing could be read (unreachable cluster, bad kubeconfig, no such
namespace); 2 usage error; 3 partial: some namespaces or kinds could not be read (listed under
INCOMPLETE), the rest of the report stands.

Flags:
`

func runAudit(args []string, stdout, stderr io.Writer) int {
	fl := newFlagSet("audit", auditUsage, stderr)
	kubeconfig := fl.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	var namespaces listFlag
	fl.Var(&namespaces, "n", "namespace to read; repeatable (default: all)")
	fl.Var(&namespaces, "namespace", "same as -n")
	fl.Bool("A", false, "all namespaces (the default; for kubectl habits)")
	selector := fl.String("l", "", "label selector for Pods and workloads, e.g. app=web")
	output := fl.String("o", "table", "table, json or csv")
	view := fl.String("view", audit.ViewSummary, "what to print: "+strings.Join(audit.Views, ", "))
	pageSize := fl.Int64("page-size", 500, "objects per list request")
	auditLog := fl.String("audit-log", "", "summarise wincompat's annotations in this API server audit log instead of reading the cluster")
	timeout := fl.Duration("timeout", 10*time.Minute, "give up after this long")
	if code, done := parseFlags(fl, args, stderr); done {
		return code
	}
	if !slices.Contains([]string{"table", "json", "csv"}, *output) {
		fmt.Fprintf(stderr, "wincompat audit: -o %q: use table, json or csv\n", *output)
		return 2
	}
	if !slices.Contains(audit.Views, *view) {
		fmt.Fprintf(stderr, "wincompat audit: --view %q: use one of %s\n", *view, strings.Join(audit.Views, ", "))
		return 2
	}
	if *output == "csv" && *view == audit.ViewSummary {
		*view = audit.ViewChanges
	}
	if *auditLog != "" {
		return auditFromLog(*auditLog, *output, stdout, stderr)
	}
	sel, err := labels.Parse(*selector)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: -l %q: %v\n", *selector, err)
		return 2
	}
	c, err := newClient(*kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	rep, err := audit.Run(ctx, c, audit.Options{
		Namespaces: namespaces, Selector: sel, PageSize: *pageSize,
		Objects: *view == audit.ViewObjects || *output == "json", Progress: stderr,
	})
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
		return 1
	}
	switch *output {
	case "json":
		err = rep.WriteJSON(stdout)
	case "csv":
		err = rep.WriteCSV(stdout, *view)
	default:
		err = rep.WriteTable(stdout, *view)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
		return 1
	}
	for _, s := range rep.Notes {
		fmt.Fprintf(stderr, "wincompat audit: note: %s\n", s)
	}
	if len(rep.Incomplete) > 0 {
		for _, s := range rep.Incomplete {
			fmt.Fprintf(stderr, "wincompat audit: incomplete: %s\n", s)
		}
		return 3
	}
	return 0
}

func auditFromLog(path, output string, stdout, stderr io.Writer) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
		return 1
	}
	defer f.Close()
	rep, err := audit.SummariseLog(f)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
		return 1
	}
	switch output {
	case "json":
		err = rep.WriteJSON(stdout)
	case "csv":
		err = rep.WriteCSV(stdout)
	default:
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
		return 1
	}
	return 0
}
