package main

// The attacks of issue 40: what anyone who may create pods or Events sends through the API server, to
// wincompat's admission and to the leader's misplaced watcher. Before the fixes, the huge-name pod took
// `wincompat serve` to 13 GB for one review, 120 Events with a 1 MB reason took the leader from 50 to
// 248 MiB, and a forged Event got a healthy pod deleted.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/scheduling/misplaced"
)

const (
	// leaseNamespace is serve's --namespace: where the leader's Lease is.
	leaseNamespace = "wincompat-system"
	// quietNamespace never opted in: the watcher's Event informer reads every namespace all the same.
	quietNamespace = "hostile-off"
	leaseName      = "wincompat.io"
)

// leaderFlags run the misplaced watcher as the chart does: on the leader, which the lab's shared flags
// turn off.
var leaderFlags = []string{"--leader-elect", "--namespace", leaseNamespace, "--watch-misplaced=true"}

// attackerClient is a clientset of its own for the attacks through the API server, without client-go's
// default rate limit (5 requests a second): the probes' clientset keeps theirs, and an attack neither
// waits for nor delays the probes.
func attackerClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	cfg.WarningHandler = rest.NoWarnings{}
	return kubernetes.NewForConfig(cfg)
}

func prepareIssue40(ctx context.Context, cs kubernetes.Interface) error {
	for _, ns := range []string{leaseNamespace, quietNamespace} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// waitForLeader waits until a server started at since holds the Lease: the one before it released it on
// SIGTERM, and the watcher's informers start once it is held.
func (e *env) waitForLeader(ctx context.Context, since time.Time) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		l, err := e.cs.CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err == nil && ptr.Deref(l.Spec.HolderIdentity, "") != "" && l.Spec.AcquireTime != nil && !l.Spec.AcquireTime.Time.Before(since.Add(-time.Second)) {
			// The leader's caches sync after it is elected: what the attack measures starts from them.
			return sleep(ctx, 3*time.Second)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wincompat serve did not take the Lease %s/%s within 60 s (%v); its log: %s", leaseNamespace, leaseName, err, e.server.LogPath)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// hugeNamePod is issue 40's first finding: a Windows pod of about 1.3 MB, under the API server's 3 MiB
// request limit, whose Secret volume has a name of 200 KB and 20,000 items that each set a mode.
// Mutating admission runs before validation, which refuses the name: wincompat sees it as sent.
func hugeNamePod() *corev1.Pod {
	items := make([]corev1.KeyToPath, 20000)
	for i := range items {
		items[i] = corev1.KeyToPath{Key: fmt.Sprintf("config-%05d", i), Path: fmt.Sprintf("conf/%05d.ini", i), Mode: ptr.To[int32](0o644)}
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "huge-name", Namespace: namespace},
		Spec: corev1.PodSpec{
			OS:                 &corev1.PodOS{Name: corev1.Windows},
			ServiceAccountName: "web",
			Containers:         []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"}},
			Volumes: []corev1.Volume{{Name: strings.Repeat("v", 200_000),
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web", Items: items}}}},
		},
	}
}

// hugeNameThroughAPI creates the huge-name pod (dry run) through the API server, one after the other,
// as `kubectl apply --dry-run=server` in a loop. The API server refuses it in validation, after
// wincompat answered; with failurePolicy Fail, a webhook that did not answer is another error.
func hugeNameThroughAPI(ctx context.Context, e *env, s *stats) {
	pod := hugeNamePod()
	raw, err := json.Marshal(pod)
	if err != nil {
		s.add("preparing: " + err.Error())
		<-ctx.Done()
		return
	}
	s.figure("pod bytes", float64(len(raw)))
	var slowest time.Duration
	for ctx.Err() == nil {
		t := time.Now()
		_, err := e.attacker.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if ctx.Err() != nil {
			s.add("still waiting when the attack ended")
			break
		}
		slowest = max(slowest, time.Since(t))
		s.conns.Add(1)
		s.add(dryRunOutcome(err))
	}
	s.figure("slowest dry run s", slowest.Seconds())
}

// dryRunOutcome says what became of a dry-run create of the huge-name pod.
func dryRunOutcome(err error) string {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case err == nil:
		return "created (dry run): validation let the name through"
	case apierrors.IsInvalid(err) && strings.Contains(msg, "spec.volumes[0].name"):
		return "answered by wincompat, then refused in validation (the volume name)"
	case apierrors.IsInvalid(err):
		return "answered by wincompat, then refused in validation: " + shorten(msg)
	case strings.Contains(msg, "denied the request"):
		return "denied by the webhook: " + shorten(msg)
	case strings.Contains(msg, "failed calling webhook"):
		return "wincompat did not answer: " + classify(err)
	}
	return "other: " + shorten(msg)
}

// hugeNameDirect: the same pod in an AdmissionReview, sent to the webhook port by workers keep-alive
// connections back to back: the attack on serve alone, without the API server's pace.
func hugeNameDirect(workers int) func(ctx context.Context, e *env, s *stats) {
	return func(ctx context.Context, e *env, s *stats) {
		raw, err := json.Marshal(hugeNamePod())
		if err == nil {
			var review *perf.Review
			if review, err = perf.NewReview("huge-name", "", raw, namespace, admissionv1.Create, perf.AnyPatch, "mutated"); err == nil {
				s.figure("review bytes", float64(len(review.Body(0))))
				postLoop(ctx, e, s, workers, webhook.PodPath, [][]byte{review.Body(0)})
				return
			}
		}
		s.add("preparing: " + err.Error())
		<-ctx.Done()
	}
}

// reasonSizes are the Event reasons tried, largest first: a core/v1 Event's reason has no length limit
// of its own, but the request (3 MiB) and etcd's value (1.5 MiB by default) have.
var reasonSizes = []int{1 << 20, 1_000_000, 768 << 10, 512 << 10, 256 << 10}

// floodEvent is a Warning Event about a pod that does not exist, in a namespace never opted in: what the
// watcher's field selector (type=Warning, involvedObject.kind=Pod) lets into the leader's cache.
func floodEvent(i, reasonBytes int) *corev1.Event {
	now := metav1.Now()
	pod := fmt.Sprintf("ghost-%04d", i)
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("flood-%04d", i), Namespace: quietNamespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: quietNamespace, Name: pod, UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))},
		Type:           corev1.EventTypeWarning, Reason: strings.Repeat("R", reasonBytes), Message: "hostile",
		Source: corev1.EventSource{Component: "hostile"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
}

