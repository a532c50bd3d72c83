package placement

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook/audit"
	"github.com/wincompat/wincompat/webhook/scheduling/misplaced"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// The runtime's words as the kubelet records them (misplaced.Table's sources).
const (
	osMismatchMessage  = `Error: failed to create containerd task: failed to create shim task: hcs::CreateComputeSystem app: The container operating system does not match the host operating system.: unknown`
	noPlatformMessage  = `Failed to pull image "mcr.microsoft.com/windows/servercore:ltsc2019": rpc error: code = NotFound desc = failed to pull and unpack image "mcr.microsoft.com/windows/servercore:ltsc2019": no match for platform in manifest: not found`
	otherFailure       = `Error: failed to create containerd task: failed to create shim task: hcs::CreateComputeSystem app: The directory name is invalid.: unknown`
	misplacedNamespace = "misplaced"
)

// TestMisplacedPods: issue 28, item 4, on one control plane. Windows pods admitted by wincompat are bound
// to a Windows Server 2022 node whose build their 2019 images cannot run, and their failures are written
// as the kubelet writes them: a container state through the status subresource, or a Warning Event. With
// the watcher on and remediation off, each misplaced pod in the opted-in namespace gets one Event naming
// the cause and the 2019 node, the gauge counts them by cause on /metrics, nothing is deleted, and a pod
// in a namespace not opted in and a pod failing for another reason are left alone; `wincompat audit`
// reports them as misplaced. Restarted with remediation and tokens to spare, only eligible pods are
// deleted: one pod of a ReplicaSet with two misplaced pods (the other is held by the owner window), never
// the bare pod, the DaemonSet's pod, the pod whose own nodeSelector chose the build, nor (issue 40, finding
// 3) a pod only a Warning Event says failed, which anyone who may create Events can forge. Restarted with
// one eviction a minute, of two more controllers' misplaced pods exactly one is evicted.
func TestMisplacedPods(t *testing.T) {
	ctx := context.Background()
	metricsAddr := e2eutil.FreeAddr(t)
	watchOnly := func(o *server.Options) {
		o.MetricsAddr = metricsAddr
		o.Misplaced = &misplaced.Remediation{}
	}
	cl := e2eutil.StartClusterWith(t, nil, watchOnly)
	for _, n := range []e2eutil.TestNode{{Name: "mis-2019", OS: "windows", Build: e2eutil.Build2019}, {Name: "mis-2022", OS: "windows", Build: e2eutil.Build2022}} {
		cl.AddNode(t, n)
		var node corev1.Node
		if err := cl.C.Get(ctx, client.ObjectKey{Name: n.Name}, &node); err != nil {
			t.Fatal(err)
		}
		// What a kubelet reports of a Windows node.
		node.Status.NodeInfo = corev1.NodeSystemInfo{OperatingSystem: "windows", Architecture: "amd64", OSImage: "Windows Server Datacenter",
			KernelVersion: n.Build + ".6054", KubeletVersion: "v1.36.3", ContainerRuntimeVersion: "containerd://2.1.4"}
		if err := cl.C.Status().Update(ctx, &node); err != nil {
			t.Fatal(err)
		}
	}
	cl.NewNamespace(t, misplacedNamespace, map[string]string{policy.LabelEnabled: "true"})
	cl.NewNamespace(t, "misplaced-off", nil)

	rsA, rsB := replicaSet(t, cl, "web-a"), replicaSet(t, cl, "web-b")
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: misplacedNamespace}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Template: podTemplate("agent")}}
	e2eutil.Create(ctx, t, cl.C, ds)
	dsRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: new(true)}

	// Each pod: its owner, whether its own nodeSelector pins 2019, and how it fails on the 2022 node.
	type podCase struct {
		name, ns string
		owner    *metav1.OwnerReference
		pinned   bool
		how      string // "state", "event", "other"
	}
	first := []podCase{
		{"a-1", misplacedNamespace, rsA, false, "state"},
		{"a-2", misplacedNamespace, rsA, false, "state"},
		{"a-3", misplacedNamespace, rsA, false, "event"},
		{"bare", misplacedNamespace, nil, false, "state"},
		{"daemon", misplacedNamespace, &dsRef, false, "event"},
		{"pinned", misplacedNamespace, rsA, true, "state"},
		{"fine", misplacedNamespace, rsA, false, "other"},
		{"elsewhere", "misplaced-off", nil, false, "state"},
	}
	failing := func(pc podCase) *corev1.Pod {
		t.Helper()
		pod := e2eutil.WindowsPod(pc.ns, pc.name)
		pod.Spec.SecurityContext = nil // valid without wincompat too
		pod.Spec.Containers[0].Image = "mcr.microsoft.com/windows/servercore:ltsc2019"
		if pc.owner != nil {
			pod.OwnerReferences = []metav1.OwnerReference{*pc.owner}
		}
		if pc.pinned {
			pod.Spec.NodeSelector = map[string]string{corev1.LabelWindowsBuild: e2eutil.Build2019}
		}
		// Bound to the 2022 node as a scheduler of its own, or one that read a stale label, would.
		pod.Spec.NodeName = "mis-2022"
		e2eutil.Create(ctx, t, cl.C, pod)
		failAsKubelet(t, cl.C, pod, pc.how)
		return pod
	}
	pods := map[string]*corev1.Pod{}
	for _, pc := range first {
		pods[pc.name] = failing(pc)
	}
	if os := pods["a-1"].Labels[policy.LabelOS]; os != string(corev1.Windows) {
		t.Fatalf("a-1 is labelled %s=%q, want windows: the leader watches only pods so labelled", policy.LabelOS, os)
	}
	if src := pods["a-1"].Annotations[policy.AnnotationBuildSource]; src != policy.SourceImage {
		t.Fatalf("a-1's build source %q, want %s: the test's premise (wincompat chose the build from the tag) does not hold", src, policy.SourceImage)
	}

	misplacedPods := []string{"a-1", "a-2", "a-3", "bare", "daemon", "pinned"}
	for _, name := range misplacedPods {
		ev := waitForEvent(t, cl.C, misplacedNamespace, name, misplaced.ReasonMismatch)
		for _, want := range []string{"on node mis-2022 (build 10.0.20348)", "run on build 10.0.17763", "ready nodes that can: mis-2019"} {
			if !strings.Contains(ev.Message, want) {
				t.Errorf("%s: Event %q lacks %q", name, ev.Message, want)
			}
		}
	}
	if ev := waitForEvent(t, cl.C, misplacedNamespace, "a-1", misplaced.ReasonMismatch); !strings.HasPrefix(ev.Message, "os-mismatch") {
		t.Errorf("a-1: Event %q, want cause os-mismatch first", ev.Message)
	}
	if ev := waitForEvent(t, cl.C, misplacedNamespace, "a-3", misplaced.ReasonMismatch); !strings.HasPrefix(ev.Message, "no-platform-match") {
		t.Errorf("a-3: Event %q, want cause no-platform-match first", ev.Message)
	}
	e2eutil.Eventually(t, "wincompat_misplaced_pods counts 4 os-mismatch and 2 no-platform-match", func() bool {
		g := scrapeMisplaced(t, metricsAddr)
		return g[`wincompat_misplaced_pods{cause="os-mismatch"}`] == 4 && g[`wincompat_misplaced_pods{cause="no-platform-match"}`] == 2
	})
	for _, name := range []string{"fine"} {
		if n := countEvents(t, cl.C, misplacedNamespace, name, misplaced.ReasonMismatch); n != 0 {
			t.Errorf("%s failed for another reason, yet has %d %s Events", name, n, misplaced.ReasonMismatch)
		}
	}
	if n := countEvents(t, cl.C, "misplaced-off", "elsewhere", misplaced.ReasonMismatch); n != 0 {
		t.Errorf("a pod in a namespace not opted in has %d %s Events", n, misplaced.ReasonMismatch)
	}
	for _, name := range misplacedPods {
		if n := countEvents(t, cl.C, misplacedNamespace, name, misplaced.ReasonMismatch); n != 1 {
			t.Errorf("%s has %d %s Events, want exactly 1", name, n, misplaced.ReasonMismatch)
		}
	}

	rep, err := audit.Run(ctx, cl.C, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, f := range rep.Findings {
		if f.Kind == audit.Misplaced {
			found[f.Namespace+"/"+f.Object] = f.Detail
		}
	}
	for _, name := range misplacedPods {
		if d := found[misplacedNamespace+"/Pod/"+name]; !strings.Contains(d, "ready nodes that can: mis-2019") {
			t.Errorf("audit: %s: %q, want a misplaced finding naming mis-2019", name, d)
		}
	}
	if d := found["misplaced-off/Pod/elsewhere"]; d == "" {
		t.Error("audit: the pod in the namespace not opted in is not reported (the audit reports every Windows pod)")
	}
	if d := found[misplacedNamespace+"/Pod/fine"]; d != "" {
		t.Errorf("audit: a pod failing for another reason is reported: %q", d)
	}
	for _, want := range map[string]string{"bare": "a bare pod", "daemon": "a DaemonSet pod", "pinned": "its own spec pins the build"} {
		if !strings.Contains(fmt.Sprint(found), "not for remediation: "+want) {
			t.Errorf("audit: no finding says %q", want)
		}
	}
	// Without the opt-in, nothing was deleted.
	for name, pod := range pods {
		if !exists(t, cl.C, pod) {
			t.Errorf("remediation is off, yet %s is gone", name)
		}
	}

	// Remediation on, with tokens to spare: every eligible pod goes, once per controller.
	remediate := func(perMinute int) {
		cl.StopServing()
		cl.Serve(t, watchOnly, func(o *server.Options) {
			o.Misplaced = &misplaced.Remediation{Enabled: true, PerMinute: perMinute, OwnerWindow: 10 * time.Minute}
		})
	}
	outcome := func(o string) float64 {
		return scrapeMisplaced(t, metricsAddr)[`wincompat_misplaced_deletions_total{outcome="`+o+`"}`]
	}
	deleted := outcome("deleted")
	// Issue 41: the leader caches only pods labelled wincompat.io/os=windows. "elsewhere" was created
	// before its namespace opted in, so no engine labelled it: the next leader's sweep finds it.
	optIn := &corev1.Namespace{}
	if err := cl.C.Get(ctx, client.ObjectKey{Name: "misplaced-off"}, optIn); err != nil {
		t.Fatal(err)
	}
	if _, labelled := pods["elsewhere"].Labels[policy.LabelOS]; labelled {
		t.Fatal("the pod of the namespace not opted in carries " + policy.LabelOS + ": the sweep would not be tested")
	}
	optIn.Labels[policy.LabelEnabled] = "true"
	if err := cl.C.Update(ctx, optIn); err != nil {
		t.Fatal(err)
	}
	remediate(60)
	waitForEvent(t, cl.C, "misplaced-off", "elsewhere", misplaced.ReasonMismatch)
	e2eutil.Eventually(t, "one pod of ReplicaSet web-a deleted, the other held by the owner window", func() bool {
		return outcome("deleted") == deleted+1 && outcome("owner-window") >= 1
	})
	gone, kept := "", ""
	for _, name := range []string{"a-1", "a-2"} {
		if !exists(t, cl.C, pods[name]) {
			gone += name
		} else {
			kept += name
		}
	}
	if gone != "a-1" && gone != "a-2" {
		t.Fatalf("deleted of web-a's misplaced pods: %q, want exactly one", gone)
	}
	waitForEvent(t, cl.C, misplacedNamespace, gone, misplaced.ReasonDeleted)
	waitForEvent(t, cl.C, misplacedNamespace, rsA.Name, misplaced.ReasonDeleted)
	for _, name := range []string{"a-3", "bare", "daemon", "pinned", "fine", "elsewhere"} {
		if !exists(t, cl.C, pods[name]) {
			t.Errorf("%s is not eligible for remediation, yet it is gone", name)
		}
	}

	// A new leader reports no pod twice: the Events say which were reported.
	for _, name := range []string{"a-3", "bare", "daemon", "pinned", kept} {
		if n := countEvents(t, cl.C, misplacedNamespace, name, misplaced.ReasonMismatch); n != 1 {
			t.Errorf("after a restart %s has %d %s Events, want 1", name, n, misplaced.ReasonMismatch)
		}
	}

	// One deletion a minute: of two controllers' misplaced pods, one goes and one waits; web-a's other
	// pod is still within its window, read by this leader from the Event of the last one.
	deleted, window := outcome("deleted"), outcome("owner-window") // the counters outlive a restart
	remediate(1)
	rsC := replicaSet(t, cl, "web-c")
	b1 := failing(podCase{"b-1", misplacedNamespace, rsB, false, "state"})
	c1 := failing(podCase{"c-1", misplacedNamespace, rsC, false, "state"})
	e2eutil.Eventually(t, "one of b-1 and c-1 deleted, the other held back by the rate limit, and web-a's other pod by its window", func() bool {
		return outcome("deleted") == deleted+1 && outcome("rate-limited") >= 1 && outcome("owner-window") > window
	})
	if !exists(t, cl.C, pods[kept]) {
		t.Errorf("%s was deleted after a restart, within web-a's owner window: the new leader did not read the window from the Events", kept)
	}
	if exists(t, cl.C, b1) == exists(t, cl.C, c1) {
		t.Errorf("b-1 kept %v, c-1 kept %v: want exactly one deleted in the minute", exists(t, cl.C, b1), exists(t, cl.C, c1))
	}
	for _, name := range []string{"a-3", "bare", "daemon", "pinned", "fine", "elsewhere"} {
		if !exists(t, cl.C, pods[name]) {
			t.Errorf("%s is not eligible for remediation, yet it is gone", name)
		}
	}
}

