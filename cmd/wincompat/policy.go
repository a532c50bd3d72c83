package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/webhook"
)

const policyUsage = `Usage: wincompat policy [--policy FILE]
       wincompat policy export [--policy FILE] [--exclude-namespace NS]... [--params-namespace NS] [--image-resolver-mode MODE]

Validates the policy file and prints the effective policy: your file over the defaults, where a key you
name replaces its default (a list as a whole; [] empties it) and a key you leave out or set to null keeps
it. Unknown or repeated keys and values of the wrong shape are refused with their line and path, invalid
values with their path and what to write instead. With no file, prints the defaults with the comment on
each key (policy/default.yaml).

export prints, as YAML for kubectl apply, the MutatingAdmissionPolicies, their bindings
(admissionregistration.k8s.io/v1, Kubernetes 1.36 and later) and the params ConfigMap they read the
policy's values from, that do inside the API server what needs no cluster state: spec.os, the non-root intent rule, the strip table and the change record for Windows pods
and templates in namespaces labelled wincompat.io/enabled=true, and the OS nodeSelector and the policy's
tolerations for pods. Builds, RuntimeClasses, image resolution, the rewrites and the Pod Security
adjustments stay with the webhook; see policy/admissionpolicy/README.md. The policies are the same for
every policy: after a policy edit, apply the params ConfigMap (and bindings) again. Whoever may write the
params ConfigMap decides the user name and tolerations Windows pods get: keep it in a namespace only
administrators write to (kube-system unless --params-namespace says otherwise). With
--image-resolver-mode lookup or gate (as the wincompat serve beside them runs), the policies admit a
Windows pod they cannot give a build behind the scheduling gate wincompat.io/build, for serve's leader to
place; the default, fallback, never gates, so that policies applied without wincompat serve never leave a
pod gated with nobody to remove the gate.

Flags:
`

func newPolicyCommand(stdout, stderr io.Writer) *cobra.Command {
	var policyFile string
	cmd := newCommand("policy", policyUsage, func(*cobra.Command) int { return runPolicy(policyFile, stdout, stderr) })
	cmd.Args = unknownCommandArgs
	cmd.Flags().StringVar(&policyFile, "policy", "", "policy file to validate (default: the built-in policy)")
	_ = cmd.MarkFlagFilename("policy", "yaml", "yml")

	var exportFile, paramsNamespace, mode string
	var excluded []string
	export := newCommand("export", policyUsage, func(*cobra.Command) int {
		if !slices.Contains(webhook.ImageModes, mode) {
			fmt.Fprintf(stderr, "wincompat policy export: --image-resolver-mode %q: use %s\n", mode, strings.Join(webhook.ImageModes, ", "))
			return 2
		}
		return runPolicyExport(exportFile, excluded, paramsNamespace, mode == webhook.ImageModeFallback, stdout, stderr)
	})
	export.Flags().StringVar(&exportFile, "policy", "", "policy file to render (default: the built-in policy)")
	export.Flags().StringArrayVar(&excluded, "exclude-namespace", nil, "a namespace never to bind, besides the policy's excludedNamespaces (wincompat's own); repeatable")
	export.Flags().StringVar(&paramsNamespace, "params-namespace", "kube-system", "the namespace of the params ConfigMap ("+admissionpolicy.DefaultParamsName+") the bindings name; it must exist")
	export.Flags().StringVar(&mode, "image-resolver-mode", webhook.ImageModeFallback, "the --image-resolver-mode of the wincompat serve beside the policies: lookup or gate let the policies gate\nWindows pods for its leader; fallback never gates (policies without wincompat serve)")
	_ = export.MarkFlagFilename("policy", "yaml", "yml")
	cmd.AddCommand(export)
	return cmd
}

func runPolicy(policyFile string, stdout, stderr io.Writer) int {
	if policyFile == "" {
		_, _ = stdout.Write(policy.DefaultPolicyYAML)
		return 0
	}
	p, err := loadPolicy(policyFile)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat policy: %v\n", err)
		return 1
	}
	_, _ = stdout.Write(p.YAML())
	return 0
}

func runPolicyExport(policyFile string, excluded []string, paramsNamespace string, noGate bool, stdout, stderr io.Writer) int {
	p := policy.Default()
	if policyFile != "" {
		var err error
		if p, err = loadPolicy(policyFile); err != nil {
			fmt.Fprintf(stderr, "wincompat policy export: %v\n", err)
			return 1
		}
	}
	r := admissionpolicy.Render(p, admissionpolicy.Options{Version: version, ExcludedNamespaces: excluded, ParamsNamespace: paramsNamespace, NoGate: noGate})
	// The params first: a binding without them refuses what it selects (parameterNotFoundAction Deny).
	objs := []any{&r.Params}
	for i := range r.Policies {
		objs = append(objs, &r.Policies[i], &r.Bindings[i])
	}
	for i, o := range objs {
		b, err := sigsyaml.Marshal(o)
		if err != nil {
			fmt.Fprintf(stderr, "wincompat policy export: %v\n", err)
			return 1
		}
		if i > 0 {
			_, _ = io.WriteString(stdout, "---\n")
		}
		_, _ = stdout.Write(b)
	}
	return 0
}
