package perf

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// CreatePods returns an op that creates a copy of pod through the API server, named
// prefix-WORKER-N: each worker has its own copy, so nothing is copied per operation. check, unless
// nil, judges the object the API server answered with (as stored); its error fails the operation.
func CreatePods(cs kubernetes.Interface, pod *corev1.Pod, workers int, prefix string, check func(*corev1.Pod) error) load.Op {
	pods := make([]*corev1.Pod, workers)
	counts := make([]int, workers)
	for i := range pods {
		pods[i] = pod.DeepCopy()
	}
	return func(ctx context.Context, worker int) error {
		p := pods[worker]
		counts[worker]++
		p.Name = fmt.Sprintf("%s-%d-%d", prefix, worker, counts[worker])
		stored, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			// One error kind per cause, not per pod.
			return fmt.Errorf("%s: %s", apierrors.ReasonForError(err), strings.ReplaceAll(err.Error(), p.Name, "NAME"))
		}
		if check != nil {
			return check(stored)
		}
		return nil
	}
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

// WithFailurePolicy is the same configuration with every webhook's failurePolicy set to fp, as the
// chart installs it for the hybrid engine (Ignore).
func (s *WebhookSwitch) WithFailurePolicy(fp admissionregistrationv1.FailurePolicyType) *WebhookSwitch {
	c := *s
	c.config = s.config.DeepCopy()
	for i := range c.config.Webhooks {
		c.config.Webhooks[i].FailurePolicy = &fp
	}
	return &c
}

// Apply installs (on) or removes the configuration.
func (s *WebhookSwitch) Apply(ctx context.Context, on bool) error {
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
	return nil
}

// Set installs (on) or removes the configuration, and returns once a probe pod shows the API server
// calling wincompat (on) or not calling anything (off).
func (s *WebhookSwitch) Set(ctx context.Context, on bool) error {
	if err := s.Apply(ctx, on); err != nil {
		return err
	}
	return waitForProbe(ctx, s.cs, s.probe, on, "calling wincompat", func(p ProbeState) bool { return p.Webhook })
}

// waitForProbe waits until the API server mutates the probe as mutated tells (on) or rejects it for
// its Linux-only fields (off).
func waitForProbe(ctx context.Context, cs kubernetes.Interface, probe *corev1.Pod, on bool, doing string, mutated func(ProbeState) bool) error {
	if !on {
		doing = "not " + doing
	}
	return WaitForProbeState(ctx, cs, probe, doing, func(p ProbeState) bool {
		if on {
			return !p.Rejected && mutated(p)
		}
		return p.Rejected
	})
}

// AdmissionPolicySwitch binds and unbinds wincompat's MutatingAdmissionPolicies (rendered from the
// default policy, as `wincompat policy export` prints them, without the scheduling gate: the engines'
// webhook reads no registry, so it never gates, and every engine compared makes the same rewrite). The
// policies stay; only their bindings come and go.
type AdmissionPolicySwitch struct {
	cs       kubernetes.Interface
	bindings []admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// NewAdmissionPolicySwitch creates the admission policies, unbound.
func NewAdmissionPolicySwitch(ctx context.Context, cs kubernetes.Interface) (*AdmissionPolicySwitch, error) {
	r := admissionpolicy.Render(policy.Default(), admissionpolicy.Options{Version: "perf", NoGate: true})
	policies, bindings := r.Policies, r.Bindings
	// The params first: a binding without them refuses what it selects.
	if _, err := cs.CoreV1().ConfigMaps(r.Params.Namespace).Create(ctx, &r.Params, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the admission policies' params: %w", err)
	}
	for i := range policies {
		if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, &policies[i], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating MutatingAdmissionPolicy %s: %w", policies[i].Name, err)
		}
	}
	return &AdmissionPolicySwitch{cs: cs, bindings: bindings}, nil
}

// Apply binds (on) or unbinds the policies.
func (s *AdmissionPolicySwitch) Apply(ctx context.Context, on bool) error {
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
	return nil
}

// Warnings counts the warnings the API server returns; it is a rest.WarningHandler that neither
// prints nor keeps them, as creating pods at full speed would otherwise flood the terminal.
type Warnings struct{ n atomic.Int64 }

// HandleWarningHeader counts one warning.
func (w *Warnings) HandleWarningHeader(int, string, string) { w.n.Add(1) }

// Take returns the count since the last Take.
func (w *Warnings) Take() int64 { return w.n.Swap(0) }