// replicaSet creates a ReplicaSet (no controller runs: it makes no pods) and returns the reference its
// pods carry.
func replicaSet(t *testing.T, cl *e2eutil.Cluster, name string) *metav1.OwnerReference {
	t.Helper()
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: misplacedNamespace}, Spec: appsv1.ReplicaSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: podTemplate(name)}}
	e2eutil.Create(context.Background(), t, cl.C, rs)
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: rs.UID, Controller: new(true), BlockOwnerDeletion: new(true)}
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/servercore:ltsc2019"}}}}
}

// failAsKubelet writes what a kubelet writes when the runtime refuses pod: "state", a container waiting
// in CreateContainerError with the runtime's message (status subresource); "event", the image pull's
// Warning Event (reason Failed) and ErrImagePull with a short message; "other", a failure of another
// kind.
func failAsKubelet(t *testing.T, c client.Client, pod *corev1.Pod, how string) {
	t.Helper()
	ctx := context.Background()
	reason, message := "CreateContainerError", osMismatchMessage
	switch how {
	case "event":
		reason, message = "ErrImagePull", "ErrImagePull"
		if err := fixtures.KubeletEvent(ctx, c, pod, "Failed", noPlatformMessage); err != nil {
			t.Fatal(err)
		}
	case "other":
		message = otherFailure
	}
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: pod.Spec.Containers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatalf("writing %s's status: %v", pod.Name, err)
	}
}

func waitForEvent(t *testing.T, c client.Client, ns, name, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	e2eutil.Eventually(t, fmt.Sprintf("an Event %s about %s/%s", reason, ns, name), func() bool {
		var list corev1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.InvolvedObject.Name == name {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

func countEvents(t *testing.T, c client.Client, ns, name, reason string) int {
	t.Helper()
	var list corev1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason == reason && e.InvolvedObject.Name == name {
			n++
		}
	}
	return n
}

// exists: the pod is there and not being deleted. No kubelet runs to confirm a bound pod's graceful
// deletion, so a deleted one stays with its deletionTimestamp set.
func exists(t *testing.T, c client.Client, pod *corev1.Pod) bool {
	t.Helper()
	var got corev1.Pod
	err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), &got)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return got.DeletionTimestamp == nil
}

// scrapeMisplaced reads the misplaced series from /metrics as name{label="value"} -> value.
func scrapeMisplaced(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil // not serving yet
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range families {
		if !strings.HasPrefix(name, "wincompat_misplaced_") {
			continue
		}
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			out[key] = v
		}
	}
	return out
}