// eventFlood creates Events of the largest reason the API server takes, batch after batch, and reads
// serve's RSS before and after each (once its informer has had time to take them in). The Events are
// deleted when the attack ends, so that the next server's informer does not list them.
func eventFlood(batches ...int) func(ctx context.Context, e *env, s *stats) {
	return func(ctx context.Context, e *env, s *stats) {
		events := e.attacker.CoreV1().Events(quietNamespace)
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := events.DeleteCollection(cctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				s.note("deleting the Events afterwards: %v", err)
			}
		}()
		// RSS holds the garbage of decoding each Event too; the live heap, as the last collection
		// marked it, is what the cache keeps.
		rss := func(name string) {
			if p, err := load.ReadProc(e.server.Pid); err == nil {
				s.figure(name+" RSS MiB", mib(p.RSS))
				s.figure(name+" RssAnon MiB", mib(p.RSSAnon))
			}
			if m, err := perf.ScrapeFamilies(ctx, e.meter.MetricsURL); err == nil {
				for _, g := range m["go_gc_heap_live_bytes"].GetMetric() {
					s.figure(name+" live heap MiB", g.GetGauge().GetValue()/(1<<20))
				}
			}
		}
		rss("0 Events:")
		// created is the number of Events created, and the index of the next one's name.
		reasonBytes, created := 0, 0
		for _, size := range reasonSizes {
			_, err := events.Create(ctx, floodEvent(created, size), metav1.CreateOptions{})
			if err == nil {
				reasonBytes, created = size, 1
				break
			}
			s.note("a reason of %d bytes refused: %s", size, shorten(err.Error()))
		}
		if reasonBytes == 0 {
			<-ctx.Done()
			return
		}
		s.figure("reason bytes", float64(reasonBytes))
		s.conns.Add(1)
		s.add("created")
		target := 0
		for _, n := range batches {
			target += n
			t := time.Now()
			for ; created < target && ctx.Err() == nil; created++ {
				if _, err := events.Create(ctx, floodEvent(created, reasonBytes), metav1.CreateOptions{}); err != nil {
					if ctx.Err() == nil {
						s.add("refused: " + shorten(err.Error()))
					}
					continue
				}
				s.conns.Add(1)
				s.add("created")
			}
			if ctx.Err() != nil {
				s.note("the attack ended within the batch of %d, after %d Events", target, created)
				break
			}
			s.figure(fmt.Sprintf("%d Events: created in s", target), time.Since(t).Seconds())
			// The informer decodes each Event as it arrives; a few seconds let it finish the batch.
			if sleep(ctx, 3*time.Second) != nil {
				break
			}
			rss(fmt.Sprintf("%d Events:", target))
		}
		<-ctx.Done()
	}
}

