package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/audit"
)

const canaryNamespace = "canary"

// warnMode rolls wincompat out in one namespace as a platform team would: warn mode first (nothing
// changes, the warnings and the audit say what would), then enforce.
func (d *demo) warnMode(ctx context.Context) error {
	d.section("Roll it out: namespace %s labelled %s=true and %s=%s, then %s", canaryNamespace, policy.LabelEnabled, policy.LabelMode, policy.ModeWarn, policy.ModeEnforce)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: canaryNamespace,
		Labels: map[string]string{policy.LabelEnabled: "true", policy.LabelMode: policy.ModeWarn}}}
	if err := d.c.Create(ctx, ns); err != nil {
		return err
	}
	if err := d.waitForDefaultServiceAccount(ctx, canaryNamespace); err != nil {
		return err
	}
	// A Windows pod the API server admits as it is (no Linux-only fields), so that warn mode stores it.
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: canaryNamespace}, Spec: corev1.PodSpec{
			OS:                           &corev1.PodOS{Name: corev1.Windows},
			NodeSelector:                 map[string]string{corev1.LabelOSStable: string(corev1.Windows)},
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "web", Image: "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"}},
		}}
	}
	d.warnings.Take()
	warned := pod("web")
	if err := d.c.Create(ctx, warned); err != nil {
		return err
	}
	warnings := d.warnings.Take()
	would := 0
	for _, w := range warnings {
		if strings.HasPrefix(w, "wincompat (warn mode)") {
			d.detail("warning: %s", w)
			would++
		}
	}
	if len(warnings) == 0 {
		return fmt.Errorf("warn mode gave no warnings")
	}
	for k := range warned.Annotations {
		if strings.HasPrefix(k, "wincompat.io/") {
			return fmt.Errorf("warn mode changed the pod: annotation %s", k)
		}
	}
	d.detail("stored as it came: no toleration, no build, no %s annotation", policy.AnnotationChanges)

	rep, err := audit.Run(ctx, d.c, audit.Options{Namespaces: []string{canaryNamespace}})
	if err != nil {
		return err
	}
	found := false
	for _, f := range rep.Findings {
		if f.Kind == audit.WouldChange {
			found = true
			d.detail("wincompat audit: %s %s would change: %s", f.Kind, f.Object, f.Detail)
			d.brief("%s: pod web stored as it came, with %d warnings of what wincompat would do; wincompat audit: %s %s",
				policy.ModeWarn, would, f.Kind, f.Object)
		}
	}
	if !found {
		return fmt.Errorf("wincompat audit reports nothing that would change in %s", canaryNamespace)
	}

	d.step("then %s=%s: the same pod is rewritten", policy.LabelMode, policy.ModeEnforce)
	ns.Labels[policy.LabelMode] = policy.ModeEnforce
	if err := d.c.Update(ctx, ns); err != nil {
		return err
	}
	var enforced *corev1.Pod
	// wincompat reads namespaces from its cache, which sees the new label a moment later.
	if err := d.poll(ctx, 30*time.Second, func() (bool, error) {
		enforced = pod("web-2")
		if err := d.c.Create(ctx, enforced, client.DryRunAll); err != nil {
			return false, err
		}
		return enforced.Annotations[policy.AnnotationChanges] != "", nil
	}); err != nil {
		return fmt.Errorf("enforce mode did not rewrite the pod: %w", err)
	}
	d.warnings.Take()
	changes, err := policy.DecodeChanges(enforced.Annotations[policy.AnnotationChanges])
	if err != nil {
		return err
	}
	d.detail("dry run: %d changes recorded, build %s (%s), tolerations %d", len(changes),
		enforced.Annotations[policy.AnnotationBuild], enforced.Annotations[policy.AnnotationBuildSource], len(enforced.Spec.Tolerations))
	d.brief("%s: the same pod (a dry run) is rewritten: %d changes recorded, build %s (%s), %d tolerations", policy.ModeEnforce, len(changes),
		enforced.Annotations[policy.AnnotationBuild], enforced.Annotations[policy.AnnotationBuildSource], len(enforced.Spec.Tolerations))
	return nil
}
