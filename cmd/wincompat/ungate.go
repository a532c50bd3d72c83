package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/wincompat/wincompat/webhook/scheduling/ungate"
)

const ungateUsage = `Usage: wincompat ungate [-n NAMESPACE | -A] [--settle DURATION] [--timeout DURATION]
                       [kubectl's flags: --context, --as, --request-timeout, ...]

Releases every pod that waits behind wincompat's scheduling gate (wincompat.io/build): removes that
gate and the label wincompat.io/gated, and records why in the pod's wincompat.io/changes. Any other gate
a pod carries stays. The pod's Windows build stays undecided: the scheduler may place it on any Windows
node its nodeSelector and affinity allow. The chart's post-delete hook runs "wincompat ungate
--all-namespaces" once helm has deleted wincompat's webhooks and admission policies; run it yourself
when wincompat went another way, or to let pods go that its leader cannot decide.

The pods not bound to a node are listed a page at a time (a gated pod never is), in passes --settle
apart, until a pass after the first finds none: an admission still in flight when the gating stopped
may store a gated pod a few seconds later. Each pod is written with a JSON patch tested against the
resourceVersion listed; one changed meanwhile is taken again by the next pass. Needs list and patch on
pods. Prints how many pods it released.

Exit status: 0 every gated pod released; 1 a list or a patch failed, or --timeout passed first.

Flags:
`

func newUngateCommand(stdout, stderr io.Writer) *cobra.Command {
	var (
		all             bool
		settle, timeout time.Duration
		pageSize        int64
	)
	var kube *kubeFlags
	cmd := newCommand("ungate", ungateUsage, func(c *cobra.Command) int {
		return runUngate(kube, all, ungate.Options{Settle: settle, PageSize: pageSize}, timeout, stdout, stderr)
	})
	fl := cmd.Flags()
	fl.BoolVarP(&all, "all-namespaces", "A", false, "release gated pods in every namespace (default: the kubeconfig context's namespace, or -n)")
	fl.DurationVar(&settle, "settle", ungate.DefaultSettle, "how long apart the passes start; more than the webhook's timeoutSeconds")
	fl.DurationVar(&timeout, "timeout", 4*time.Minute, "give up after this long")
	fl.Int64Var(&pageSize, "page-size", ungate.DefaultPageSize, "pods per list request")
	kube = addKubeFlags(cmd, true)
	return cmd
}

func runUngate(kube *kubeFlags, all bool, o ungate.Options, timeout time.Duration, stdout, stderr io.Writer) int {
	if o.Settle <= 0 || timeout <= 0 || o.PageSize <= 0 {
		fmt.Fprintf(stderr, "wincompat ungate: --settle, --timeout and --page-size must be more than 0\n")
		return 2
	}
	c, err := kube.newClient()
	if err != nil {
		fmt.Fprintf(stderr, "wincompat ungate: %v\n", err)
		return 1
	}
	if !all {
		// -n, else the context's namespace, else in a pod its own, as kubectl.
		if o.Namespace, _, err = kube.ToRawKubeConfigLoader().Namespace(); err != nil {
			fmt.Fprintf(stderr, "wincompat ungate: kubeconfig: %v\n", err)
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := ungate.Run(ctx, c, o)
	where := "in every namespace"
	if o.Namespace != "" {
		where = "in namespace " + o.Namespace
	}
	fmt.Fprintf(stdout, "released %d gated pods %s (%d passes)\n", res.Released, where, res.Passes)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat ungate: %v\n", err)
		return 1
	}
	return 0
}
