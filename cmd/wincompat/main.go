// Command wincompat makes Windows pods admissible and schedulable in mixed Linux/Windows clusters.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/wincompat/wincompat/policy/suggest"
)

const usage = `wincompat rewrites Windows pods and workload templates so that the API server admits them and the
scheduler places them on a Windows node of the right build, instead of rejecting them for Linux-only
fields that off-the-shelf Helm charts carry.

Usage:
  wincompat serve [flags]       serve the mutating admission webhook
  wincompat mutate [flags]      rewrite manifests offline (files, directories or stdin; Helm post-renderer)
  wincompat audit [flags]       report what wincompat changed, where, and what needs attention
  wincompat nodes [flags]       show the cluster's Windows builds, taints and RuntimeClasses, and what is missing
  wincompat ungate [flags]      release the pods waiting behind wincompat's scheduling gate (after uninstalling)
  wincompat policy [flags]      validate a policy file and print the effective policy
  wincompat completion SHELL    print the shell completion script: bash, zsh, fish or powershell
  wincompat version             print the version

Run "wincompat <command> -h" for the flags of a command.
`

// The names kubectl gives the plugin: kubectl runs kubectl-wincompat for "kubectl wincompat ...", and
// since 1.26 asks kubectl_complete-wincompat for the completions of "kubectl wincompat <TAB>".
const (
	pluginBinary     = "kubectl-wincompat"
	completionBinary = "kubectl_complete-wincompat"
	pluginName       = "kubectl wincompat"
)

// displayName is how usage and errors name the program: "kubectl wincompat" when kubectl runs it.
var displayName = "wincompat"

func main() {
	var args []string
	displayName, args = asInvoked(os.Args[0], os.Args[1:])
	os.Exit(run(args, os.Stdin, os.Stdout, os.Stderr))
}

// asInvoked is the program's name and arguments as the name it was run by asks: kubectl runs
// kubectl-wincompat for "kubectl wincompat ..." (with none, it prints its help), and
// kubectl_complete-wincompat with the words after "kubectl wincompat", the last one to complete.
func asInvoked(argv0 string, args []string) (string, []string) {
	switch strings.TrimSuffix(filepath.Base(argv0), ".exe") {
	case pluginBinary:
		if len(args) == 0 {
			args = []string{"--help"}
		}
		return pluginName, args
	case completionBinary:
		return pluginName, append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	return "wincompat", args
}

// exitCode ends a command with this status; what there was to say has been said.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// usageError is a usage error (exit 2) with its whole message, said on stderr.
type usageError string

func (u usageError) Error() string { return string(u) }

// run returns the exit status: 0 on success, 1 when input or configuration is bad, 2 on usage errors.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	var code exitCode
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &usage):
		fmt.Fprint(stderr, string(usage))
		return 2
	}
	// cobra's own refusals (a completion command's arguments, say) are usage errors too.
	fmt.Fprintf(stderr, "%s: %v\nSee '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
	return 2
}

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "wincompat",
		Long:          usage,
		Version:       version,
		Args:          unknownCommandArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprint(stderr, helpText(c))
			return exitCode(2)
		},
	}
	// "wincompat mutat -f x" is an unknown command, not an unknown flag of the root's.
	root.FParseErrWhitelist.UnknownFlags = true
	if displayName != root.Name() {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: displayName}
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { printHelp(c, c.OutOrStdout()) })
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(fmt.Sprintf("%s: %v%s\n%s", c.CommandPath(), err, flagSuggestion(c, err), seeHelp(c)))
	})
	root.AddCommand(
		newServeCommand(stderr),
		newMutateCommand(stdin, stdout, stderr),
		newAuditCommand(stdout, stderr),
		newNodesCommand(stdout, stderr),
		newUngateCommand(stdout, stderr),
		newPolicyCommand(stdout, stderr),
		&cobra.Command{
			Use: "version", Short: "print the version", Args: noArgs,
			Run: func(*cobra.Command, []string) { fmt.Fprintln(stdout, version) },
		},
	)
	root.InitDefaultCompletionCmd()
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp != root {
		comp.Args = unknownCommandArgs
		comp.RunE = func(c *cobra.Command, _ []string) error {
			return usageError(fmt.Sprintf("%s: name a shell: bash, zsh, fish or powershell\n%s", c.CommandPath(), seeHelp(c)))
		}
	}
	return root
}

// newCommand is a command that takes flags and no arguments; run returns its exit status.
func newCommand(name, usage string, run func(c *cobra.Command) int) *cobra.Command {
	return &cobra.Command{
		Use:  name,
		Long: usage,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if code := run(c); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
}

func seeHelp(c *cobra.Command) string {
	return fmt.Sprintf("See '%s --help' for usage.\n", c.CommandPath())
}

// noArgs refuses a positional argument, suggesting -f where the command reads files.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	hint := ""
	if c.Flags().Lookup("filename") != nil {
		hint = fmt.Sprintf(" (to read it: -f %s)", args[0])
	}
	return usageError(fmt.Sprintf("%s: unexpected argument %q%s\n%s", c.CommandPath(), args[0], hint, seeHelp(c)))
}

// unknownCommandArgs is the argument check of a command with subcommands: an argument that is no
// subcommand is said as kubectl says it, the name, the nearest command if one is near, and where the
// usage is, instead of the whole usage.
func unknownCommandArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var known []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			known = append(known, sub.Name())
		}
	}
	msg := fmt.Sprintf("%s: unknown command %q\n", c.CommandPath(), args[0])
	if name, ok := suggest.Closest(args[0], known); ok {
		msg += fmt.Sprintf("\nDid you mean this?\n\t%s\n\n", name)
	}
	return usageError(msg + fmt.Sprintf("Run '%s --help' for usage.\n", c.CommandPath()))
}

// helpText is a command's usage text, naming the program as it was run.
func helpText(c *cobra.Command) string {
	name := c.Root().DisplayName()
	if name == c.Root().Name() {
		return c.Long
	}
	lines := strings.SplitAfter(c.Long, "\n")
	for i, l := range lines {
		for _, prefix := range []string{"Usage: ", "       ", "  ", "Run \""} {
			if rest, ok := strings.CutPrefix(l, prefix+"wincompat "); ok {
				lines[i] = prefix + name + " " + rest
			}
		}
	}
	return strings.Join(lines, "")
}

// printHelp prints the usage, then the flags, as -h asks. The root's usage lists the commands; its
// only flags are -h and --version.
func printHelp(c *cobra.Command, w io.Writer) {
	fmt.Fprint(w, helpText(c))
	if !c.HasParent() || c.Long == "" {
		if c.Long == "" {
			// cobra's own commands (completion, help) keep cobra's help.
			_ = c.Usage()
		}
		return
	}
	flags := c.LocalFlags()
	// Help is wrapped here, at the width the help column leaves, not where its text breaks a line.
	flags.VisitAll(func(f *pflag.Flag) { f.Usage = strings.ReplaceAll(f.Usage, "\n", " ") })
	fmt.Fprint(w, flags.FlagUsagesWrapped(flagHelpColumns))
}

// flagHelpColumns is the width flag help is wrapped to: kubectl's flags and controller-runtime's say
// more than wincompat's own, and the help column moves right with the longest flag name.
const flagHelpColumns = 200

// flagSuggestion is "; did you mean --NAME?" for an unknown flag near a known one.
func flagSuggestion(c *cobra.Command, err error) string {
	typed, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	name, ok := suggest.Closest(typed, names)
	if !ok {
		return ""
	}
	return fmt.Sprintf("; did you mean --%s?", name)
}
