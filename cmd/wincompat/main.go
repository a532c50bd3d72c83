// Command wincompat makes Windows pods admissible and schedulable in mixed Linux/Windows clusters.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// version is stamped by the Makefile and the Dockerfile (-X main.version=...).
var version = "dev"

const usage = `wincompat rewrites Windows pods and workload templates so that the API server admits them and the
scheduler places them on a Windows node of the right build, instead of rejecting them for Linux-only
fields that off-the-shelf Helm charts carry.

Usage:
  wincompat serve [flags]    serve the mutating admission webhook
  wincompat mutate [flags]   rewrite manifests offline (files, directories or stdin; Helm post-renderer)
  wincompat audit [flags]    report what wincompat changed, where, and what needs attention
  wincompat nodes [flags]    show the cluster's Windows builds, taints and RuntimeClasses, and what is missing
  wincompat policy [flags]   validate a policy file and print the effective policy
  wincompat version          print the version

Run "wincompat <command> -h" for the flags of a command.
`

func main() {
	args := os.Args[1:]
	// Installed as kubectl-wincompat, kubectl runs it as a plugin: "kubectl wincompat audit".
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") && len(args) == 0 {
		args = []string{"-h"}
	}
	os.Exit(run(args, os.Stdin, os.Stdout, os.Stderr))
}

// run returns the exit status: 0 on success, 1 when input or configuration is bad, 2 on usage errors.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:], stderr)
	case "mutate":
		return runMutate(args[1:], stdin, stdout, stderr)
	case "audit":
		return runAudit(args[1:], stdout, stderr)
	case "nodes":
		return runNodes(args[1:], stdout, stderr)
	case "policy":
		return runPolicy(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, version)
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "wincompat: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

// newFlagSet makes a command's flag set that prints usage, then the flags, to stderr.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprint(stderr, usage)
		fl.PrintDefaults()
	}
	return fl
}

// parseFlags parses args; when it returns done, the command exits with code (0 after -h, 2 on a usage
// error). No command takes positional arguments.
func parseFlags(fl *flag.FlagSet, args []string, stderr io.Writer) (code int, done bool) {
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "wincompat %s: unexpected argument %q (flags only; see -h)\n", fl.Name(), fl.Arg(0))
		return 2, true
	}
	return 0, false
}