// forgedPod is a Windows pod of a ReplicaSet in the opted-in namespace, bound to node: eligible for
// remediation in every way but the two that must hold it back, a failure only an Event tells of and
// being Ready.
func forgedPod(rs *appsv1.ReplicaSet, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: rs.Name + "-x7k2p", Namespace: namespace, Labels: rs.Spec.Selector.MatchLabels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: forgedPodSpec(node),
	}
}

func forgedPodSpec(node string) corev1.PodSpec {
	return corev1.PodSpec{
		OS: &corev1.PodOS{Name: corev1.Windows}, ServiceAccountName: "web", NodeName: node,
		Containers: []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"}},
	}
}

// forgedMessage is what the kubelet records when HCS refuses a container of another build.
const forgedMessage = `Error: failed to create containerd task: failed to create shim task: hcs::CreateComputeSystem app: The container operating system does not match the host operating system. (0xc0370101): unknown`

// forgedEvent: a Running, Ready Windows pod of a ReplicaSet, eligible for remediation but for its
// readiness and its own states, and Warning Events Failed with 0xc0370101 about it (name, namespace,
// UID) as anyone who may create Events there can write them. The first makes the watcher judge the pod
// misplaced (its Event WindowsBuildMismatch shows it did); each next one, every 2 s, makes it judge the
// pod again. The controller has no periodic resync to wait for (controller-runtime's is 10 hours):
// Events and pod updates are what make it reconcile. The pod must survive to the end.
func forgedEvent(ctx context.Context, e *env, s *stats) {
	pod, err := e.runningReadyPod(ctx)
	if err != nil {
		s.add("preparing: " + shorten(err.Error()))
		<-ctx.Done()
		return
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = e.cs.CoreV1().Pods(namespace).Delete(cctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		_ = e.cs.AppsV1().ReplicaSets(namespace).Delete(cctx, pod.OwnerReferences[0].Name, metav1.DeleteOptions{})
	}()
	before, err := watcherCounters(ctx, e.meter.MetricsURL)
	if err != nil {
		s.note("reading serve's metrics: %v", err)
	}
	first := time.Now()
	judged := time.Duration(-1)
	survived := true
	var forged time.Time
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil && survived {
		if time.Since(forged) >= 2*time.Second {
			forged = time.Now()
			if err := fixtures.KubeletEvent(ctx, e.cp.Client, pod, "Failed", forgedMessage); err == nil {
				s.conns.Add(1)
				s.add("forged Event created")
			} else if ctx.Err() == nil {
				s.add("refused: " + shorten(err.Error()))
			}
		}
		if judged < 0 && e.reported(ctx, pod) {
			judged = time.Since(first)
		}
		if why := e.gone(ctx, pod); why != "" {
			s.note("the pod did not survive: %s, %.1f s after the first forged Event", why, time.Since(first).Seconds())
			survived = false
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if survived {
		if why := e.gone(cctx, pod); why != "" {
			s.note("the pod did not survive: %s, at the end", why)
			survived = false
		}
	}
	watched := time.Since(first).Seconds()
	s.figure("watched s", watched)
	if survived {
		s.note("the pod survived: Running, Ready, same UID and no deletion %.1f s after the first forged Event", watched)
	}
	if judged >= 0 {
		s.figure("judged misplaced after s", judged.Seconds())
	} else {
		s.note("no WindowsBuildMismatch Event about the pod: the watcher never judged it (is it the leader?)")
	}
	after, err := watcherCounters(cctx, e.meter.MetricsURL)
	if err != nil {
		s.note("reading serve's metrics: %v", err)
		return
	}
	for k, v := range after {
		s.figure(k, v-before[k])
	}
}

// runningReadyPod creates a ReplicaSet (no controller-manager runs: it makes no pods of its own), a
// Windows node, and the ReplicaSet's pod bound to it through the API server, wincompat admitting it,
// then writes its status as the kubelet would for a pod that serves.
func (e *env) runningReadyPod(ctx context.Context) (*corev1.Pod, error) {
	const node = "win-2022"
	err := fixtures.AddNode(ctx, e.cp.Client, fixtures.Node{Name: node, OS: "windows", Build: "10.0.20348"}, 110)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	labels := map[string]string{"app": "web-forged"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-forged", Namespace: namespace}, Spec: appsv1.ReplicaSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: forgedPodSpec("")}}}
	if rs, err = e.cs.AppsV1().ReplicaSets(namespace).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	pod, err := e.cs.CoreV1().Pods(namespace).Create(ctx, forgedPod(rs, node), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	if src := pod.Annotations[policy.AnnotationBuildSource]; src != policy.SourceImage {
		return nil, fmt.Errorf("pod %s: build source %q, want %s (chosen from the image, so that a new pod could be placed otherwise)", pod.Name, src, policy.SourceImage)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now, HostIP: "10.0.0.9", PodIP: "10.1.0.9",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: pod.Spec.Containers[0].Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
	}
	return e.cs.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// reported: the watcher recorded its WindowsBuildMismatch Event about pod, so it judged it.
func (e *env) reported(ctx context.Context, pod *corev1.Pod) bool {
	sel := fields.SelectorFromSet(fields.Set{"involvedObject.uid": string(pod.UID), "reason": misplaced.ReasonMismatch})
	list, err := e.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	return err == nil && len(list.Items) > 0
}

// gone says how pod is no longer the pod that serves, or "" while it is. No kubelet runs to finish a
// bound pod's graceful deletion, so an evicted one stays with its deletionTimestamp set.
func (e *env) gone(ctx context.Context, pod *corev1.Pod) string {
	got, err := e.cs.CoreV1().Pods(namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "deleted"
	case err != nil:
		return "" // not known to be gone; a read that failed is not the watcher's doing
	case got.UID != pod.UID:
		return "replaced"
	case got.DeletionTimestamp != nil:
		return "being deleted (evicted)"
	case !misplaced.PodReady(got):
		return "no longer Ready"
	}
	return ""
}

// watcherCounters are what say whether the watcher worked and what it did: its reconciles by result
// and its deletions by outcome, from serve's /metrics.
func watcherCounters(ctx context.Context, url string) (map[string]float64, error) {
	families, err := perf.ScrapeFamilies(ctx, url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range families["controller_runtime_reconcile_total"].GetMetric() {
		if label(m.GetLabel(), "controller") == "misplaced-pods" {
			out["reconciles "+label(m.GetLabel(), "result")] += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["wincompat_misplaced_deletions_total"].GetMetric() {
		out["deletions "+label(m.GetLabel(), "outcome")] += m.GetCounter().GetValue()
	}
	return out, nil
}

func label(pairs []*dto.LabelPair, name string) string {
	for _, p := range pairs {
		if p.GetName() == name {
			return p.GetValue()
		}
	}
	return ""
}
