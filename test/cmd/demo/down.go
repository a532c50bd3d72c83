package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook/audit"
)

// whileDown is the last part: with the hybrid engine, MutatingAdmissionPolicies (installed as the chart
// installs them) act in the API server; once every replica is gone, a Windows pod with a chart's Linux-only defaults is
// still admitted, recorded and scheduled onto a Windows node, only without the build decision.
func (d *demo) whileDown(ctx context.Context) error {
	d.section("Admission that does not fail with wincompat: the hybrid engine, every replica stopped")
	var policies admissionregistrationv1.MutatingAdmissionPolicyList
	if err := d.c.List(ctx, &policies, client.MatchingLabels{labelManagedBy: "wincompat"}); err != nil {
		return err
	}
	var names []string
	for _, p := range policies.Items {
		names = append(names, p.Name)
	}
	if len(names) == 0 {
		return fmt.Errorf("no MutatingAdmissionPolicy installed")
	}
	d.detail("MutatingAdmissionPolicies installed as the chart installs them (the CEL `wincompat policy export` renders): %s", strings.Join(names, ", "))

	// As the chart installs the webhook in hybrid mode: the admission policies keep Windows pods valid,
	// so an unanswered webhook call must not fail them.
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := d.c.Get(ctx, client.ObjectKey{Name: webhookConfigName}, &cfg); err != nil {
		return err
	}
	ignore := admissionregistrationv1.Ignore
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].FailurePolicy = &ignore
	}
	if err := d.c.Update(ctx, &cfg); err != nil {
		return err
	}
	d.detail("webhook configuration %s: failurePolicy Ignore, as the chart sets it with engine hybrid", webhookConfigName)
	if err := d.serve.stop(15 * time.Second); err != nil {
		return fmt.Errorf("stopping wincompat serve: %w", err)
	}
	d.serve = nil
	d.detail("wincompat serve stopped: no replica answers")
	d.brief("%d MutatingAdmissionPolicies installed as the chart installs them; webhook failurePolicy Ignore (as the chart sets it); wincompat stopped",
		len(names))
	time.Sleep(time.Second) // the API server reads webhook configurations from its informer

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "while-down", Namespace: shopNamespace}, Spec: corev1.PodSpec{
		OS: &corev1.PodOS{Name: corev1.Windows},
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(1001)), FSGroup: new(int64(1001)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "iis", Image: "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: new(false), ReadOnlyRootFilesystem: new(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
	}}
	podsPolicies := func(p string) bool { return strings.HasPrefix(p, "wincompat-pods") }
	evaluated, err := fixtures.AdmissionPolicyEvaluations(ctx, d.cp.Config, podsPolicies)
	if err != nil {
		return err
	}
	if err := d.c.Create(ctx, pod); err != nil {
		return fmt.Errorf("a Windows pod was refused with wincompat down: %w", err)
	}
	d.warnings.Take()
	after, err := fixtures.AdmissionPolicyEvaluations(ctx, d.cp.Config, podsPolicies)
	if err != nil {
		return err
	}
	evaluated = after - evaluated
	if err := d.waitBound(ctx, []podReport{{namespace: shopNamespace, name: pod.Name}}, time.Now()); err != nil {
		return err
	}
	if err := d.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		return err
	}
	changes, err := policy.DecodeChanges(pod.Annotations[policy.AnnotationChanges])
	if err != nil {
		return fmt.Errorf("the record of the pod admitted while down: %w", err)
	}
	d.detail("created pod %s (runAsUser, fsGroup, seccompProfile, capabilities, readOnlyRootFilesystem, allowPrivilegeEscalation)", pod.Name)
	d.detail("  recorded    %d changes by the admission policy (%s=%s; no wincompat.io/version: the webhook never saw it)", len(changes), policy.AnnotationAdmissionPolicy, pod.Annotations[policy.AnnotationAdmissionPolicy])
	d.detail("  evaluated   %d time(s) by the API server: its second pass, after the policy's own change, stopped at the changes matchCondition", evaluated)
	d.detail("  scheduling  nodeSelector %s, %d tolerations, bound to %s (%s)", selector(&pod.Spec), len(pod.Spec.Tolerations), pod.Spec.NodeName, d.nodes[pod.Spec.NodeName].build)
	d.detail("  build       %q: no build decision without wincompat, so it may land on a node that cannot run its image", pod.Annotations[policy.AnnotationBuild])
	d.brief("pod %s with a chart's Linux-only defaults: admitted with %d changes by the admission policies (evaluated once), nodeSelector %s, on %s;",
		pod.Name, len(changes), selector(&pod.Spec), pod.Spec.NodeName)
	if d.nodes[pod.Spec.NodeName].os != "windows" || len(changes) == 0 || pod.Annotations[policy.AnnotationBuild] != "" || evaluated != 1 {
		return fmt.Errorf("pod admitted while down: node %s, %d changes, build %q, the pods policy evaluated %d times", pod.Spec.NodeName, len(changes), pod.Annotations[policy.AnnotationBuild], evaluated)
	}
	rep, err := audit.Run(ctx, d.c, audit.Options{Namespaces: []string{shopNamespace}})
	if err != nil {
		return err
	}
	found := false
	for _, f := range rep.Findings {
		if f.Kind == audit.WithoutBuildDecision && f.Object == "Pod/"+pod.Name {
			d.detail("  audit       %s: %s", f.Kind, f.Detail)
			d.brief("  but no build chosen, which wincompat audit reports (%s)", f.Kind)
			found = true
		}
	}
	if !found {
		return fmt.Errorf("the audit does not report pod %s as %s", pod.Name, audit.WithoutBuildDecision)
	}
	if d.verbose {
		fmt.Fprintln(d.out)
	}
	d.say("with every replica down, the API server still made the Windows pod valid and sent it to a Windows node")
	return nil
}
