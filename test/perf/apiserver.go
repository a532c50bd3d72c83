package perf

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/perf/load"
)

// CreatePods returns an op that creates a copy of pod through the API server, named
// prefix-WORKER-N: each worker has its own copy, so nothing is copied per operation.
func CreatePods(cs kubernetes.Interface, pod *corev1.Pod, workers int, prefix string) load.Op {
	pods := make([]*corev1.Pod, workers)
	counts := make([]int, workers)
	for i := range pods {
		pods[i] = pod.DeepCopy()
	}
	return func(ctx context.Context, worker int) error {
		p := pods[worker]
		counts[worker]++
		p.Name = fmt.Sprintf("%s-%d-%d", prefix, worker, counts[worker])
		_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			// One error kind per cause, not per pod.
			return fmt.Errorf("%s: %s", apierrors.ReasonForError(err), strings.ReplaceAll(err.Error(), p.Name, "NAME"))
		}
		return nil
	}
}

// DeletePods removes every pod of namespace ns at once. No kubelet runs, and a pod bound to no node is
// deleted without grace.
func DeletePods(ctx context.Context, cs kubernetes.Interface, ns string) error {
	return cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
}

// WebhookSwitch installs and removes wincompat's MutatingWebhookConfiguration, as envtest installed it
// from deploy/webhook, and waits each time until the API server acts accordingly.
type WebhookSwitch struct {
	cs     kubernetes.Interface
	config *admissionregistrationv1.MutatingWebhookConfiguration
	// probe is a pod the API server rejects unless wincompat mutates it (a Windows pod with Linux-only
	// fields), created with dryRun to see whether the API server calls wincompat.
	probe *corev1.Pod
}

// NewWebhookSwitch reads the installed configuration name.
func NewWebhookSwitch(ctx context.Context, cs kubernetes.Interface, name string, probe *corev1.Pod) (*WebhookSwitch, error) {
	wc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", name, err)
	}
	wc.ObjectMeta = metav1.ObjectMeta{Name: wc.Name, Labels: wc.Labels, Annotations: wc.Annotations}
	return &WebhookSwitch{cs: cs, config: wc, probe: probe.DeepCopy()}, nil
}

// Set installs (on) or removes the configuration, and returns once a probe pod shows the API server
// calling wincompat (on) or not calling anything (off).
func (s *WebhookSwitch) Set(ctx context.Context, on bool) error {
	api := s.cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	var err error
	if on {
		_, err = api.Create(ctx, s.config.DeepCopy(), metav1.CreateOptions{})
	} else {
		err = api.Delete(ctx, s.config.Name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
		return err
	}
	return waitForProbe(ctx, s.cs, s.probe, on, "calling wincompat", func(p *corev1.Pod) bool { return p.Annotations[policy.AnnotationVersion] != "" })
}

// waitForProbe creates probe with dryRun until the API server mutates it as mutatedBy tells (on) or
// rejects it for its Linux-only fields (off): a change of webhook configuration or binding takes effect
// through the API server's informers, a moment later.
func waitForProbe(ctx context.Context, cs kubernetes.Interface, probe *corev1.Pod, on bool, doing string, mutatedBy func(*corev1.Pod) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		got, err := cs.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		mutated := err == nil && mutatedBy(got)
		rejected := apierrors.IsInvalid(err) && strings.Contains(err.Error(), "cannot be set for a windows pod")
		switch {
		case on && mutated, !on && rejected:
			return nil
		case err != nil && !apierrors.IsInvalid(err) && !apierrors.IsInternalError(err):
			return fmt.Errorf("dry-run probe pod: %w", err)
		}
		select {
		case <-ctx.Done():
			state := map[bool]string{true: doing, false: "not " + doing}[on]
			return errors.Join(fmt.Errorf("the API server is not %s: probe pod answered %v", state, err), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// AdmissionPolicySwitch binds and unbinds wincompat's MutatingAdmissionPolicies (rendered from the
// default policy, as `wincompat policy export` prints them), and waits each time until the API server
// acts accordingly. The policies stay; only their bindings come and go.
type AdmissionPolicySwitch struct {
	cs       kubernetes.Interface
	bindings []admissionregistrationv1.MutatingAdmissionPolicyBinding
	probe    *corev1.Pod
}

// NewAdmissionPolicySwitch creates the admission policies, unbound.
func NewAdmissionPolicySwitch(ctx context.Context, cs kubernetes.Interface, probe *corev1.Pod) (*AdmissionPolicySwitch, error) {
	policies, bindings := admissionpolicy.Render(policy.Default(), admissionpolicy.Options{Version: "perf"})
	for i := range policies {
		if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, &policies[i], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating MutatingAdmissionPolicy %s: %w", policies[i].Name, err)
		}
	}
	return &AdmissionPolicySwitch{cs: cs, bindings: bindings, probe: probe.DeepCopy()}, nil
}

// Set binds (on) or unbinds the policies, and returns once a probe pod shows the API server mutating
// it with them (on) or rejecting it (off).
func (s *AdmissionPolicySwitch) Set(ctx context.Context, on bool) error {
	api := s.cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	for i := range s.bindings {
		var err error
		if on {
			_, err = api.Create(ctx, s.bindings[i].DeepCopy(), metav1.CreateOptions{})
		} else {
			err = api.Delete(ctx, s.bindings[i].Name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return waitForProbe(ctx, s.cs, s.probe, on, "applying the admission policies", func(p *corev1.Pod) bool {
		return p.Annotations[policy.AnnotationAdmissionPolicy] != "" && p.Annotations[policy.AnnotationVersion] == ""
	})
}

// Warnings counts the warnings the API server returns; it is a rest.WarningHandler that neither
// prints nor keeps them, as creating pods at full speed would otherwise flood the terminal.
type Warnings struct{ n atomic.Int64 }

// HandleWarningHeader counts one warning.
func (w *Warnings) HandleWarningHeader(int, string, string) { w.n.Add(1) }

// Take returns the count since the last Take.
func (w *Warnings) Take() int64 { return w.n.Swap(0) }
