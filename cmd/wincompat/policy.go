package main

import (
	"fmt"
	"io"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
)

const policyUsage = `Usage: wincompat policy [--policy FILE]
       wincompat policy export [--policy FILE] [--exclude-namespace NS]...

Validates the policy file and prints the effective policy: your file over the defaults, where a key you
name replaces its default (a list as a whole; [] empties it) and a key you leave out or set to null keeps
it. Unknown or repeated keys and values of the wrong shape are refused with their line and path, invalid
values with their path and what to write instead. With no file, prints the defaults with the comment on
each key (policy/default.yaml).

export prints, as YAML for kubectl apply, the MutatingAdmissionPolicies and their bindings
(admissionregistration.k8s.io/v1, Kubernetes 1.36 and later) that do inside the API server what needs no
cluster state: spec.os, the non-root intent rule, the strip table and the change record for Windows pods
and templates in namespaces labelled wincompat.io/enabled=true, and the OS nodeSelector and the policy's
tolerations for pods. Builds, RuntimeClasses, image resolution, the rewrites and the Pod Security
adjustments stay with the webhook; see policy/admissionpolicy/README.md.

Flags:
`

func runPolicy(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "export" {
		return runPolicyExport(args[1:], stdout, stderr)
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		unknownCommand(stderr, "wincompat policy", args[0], []string{"export"})
		return 2
	}
	fl := newFlagSet("policy", policyUsage, stderr)
	policyFile := fl.String("policy", "", "policy file to validate (default: the built-in policy)")
	if code, done := parseFlags(fl, args, stderr); done {
		return code
	}
	if *policyFile == "" {
		_, _ = stdout.Write(policy.DefaultPolicyYAML)
		return 0
	}
	p, err := loadPolicy(*policyFile)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat policy: %v\n", err)
		return 1
	}
	_, _ = stdout.Write(p.YAML())
	return 0
}

func runPolicyExport(args []string, stdout, stderr io.Writer) int {
	fl := newFlagSet("policy export", policyUsage, stderr)
	policyFile := fl.String("policy", "", "policy file to render (default: the built-in policy)")
	var excluded []string
	fl.Func("exclude-namespace", "a namespace never to bind, besides the policy's excludedNamespaces (wincompat's own); repeatable", func(v string) error {
		excluded = append(excluded, v)
		return nil
	})
	if code, done := parseFlags(fl, args, stderr); done {
		return code
	}
	p := policy.Default()
	if *policyFile != "" {
		var err error
		if p, err = loadPolicy(*policyFile); err != nil {
			fmt.Fprintf(stderr, "wincompat policy export: %v\n", err)
			return 1
		}
	}
	policies, bindings := admissionpolicy.Render(p, admissionpolicy.Options{Version: version, ExcludedNamespaces: excluded})
	var objs []any
	for i := range policies {
		objs = append(objs, &policies[i], &bindings[i])
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
