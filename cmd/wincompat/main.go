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

	"github.com/wincompat/wincompat/policy/suggest"
)

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
		unknownCommand(stderr, "wincompat", args[0], commands)
		return 2
	}
}

// commands are the names run dispatches, for suggestions.
var commands = []string{"serve", "mutate", "audit", "nodes", "policy", "version"}

// unknownCommand says so as kubectl (cobra) does: the name, the nearest command if one is near, and
// where the usage is, instead of the whole usage.
func unknownCommand(stderr io.Writer, parent, typed string, known []string) {
	fmt.Fprintf(stderr, "%s: unknown command %q\n", parent, typed)
	if name, ok := suggest.Closest(typed, known); ok {
		fmt.Fprintf(stderr, "\nDid you mean this?\n\t%s\n\n", name)
	}
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", parent)
}

// newFlagSet makes a command's flag set that prints usage, then the flags, to stderr, on -h; a usage
// error prints only itself (parseFlags).
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
// error). A usage error is said in two lines, as kubectl says it: what is wrong (with the nearest flag
// for an unknown one), and where the usage is. No command takes positional arguments.
func parseFlags(fl *flag.FlagSet, args []string, stderr io.Writer) (code int, done bool) {
	// The flag package prints the error and the whole usage itself; it is told to print nothing here.
	printUsage := fl.Usage
	fl.Usage = func() {}
	fl.SetOutput(io.Discard)
	err := fl.Parse(args)
	fl.Usage = printUsage
	fl.SetOutput(stderr)
	seeHelp := fmt.Sprintf("See 'wincompat %s --help' for usage.\n", fl.Name())
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage()
			return 0, true
		}
		fmt.Fprintf(stderr, "wincompat %s: %v%s\n%s", fl.Name(), err, flagSuggestion(fl, err), seeHelp)
		return 2, true
	}
	if fl.NArg() > 0 {
		hint := ""
		if fl.Lookup("f") != nil {
			hint = fmt.Sprintf(" (to read it: -f %s)", fl.Arg(0))
		}
		fmt.Fprintf(stderr, "wincompat %s: unexpected argument %q%s\n%s", fl.Name(), fl.Arg(0), hint, seeHelp)
		return 2, true
	}
	return 0, false
}

// undefinedFlag is how the flag package names a flag it does not know.
const undefinedFlag = "flag provided but not defined: -"

// flagSuggestion is "; did you mean --NAME?" for an unknown flag near a known one.
func flagSuggestion(fl *flag.FlagSet, err error) string {
	typed, ok := strings.CutPrefix(err.Error(), undefinedFlag)
	if !ok {
		return ""
	}
	var names []string
	fl.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	name, ok := suggest.Closest(strings.TrimPrefix(typed, "-"), names)
	if !ok {
		return ""
	}
	return fmt.Sprintf("; did you mean %s?", flagName(name))
}

// flagName writes a flag as the usage does: -f, --output.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
