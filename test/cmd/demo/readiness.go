package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/fixtures"
)

// readinessExample is a Deployment modelled on a corpus chart whose pods the API server admits and a
// Windows node would not run.
var readinessExample = []string{"deploy", "examples", "readiness-deployment.yaml"}

// readinessWanted are the readiness rules the example's comment promises: the section fails if one is
// not found, or if the template is warned about anything else.
var readinessWanted = []policy.Rule{
	policy.RuleMemoryRequestNotLimit, policy.RuleNonRootNoUser, policy.RuleSubPath,
	policy.RuleSecretOnDisk, policy.RuleLinuxCommand,
}

// readiness applies the example and shows what wincompat said at apply time of what would fail on the
// node (its readiness checks, on the template), then that a pod created from the template records the
// same findings and is warned the same way.
func (d *demo) readiness(ctx context.Context) error {
	path := filepath.Join(append([]string{d.root}, readinessExample...)...)
	docs, err := fixtures.ReadDocuments(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(docs) != 1 || docs[0].GetKind() != "Deployment" {
		return fmt.Errorf("%s: want one Deployment", d.rel(path))
	}
	dep := docs[0]
	dep.SetNamespace(demoNamespace)
	d.section("Pods that would not run: %s (bitnami/postgresql's primary, as a Windows Deployment)", d.rel(path))

	d.warnings.Take()
	if err := d.c.Create(ctx, dep); err != nil {
		return fmt.Errorf("creating Deployment %s: %w", dep.GetName(), err)
	}
	applyWarnings := d.warnings.Take()
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(dep.GroupVersionKind())
	if err := d.c.Get(ctx, client.ObjectKeyFromObject(dep), stored); err != nil {
		return err
	}
	findings, others := readinessFindings(templateChanges(stored))
	if len(others) > 0 {
		return fmt.Errorf("the template was warned about %v, which %s does not promise", others, filepath.Join(readinessExample...))
	}
	if err := allRulesFound(findings, "the template"); err != nil {
		return err
	}
	// The warnings of the findings, as the webhook renders them; each must have reached the client.
	want := policy.Warnings(findings)
	if missing := missingFrom(applyWarnings, want); len(missing) > 0 {
		return fmt.Errorf("the API server did not return the readiness warnings %q at apply time (it returned %q)", missing, applyWarnings)
	}
	d.detail("admitted; %d of the %s the API server returned are about run time on a Windows node (advice cut to \"...\"):",
		len(want), plural(len(applyWarnings), "warning"))
	for _, w := range applyWarnings {
		if slices.Contains(want, w) {
			d.detail("  Warning: %s", withoutAdvice(w))
		}
	}
	d.brief("admitted, with %d warnings of what would fail on a Windows node: %s", len(want), countRules(findings))

	owner, err := d.podOwner(ctx, stored)
	if err != nil {
		return err
	}
	pod, err := podFromTemplate(owner)
	if err != nil {
		return err
	}
	if err := d.c.Create(ctx, pod); err != nil {
		d.warnings.Take()
		return fmt.Errorf("creating a pod of Deployment %s: %w", dep.GetName(), err)
	}
	podWarnings := d.warnings.Take()
	recorded, err := policy.DecodeChanges(pod.GetAnnotations()[policy.AnnotationChanges])
	if err != nil {
		return fmt.Errorf("pod %s: %s: %w", pod.GetName(), policy.AnnotationChanges, err)
	}
	// The pod is also warned about its image, which only pods get looked up.
	podFindings, _ := readinessFindings(recorded)
	if !slices.EqualFunc(findings, podFindings, func(a, b policy.Change) bool {
		return a.Path == b.Path && a.Reason == b.Reason && string(a.From) == string(b.From)
	}) {
		return fmt.Errorf("pod %s records other readiness findings than its template: %v, template %v", pod.GetName(), podFindings, findings)
	}
	if missing := missingFrom(podWarnings, want); len(missing) > 0 {
		return fmt.Errorf("creating pod %s did not return the readiness warnings %q (it returned %q)", pod.GetName(), missing, podWarnings)
	}
	d.detail("pod %s, created from the stored template: warned the same at creation, and its %s records",
		pod.GetName(), policy.AnnotationChanges)
	d.detail("  the same %d findings: %s", len(podFindings), countRules(podFindings))
	d.brief("a pod created from the stored template: warned the same, the same findings in its %s", policy.AnnotationChanges)
	d.brief("(wincompat audit reports them as run-time-<rule>)")
	return nil
}

// readinessFindings splits the warnings among changes into those of the rules the example promises and
// the others.
func readinessFindings(changes []policy.Change) (found, others []policy.Change) {
	for _, c := range changes {
		switch {
		case c.Action != policy.Warn:
		case slices.Contains(readinessWanted, policy.RuleOf(c)):
			found = append(found, c)
		default:
			others = append(others, c)
		}
	}
	return found, others
}

// allRulesFound fails unless every rule the example promises has a finding.
func allRulesFound(found []policy.Change, where string) error {
	for _, r := range readinessWanted {
		if !slices.ContainsFunc(found, func(c policy.Change) bool { return policy.RuleOf(c) == r }) {
			return fmt.Errorf("%s: no readiness finding of rule %s", where, r)
		}
	}
	return nil
}

// missingFrom is what of want got lacks.
func missingFrom(got, want []string) []string {
	var missing []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	return missing
}

// withoutAdvice cuts a warning before its last clause, the advice ("; set ...", "; use ..."), keeping
// what fails and how sure wincompat is of it.
func withoutAdvice(w string) string {
	if i := strings.LastIndex(w, "; "); i > 0 {
		return w[:i] + "; ..."
	}
	return w
}

// countRules names the findings' rules in the order first found, with how many of each.
func countRules(findings []policy.Change) string {
	var rules []policy.Rule
	count := map[policy.Rule]int{}
	for _, c := range findings {
		r := policy.RuleOf(c)
		if count[r] == 0 {
			rules = append(rules, r)
		}
		count[r]++
	}
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = string(r)
		if count[r] > 1 {
			parts[i] += fmt.Sprintf(" x%d", count[r])
		}
	}
	return strings.Join(parts, ", ")
}
