package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/audit"
	"github.com/wincompat/wincompat/webhook/termsafe"
)

const auditUsage = `Usage: wincompat audit [-n NAMESPACE | -A] [-l SELECTOR] [-o table|json|csv] [--view VIEW]
                      [--builds BUILD[,BUILD...]] [--resolve-images] [--policy FILE]
                      [kubectl's flags: --context, --as, --request-timeout, ...]
       wincompat audit --audit-log FILE [-o table|json|csv]

Reports what wincompat changed, read from the annotations it leaves on Pods and the pod templates of
the eight workload kinds, page by page (it works on clusters with 100,000 pods; progress goes to stderr
when it takes more than a second). Also installed as the kubectl plugin kubectl-wincompat:
"kubectl wincompat audit".

Views: summary (default: per namespace, per change, findings), namespaces, changes, objects (one row per
Windows pod or changed workload), findings (Windows pods wincompat never saw and why, pods on a node
that cannot run them, pods whose image is of a newer revision than their node's (with --resolve-images),
pods Pending because no ready node has their build, pods and templates pinned to
builds their images cannot run on, images with no Windows entry, the run-time readiness warnings
admission recorded (run-time-<rule>, one kind per rule: run-time-memory-no-limit, run-time-subpath, ...;
one finding per object and rule), namespaces with Windows pods but no label, annotations that do not
parse, and the cluster side of Windows pods: claims whose volumes no Windows node can mount, Services
in front of them with externalTrafficPolicy Local, IPv6 single-stack, ClientIP affinity or more than 64
backends). -o json prints every view; -o csv one view. Services,
PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and EndpointSlices are listed as
the Windows pods need them; -l does not filter Services.

Migration planning: --builds 10.0.26100 (or ltsc2025, 2025; several comma-separated) asks "if the
cluster's Windows nodes ran only these builds, which Windows pods and workloads could no longer run, and
why?" Each Windows pod and pod template is judged by its build pins (nodeSelector, required node
affinity, its RuntimeClass's) and its images, under the policy's compatibility rule (a 2025 node runs
2022 images): those that could run on none are findings (cannot-run-on-builds), and a BUILD CHECK section
counts them by reason, and how many of them Hyper-V isolation would keep running (images of older
builds; with the cluster's RuntimeClass of handler runhcs-wcow-hypervisor, named in the findings, else
one it could add). Pins wincompat derived from the images or the cluster do not count against a
pod: its replacement would be decided again.

Images are judged by their tags (servercore:ltsc2019) unless --resolve-images: then each distinct image
is read once from its registry (its manifest, and config for single-platform images; never layers) with
your docker credentials (~/.docker/config.json and helpers, as crane and docker use). Images with no
Windows entry are found either way in pods whose admission recorded it; --resolve-images also finds them
in templates and in pods admitted before the image changed. Off by default, so an audit reads only the
cluster. The references are whatever the cluster's pod authors wrote, so the registries are read with
your docker credentials (which go only to the hosts you logged in to), no cloud identity unless
--image-cloud-credentials names one, and on public addresses only unless --image-allow-private-networks.

With --audit-log, summarises wincompat's auditAnnotations (changes, build) from an API server audit log
file (JSON lines, --audit-log-path) instead of reading the cluster.

Exit status: 0 complete; 1 nothing could be read (unreachable cluster, bad kubeconfig or policy file,
no such namespace); 2 usage error (an unknown build in --builds, say); 3 partial: some namespaces or
kinds could not be read (listed under INCOMPLETE), the rest of the report stands.

Flags:
`

