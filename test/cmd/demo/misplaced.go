package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook/audit"
	"github.com/wincompat/wincompat/webhook/scheduling/misplaced"
)

const (
	misplacedNamespace = "after-admission"
	misplacedNode      = "win2025-0" // its build cannot run a 2019 image with process isolation
	// What containerd on that node says, as the kubelet records it (misplaced.Table's sources).
	osMismatch = `Error: failed to create containerd task: failed to create shim task: hcs::CreateComputeSystem web: The container operating system does not match the host operating system.: unknown`
)

// misplacedPods closes the loop after admission: a Deployment's pod bound to a node whose build cannot
// run its image fails there (written as the kubelet writes it); wincompat, serving with
// --remediate-misplaced, records an Event naming the fix, `wincompat audit` reports it, and the pod is
// deleted so that its ReplicaSet makes another, which admission and the scheduler place on a 2019 node.
func (d *demo) misplacedPods(ctx context.Context) error {
	d.section("After admission: a pod on the wrong build fails, wincompat reports it and has it made again")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: misplacedNamespace, Labels: map[string]string{policy.LabelEnabled: "true"}}}
	if err := d.c.Create(ctx, ns); err != nil {
		return err
	}
	if err := d.waitForDefaultServiceAccount(ctx, misplacedNamespace); err != nil {
		return err
	}
	labels := map[string]string{"app": "web"}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
		OS: &corev1.PodOS{Name: corev1.Windows}, AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{{Name: "web", Image: "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2019"}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: misplacedNamespace}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tpl}}
	if err := d.c.Create(ctx, dep); err != nil {
		return err
	}
	// The ReplicaSet and its pods as the Deployment and ReplicaSet controllers would make them.
	rsLabels := map[string]string{"app": "web", "pod-template-hash": "7d4b9c"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-7d4b9c", Namespace: misplacedNamespace, Labels: rsLabels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: rsLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: rsLabels}, Spec: tpl.Spec}}}
	if err := d.c.Create(ctx, rs); err != nil {
		return err
	}
	newPod := func(suffix string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rs.Name + "-" + suffix, Namespace: misplacedNamespace, Labels: rsLabels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: *rs.Spec.Template.Spec.DeepCopy()}
	}
	// Bound to the 2025 node by whoever binds it (a scheduler of its own, or one that read a stale node
	// label): kube-scheduler would have kept it off, so the demo binds it at creation.
	first := newPod("x8k2p")
	first.Spec.NodeName = misplacedNode
	if err := d.c.Create(ctx, first); err != nil {
		return err
	}
	d.warnings.Take()
	d.detail("created Deployment web, ReplicaSet %s and its pod %s bound to %s (build %s); wincompat chose build %s (%s)",
		rs.Name, first.Name, misplacedNode, build2025, first.Annotations[policy.AnnotationBuild], first.Annotations[policy.AnnotationBuildSource])
	first.Status.Phase = corev1.PodPending
	first.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: first.Spec.Containers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: osMismatch}}}}
	if err := d.c.Status().Update(ctx, first); err != nil {
		return err
	}
	if err := fixtures.KubeletEvent(ctx, d.c, first, "Failed", osMismatch); err != nil {
		return err
	}
	d.brief("pod %s of Deployment web (image ...:windowsservercore-ltsc2019) bound to %s (build %s) fails there,", first.Name, misplacedNode, build2025)
	d.brief("  as its kubelet writes it: CreateContainerError, \"The container operating system does not match the host operating system\"")
	d.detail("wrote its status (CreateContainerError) and a Warning Event Failed as the kubelet of %s would: %s", misplacedNode, osMismatch)

	// wincompat's Event, then its deletion.
	var reported, deleted string
	err := d.poll(ctx, 30*time.Second, func() (bool, error) {
		var events corev1.EventList
		if err := d.c.List(ctx, &events, client.InNamespace(misplacedNamespace)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name != first.Name {
				continue
			}
			switch e.Reason {
			case misplaced.ReasonMismatch:
				reported = e.Message
			case misplaced.ReasonDeleted:
				deleted = e.Message
			}
		}
		return reported != "" && deleted != "", nil
	})
	if err != nil {
		return fmt.Errorf("wincompat did not report and delete the misplaced pod (Event %s: %q, %s: %q): %w",
			misplaced.ReasonMismatch, reported, misplaced.ReasonDeleted, deleted, err)
	}
	d.detail("event %s on pod %s: %s", misplaced.ReasonMismatch, first.Name, reported)
	d.detail("event %s on pod %s: %s", misplaced.ReasonDeleted, first.Name, deleted)
	_, fix, _ := strings.Cut(reported, "; its images ")
	d.brief("wincompat: Event %s on the pod: its images %s", misplaced.ReasonMismatch, fix)

	rep, err := audit.Run(ctx, d.c, audit.Options{Namespaces: []string{misplacedNamespace}})
	if err != nil {
		return err
	}
	var finding string
	for _, f := range rep.Findings {
		if f.Kind == audit.Misplaced && f.Object == "Pod/"+first.Name {
			finding = f.Detail
		}
	}
	if finding == "" {
		return fmt.Errorf("wincompat audit reports no %s finding for pod %s", audit.Misplaced, first.Name)
	}
	d.detail("wincompat audit: %s Pod/%s: %s", audit.Misplaced, first.Name, finding)
	cause, _, _ := strings.Cut(finding, " ")
	d.brief("wincompat audit: finding %s Pod/%s (%s); with --remediate-misplaced wincompat deleted it (Event %s)",
		audit.Misplaced, first.Name, cause, misplaced.ReasonDeleted)

	// The ReplicaSet controller's next pod: admission pins 2019 again, kube-scheduler places it.
	second := newPod("m4q7t")
	if err := d.c.Create(ctx, second); err != nil {
		return err
	}
	d.warnings.Take()
	err = d.poll(ctx, 30*time.Second, func() (bool, error) {
		if err := d.c.Get(ctx, client.ObjectKeyFromObject(second), second); err != nil {
			return false, err
		}
		return second.Spec.NodeName != "", nil
	})
	if err != nil {
		return fmt.Errorf("the ReplicaSet's new pod was not scheduled (%s): %w", unschedulable(second), err)
	}
	build := d.nodes[second.Spec.NodeName].build
	if build != build2019 {
		return fmt.Errorf("the ReplicaSet's new pod landed on %s (build %q), not on a 2019 node", second.Spec.NodeName, build)
	}
	d.brief("the ReplicaSet's new pod %s: build %s (%s), placed by kube-scheduler on %s (%s)", second.Name,
		second.Annotations[policy.AnnotationBuild], second.Annotations[policy.AnnotationBuildSource], second.Spec.NodeName, build)
	d.detail("new pod %s (as the ReplicaSet controller makes it) bound to %s, build %s", second.Name, second.Spec.NodeName, build)
	return nil
}
