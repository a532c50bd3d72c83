package perf

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"
)

// Toggle is one thing that mutates pods in the API server, installed (on) or removed (off). Apply
// returns once the API server has been told; whether it acts on it yet is the probe's to show.
type Toggle interface {
	Apply(ctx context.Context, on bool) error
}

// ProbeState is what a dry-run creation of the probe pod (a Windows pod with Linux-only fields) shows
// of the API server's mutating admission.
type ProbeState struct {
	// Rejected: nothing mutated the probe, and validation refused its Linux-only fields.
	Rejected bool
	// Webhook and Policies: wincompat's webhook (wincompat.io/version) and its admission policies
	// (wincompat.io/admission-policy) left their marks on the stored probe.
	Webhook, Policies bool
	// Placed: the probe came out with the Windows nodeSelector, whoever put it there.
	Placed bool
	// Named: the probe's runAsUser was kept as windowsOptions.runAsUserName, which wincompat's engines
	// and the floor engine do and Kyverno's policy does not: it tells the floor from Kyverno.
	Named bool
}

func (s ProbeState) String() string {
	if s.Rejected {
		return "rejected"
	}
	return fmt.Sprintf("admitted (wincompat webhook %v, admission policies %v, Windows nodeSelector %v, runAsUserName %v)", s.Webhook, s.Policies, s.Placed, s.Named)
}

// WaitForProbeState creates probe with dryRun until want accepts what the API server does with it: a
// change of webhook configuration, binding or policy takes effect through the API server's informers
// (or a peer's controller) a moment later.
func WaitForProbeState(ctx context.Context, cs kubernetes.Interface, probe *corev1.Pod, doing string, want func(ProbeState) bool) error {
	var (
		state ProbeState
		last  error
	)
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		state, last = ProbeState{}, err
		switch {
		case err == nil:
			state = ProbeState{
				Webhook:  got.Annotations[policy.AnnotationVersion] != "",
				Policies: got.Annotations[policy.AnnotationAdmissionPolicy] != "",
				Placed:   got.Spec.NodeSelector[corev1.LabelOSStable] == string(corev1.Windows),
				Named: got.Spec.SecurityContext != nil && got.Spec.SecurityContext.WindowsOptions != nil &&
					got.Spec.SecurityContext.WindowsOptions.RunAsUserName != nil,
			}
		case apierrors.IsInvalid(err) && strings.Contains(err.Error(), "cannot be set for a windows pod"):
			state.Rejected = true
		case !apierrors.IsInvalid(err) && !apierrors.IsInternalError(err):
			return false, fmt.Errorf("dry-run probe pod: %w", err)
		}
		return (err == nil || state.Rejected) && want(state), nil
	})
	if err != nil && wait.Interrupted(err) {
		return errors.Join(fmt.Errorf("the API server is not %s: the probe pod was %v (%v)", doing, state, last), err)
	}
	return err
}

// CheckStoredChartPod is the rewrite every engine must make of the Windows chart pod, read off what
// the API server answered a creation with: the Windows nodeSelector and toleration, and no Linux-only
// field left (validation refuses those, so a stored pod proves it). A phase whose pods lack them
// measured an engine that did not do the work.
func CheckStoredChartPod(p *corev1.Pod) error {
	if p.Spec.NodeSelector[corev1.LabelOSStable] != string(corev1.Windows) {
		return errors.New("stored without the nodeSelector kubernetes.io/os=windows")
	}
	if !slices.ContainsFunc(p.Spec.Tolerations, func(t corev1.Toleration) bool {
		return t.Key == "os" && t.Value == string(corev1.Windows) && t.Effect == corev1.TaintEffectNoSchedule
	}) {
		return errors.New("stored without the toleration os=windows:NoSchedule")
	}
	if sc := p.Spec.SecurityContext; sc != nil && (sc.RunAsUser != nil || sc.FSGroup != nil || sc.SeccompProfile != nil) {
		return errors.New("stored with Linux-only pod securityContext fields")
	}
	return nil
}

// deleteWorkers and deleteChunk bound the deletion between phases: a single DeleteCollection of
// tens of thousands of pods outlived its 60 s request timeout, and it kept the API server and etcd
// busy into the next phase.
const (
	deleteWorkers = 4
	deleteChunk   = 500
)

// DeletePods removes every pod of namespace ns, a chunk of names at a time, each pod by its own
// request from a few workers, and returns once none is left. No kubelet runs, and a pod bound to no
// node is deleted without grace.
func DeletePods(ctx context.Context, cs kubernetes.Interface, ns string) error {
	api := cs.CoreV1().Pods(ns)
	for {
		list, err := api.List(ctx, metav1.ListOptions{Limit: deleteChunk})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		names := make(chan string)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for range deleteWorkers {
			wg.Go(func() {
				for name := range names {
					err := api.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
					if err != nil && !apierrors.IsNotFound(err) {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			})
		}
		for i := range list.Items {
			names <- list.Items[i].Name
		}
		close(names)
		wg.Wait()
		if len(errs) > 0 {
			return fmt.Errorf("%d of %d deletions failed, the first: %w", len(errs), len(list.Items), errs[0])
		}
	}
}
