package e2eutil

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HookJob plays, for one Job a helm hook creates, what the test control plane does not run: the Job
// controller and the kubelet. Once the Job exists it runs the Job's one container with the wincompat
// binary the tests use (the image's entrypoint), authenticated as the Job's ServiceAccount as its pod
// would be, then writes the Job's status as the Job controller does when its pod ends: Complete
// (SuccessCriteriaMet first) when the command exits 0, Failed (FailureTarget first) otherwise, so that
// helm's wait for the hook ends. Everything the command does goes through the real API server, RBAC
// and admission included.
type HookJob struct {
	done chan struct{}
	// Set once done is closed.
	output string
	err    error
	ran    time.Duration
}

// PlayHookJob starts watching for the Job namespace/name (a poll every 50ms) and plays it once.
func PlayHookJob(t *testing.T, cl *Cluster, namespace, name string) *HookJob {
	t.Helper()
	bin, dir := BuildWincompat(t), t.TempDir()
	h := &HookJob{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		<-h.done
	})
	go func() {
		defer close(h.done)
		var job batchv1.Job
		for {
			err := cl.C.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job)
			if err == nil {
				break
			}
			if !apierrors.IsNotFound(err) {
				h.err = err
				return
			}
			select {
			case <-ctx.Done():
				h.err = fmt.Errorf("no Job %s/%s appeared", namespace, name)
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		h.output, h.ran, h.err = runJobPod(ctx, cl, bin, dir, &job)
		if err := finishJob(ctx, cl.C, &job, h.err == nil, time.Now().Add(-h.ran)); err != nil {
			h.err = errors.Join(h.err, err)
		}
	}()
	return h
}

// runJobPod runs the Job's container as its pod would run it.
func runJobPod(ctx context.Context, cl *Cluster, bin, dir string, job *batchv1.Job) (string, time.Duration, error) {
	spec := job.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		return "", 0, fmt.Errorf("Job %s has %d containers, want one", job.Name, len(spec.Containers))
	}
	c := spec.Containers[0]
	args := c.Args
	if len(c.Command) > 0 {
		if path.Base(c.Command[0]) != "wincompat" {
			return "", 0, fmt.Errorf("Job %s runs %q, not wincompat", job.Name, c.Command)
		}
		args = slices.Concat(c.Command[1:], args)
	}
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	kubeconfig := filepath.Join(dir, sa+".kubeconfig")
	if err := cl.CP.WriteKubeConfig(kubeconfig, "system:serviceaccount:"+job.Namespace+":"+sa, "system:serviceaccounts", "system:serviceaccounts:"+job.Namespace); err != nil {
		return "", 0, err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", kubeconfig)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("wincompat %s: %w", strings.Join(args, " "), err)
	}
	return string(out), time.Since(start), err
}

// finishJob writes the status the Job controller writes when the Job's one pod ends
// (k8s.io/kubernetes pkg/apis/batch/validation validateJobStatus: a finished Job has a startTime; a
// Complete one SuccessCriteriaMet=True and a completionTime not before its startTime; a Failed one
// FailureTarget=True).
func finishJob(ctx context.Context, c client.Client, job *batchv1.Job, succeeded bool, started time.Time) error {
	now := metav1.Now()
	start := metav1.NewTime(started.Truncate(time.Second))
	condition := func(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, LastProbeTime: now, LastTransitionTime: now}
	}
	job.Status.StartTime = &start
	if succeeded {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached), condition(batchv1.JobComplete, batchv1.JobReasonCompletionsReached)}
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded), condition(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)}
	}
	return c.Status().Update(ctx, job)
}

// Wait waits up to timeout for the Job to have been played and returns what its command printed and how
// long it ran, or why it failed.
func (h *HookJob) Wait(timeout time.Duration) (output string, ran time.Duration, err error) {
	select {
	case <-h.done:
		return h.output, h.ran, h.err
	case <-time.After(timeout):
		return "", 0, fmt.Errorf("the hook Job was not played within %v", timeout)
	}
}
