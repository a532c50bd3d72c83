package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/striptable"
)

// Kubernetes versions (issue 30): what this API server serves decides the engine, a field only some
// releases refuse on Windows pods (a stop signal Windows cannot send) is rewritten, and the strip-table
// probe's reports say what every supported release refuses.
func (d *demo) versions(ctx context.Context) error {
	dc, err := discovery.NewDiscoveryClientForConfig(d.cp.Config)
	if err != nil {
		return err
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return err
	}
	d.section("Kubernetes versions: this API server is %s", info.GitVersion)
	served, err := controlplane.ServesAdmissionPolicies(d.cp.Config)
	if err != nil {
		return err
	}
	engine := "webhook (it serves no MutatingAdmissionPolicy v1)"
	if served {
		engine = "hybrid (it serves MutatingAdmissionPolicy v1)"
	}
	d.say("the chart's engine: auto installs %s", engine)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "graceful-nginx", Namespace: demoNamespace},
		Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{
			Name: "nginx", Image: "mcr.microsoft.com/windows/servercore:ltsc2022",
			Lifecycle: &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGQUIT)},
		}}},
	}
	if err := d.c.Create(ctx, pod, client.DryRunAll); err != nil {
		return fmt.Errorf("a Windows pod stopped by SIGQUIT: %w", err)
	}
	d.warnings.Take()
	changes, err := policy.DecodeChanges(pod.Annotations[policy.AnnotationChanges])
	if err != nil {
		return err
	}
	i := slices.IndexFunc(changes, func(c policy.Change) bool { return c.Rule == policy.RuleStopSignal })
	if i < 0 {
		return fmt.Errorf("a Windows pod stopped by SIGQUIT was admitted without the stop-signal rewrite: %v", changes)
	}
	d.say("lifecycle.stopSignal SIGQUIT (a chart's graceful nginx) removed: %s", changes[i].Reason)

	reports, err := striptable.ReadReports(filepath.Join(d.root, "test", "e2e", "releases", "testdata", "striptable"))
	if err != nil {
		return err
	}
	var versions []string
	for _, r := range reports {
		for gates, rs := range r.Refused {
			for _, f := range rs {
				if !f.Handled {
					return fmt.Errorf("the probe report of %s: with %s gates it refuses a field wincompat does not rewrite", r.Version, gates)
				}
			}
		}
		versions = append(versions, fmt.Sprintf("%s (%d fields)", r.Version, len(r.Refused[striptable.GatesAll])))
	}
	d.say("the strip-table probe's last reports: every field refused on Windows pods is rewritten, on %s", strings.Join(versions, ", "))
	d.detail("the probes: every leaf of the pod spec each API server serves, alone on a pod, gates off and on (make e2e-matrix; test/e2e/releases/testdata/striptable)")
	return nil
}