func newAuditCommand(stdout, stderr io.Writer) *cobra.Command {
	var a auditFlags
	cmd := newCommand("audit", auditUsage, func(c *cobra.Command) int {
		a.buildsSet = c.Flags().Changed("builds")
		return runAudit(&a, stdout, stderr)
	})
	fl := cmd.Flags()
	// Repeatable, and all namespaces when not given, unlike kubectl's -n: an audit is of the cluster.
	fl.StringArrayVarP(&a.namespaces, "namespace", "n", nil, "namespace to read; repeatable (default: all, whatever the kubeconfig context's namespace)")
	fl.BoolP("all-namespaces", "A", false, "all namespaces (the default; for kubectl habits)")
	fl.StringVarP(&a.selector, "selector", "l", "", "label selector for Pods and workloads, e.g. app=web")
	fl.StringVarP(&a.output, "output", "o", "table", "table, json or csv")
	fl.StringVar(&a.view, "view", audit.ViewSummary, "what to print: "+strings.Join(audit.Views, ", "))
	fl.Int64Var(&a.pageSize, "page-size", 500, "objects per list request")
	fl.StringVar(&a.auditLog, "audit-log", "", "summarise wincompat's annotations in this API server audit log instead of reading the cluster")
	fl.DurationVar(&a.timeout, "timeout", 10*time.Minute, "give up after this long")
	fl.DurationVar(&a.gateTimeout, "gate-timeout", policy.DefaultGateTimeout, "the cluster's wincompat serve --gate-timeout (the chart's imageResolver.gateTimeout): gated pods older are past the bound")
	fl.StringVar(&a.builds, "builds", "", "judge every Windows pod and template against these Windows builds, comma-separated (10.0.26100, ltsc2025, 2025)")
	fl.BoolVar(&a.resolveImages, "resolve-images", false, "read images' platforms from their registries with your docker credentials (default: tags only)")
	a.imageFlags = addImageFlags(fl, cliImageFlags{}, cliCloudsUsage,
		"with --resolve-images: let registry lookups reach loopback and private networks (by default only public addresses are dialled)")
	fl.StringVar(&a.policyFile, "policy", "", "the policy file wincompat runs with (default: the built-in policy)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "csv"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("view", cobra.FixedCompletions(audit.Views, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagFilename("policy", "yaml", "yml")
	a.kube = addKubeFlags(cmd, false)
	return cmd
}

// auditFlags are audit's flags, as parsed.
type auditFlags struct {
	kube                                                 *kubeFlags
	namespaces                                           []string
	selector, output, view, auditLog, builds, policyFile string
	pageSize                                             int64
	timeout, gateTimeout                                 time.Duration
	resolveImages, buildsSet                             bool
	imageFlags                                           *cliImageFlags
}

func runAudit(a *auditFlags, stdout, stderr io.Writer) int {
	output, view, auditLog, timeout, selector := &a.output, &a.view, &a.auditLog, &a.timeout, &a.selector
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
	pol, err := loadPolicy(a.policyFile)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
		return 1
	}
	var buildList []string
	if a.buildsSet {
		if buildList, err = audit.ParseBuilds(pol, a.builds); err != nil {
			fmt.Fprintf(stderr, "wincompat audit: --builds: %v\n", err)
			return 2
		}
	}
	var resolver audit.ImageResolver
	if a.resolveImages {
		// An audit is not an admission review: it can wait for a slow registry, but not forever for one
		// that never answers.
		wait := min(*timeout, 30*time.Second)
		r, err := newCLIResolver(wait, *a.imageFlags)
		if err != nil {
			fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
			return 1
		}
		resolver = r
	}
	sel, err := labels.Parse(*selector)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: -l %q: %v\n", *selector, err)
		return 2
	}
	c, err := a.kube.newClient()
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	rep, err := audit.Run(ctx, c, audit.Options{
		Namespaces: a.namespaces, Selector: sel, PageSize: a.pageSize,
		Objects: *view == audit.ViewObjects || *output == "json", Progress: stderr,
		// The JSON is written row by row; a table's columns need every row first.
		ObjectsOnDisk: *output == "json",
		Policy:        pol, Builds: buildList, Images: resolver, GateTimeout: a.gateTimeout,
	})
	if err != nil {
		fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
		return 1
	}
	defer func() {
		if err := rep.Close(); err != nil {
			fmt.Fprintf(stderr, "wincompat audit: %v\n", err)
		}
	}()
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
		fmt.Fprintf(stderr, "wincompat audit: note: %s\n", termsafe.String(s))
	}
	if len(rep.Incomplete) > 0 {
		for _, s := range rep.Incomplete {
			fmt.Fprintf(stderr, "wincompat audit: incomplete: %s\n", termsafe.String(s))
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
