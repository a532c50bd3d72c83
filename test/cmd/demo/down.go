package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook/audit"
	"github.com/wincompat/wincompat/webhook/scheduling/gated"
)

// whileDown is the last part: with the hybrid engine, MutatingAdmissionPolicies (installed as the chart
// installs them) act in the API server; once every replica is gone, a Windows pod with a chart's
// Linux-only defaults is still admitted and recorded, and waits behind wincompat's scheduling gate for
// the build decision; when a replica returns, its leader decides the build, removes the gate, and the
// scheduler places the pod.
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

	// Its image is in the loopback registry (a 2022-only index whose tag names no build): what the
	// leader reads once a replica is back.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "while-down", Namespace: shopNamespace}, Spec: corev1.PodSpec{
		OS: &corev1.PodOS{Name: corev1.Windows},
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(1001)), FSGroup: new(int64(1001)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "api", Image: imgAPI.ref,
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: new(false), ReadOnlyRootFilesystem: new(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
	}}
	podsPolicies := func(p string) bool { return strings.HasPrefix(p, "wincompat-pods") }
	evaluated, err := fixtures.AdmissionPolicyEvaluations(ctx, d.cp.Config, podsPolicies)
	if err != nil {
		return err
	}
	created := time.Now()
	if err := d.c.Create(ctx, pod); err != nil {
		return fmt.Errorf("a Windows pod was refused with wincompat down: %w", err)
	}
	d.warnings.Take()
	after, err := fixtures.AdmissionPolicyEvaluations(ctx, d.cp.Config, podsPolicies)
	if err != nil {
		return err
	}
	evaluated = after - evaluated
	changes, err := policy.DecodeChanges(pod.Annotations[policy.AnnotationChanges])
	if err != nil {
		return fmt.Errorf("the record of the pod admitted while down: %w", err)
	}
	_, versioned := pod.Annotations[policy.AnnotationVersion]
	d.detail("created pod %s (runAsUser, fsGroup, seccompProfile, capabilities, readOnlyRootFilesystem, allowPrivilegeEscalation)", pod.Name)
	d.detail("  recorded    %d changes by the admission policy (%s=%s; no wincompat.io/version: the webhook never saw it)", len(changes), policy.AnnotationAdmissionPolicy, pod.Annotations[policy.AnnotationAdmissionPolicy])
	d.detail("  evaluated   %d time(s) by the API server: its second pass, after the policy's own change, stopped at the changes matchCondition", evaluated)
	d.detail("  scheduling  nodeSelector %s, %d tolerations, schedulingGates %s: no build decided, so the scheduler waits", selector(&pod.Spec), len(pod.Spec.Tolerations), gateNames(pod))
	if len(changes) == 0 || versioned || !policy.Gated(pod) || pod.Labels[policy.LabelGated] != "true" || pod.Annotations[policy.AnnotationBuild] != "" || evaluated != 1 {
		return fmt.Errorf("pod admitted while down: %d changes, version %v, gates %v, labels %v, build %q, the pods policy evaluated %d times",
			len(changes), versioned, pod.Spec.SchedulingGates, pod.Labels, pod.Annotations[policy.AnnotationBuild], evaluated)
	}
	d.brief("pod %s with a chart's Linux-only defaults: admitted with %d changes by the admission policies (evaluated once), nodeSelector %s,",
		pod.Name, len(changes), selector(&pod.Spec))
	d.brief("  and behind the gate %s: no build without wincompat, so the scheduler leaves it alone", policy.SchedulingGate)
	finding, err := d.auditFinding(ctx, pod, audit.GatedPod)
	if err != nil {
		return err
	}
	if finding == "" {
		return fmt.Errorf("the audit does not report pod %s as %s", pod.Name, audit.GatedPod)
	}
	d.detail("  audit       %s: %s", audit.GatedPod, finding)
	d.brief("  wincompat audit reports it: %s", audit.GatedPod)

	// A replica returns: its leader decides the build the webhook would have, and removes the gate.
	t := time.Now()
	logPath := filepath.Join(d.work, "wincompat-returned.log")
	if d.serve, err = startProcess(d.wincompatBin, d.serveArgs, logPath); err != nil {
		return err
	}
	d.detail("wincompat serve started again; log %s", logPath)
	if err := d.waitPlaced(ctx, pod, " of wincompat's return"); err != nil {
		return err
	}
	a, node := pod.Annotations, d.nodes[pod.Spec.NodeName]
	if a[policy.AnnotationVersion] == "" || a[policy.AnnotationBuild] != build2025 || a[policy.AnnotationBuildSource] != policy.SourceImageManifest || node.build != build2025 {
		return fmt.Errorf("pod %s after wincompat's return: version %q, build %q from %q, bound to %s (%s); want %s from %s",
			pod.Name, a[policy.AnnotationVersion], a[policy.AnnotationBuild], a[policy.AnnotationBuildSource], pod.Spec.NodeName, node.build, build2025, policy.SourceImageManifest)
	}
	event, err := d.podEvent(ctx, pod, gated.ReasonDecided)
	if err != nil {
		return err
	}
	if again, err := d.auditFinding(ctx, pod, audit.WithoutBuildDecision); err != nil || again != "" {
		return fmt.Errorf("the audit reports pod %s, decided by the leader, as %s: %q %v", pod.Name, audit.WithoutBuildDecision, again, err)
	}
	d.detail("  event       %s: %s", gated.ReasonDecided, event)
	d.detail("  placed      %.1fs after wincompat started again (%.1fs after its creation): build %s from %s, %s=%s, bound to %s (%s)",
		time.Since(t).Seconds(), time.Since(created).Seconds(), a[policy.AnnotationBuild], a[policy.AnnotationBuildSource], policy.AnnotationVersion, a[policy.AnnotationVersion], pod.Spec.NodeName, node.build)
	d.brief("wincompat started again: %.1fs later its leader had pinned build %s (%s) and removed the gate; bound to %s",
		time.Since(t).Seconds(), build2025, policy.SourceImageManifest, pod.Spec.NodeName)
	if d.verbose {
		fmt.Fprintln(d.out)
	}
	d.say("with every replica down, the API server still made the Windows pod valid; it waited for its build, then was placed")
	return nil
}
