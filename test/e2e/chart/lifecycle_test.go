package chart

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/controlplane"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestChartLifecycle: issue 27, item 1. The chart's whole life as a user lives it, with the real helm
// against the real API server and Kubernetes' own garbage collector running: install (engine auto, so
// hybrid on 1.36; self-managed TLS), upgrade with a changed policy and --reuse-values, the switch to
// the webhook engine and back, to cert-manager TLS and back, and uninstall. After each step a Windows pod
// with Linux-only fields in a labelled namespace shows what acts on it; after uninstall nothing of
// wincompat acts on it (the API server rejects it again), and what is left is exactly what the chart
// README says to remove by hand.
//
// Each step ends the way a rollout ends: the replica of the old Deployment stops, one with the new
// Deployment's arguments starts (one webhook port, so never both at once). cert-manager's CRDs are
// installed but no cert-manager runs: that step proves the chart's objects and the switch there and
// back, not issuance or caBundle injection, and meanwhile no replica serves.
func TestChartLifecycle(t *testing.T) {
	ctx := context.Background()
	cp := controlplane.LaunchBare(t, controlplane.WithGarbageCollector())
	// It switches engines; where only the webhook runs, TestHelmChartOnThisServer installs the chart.
	e2eutil.RequireAdmissionPolicies(t, cp.Config)
	cl := &e2eutil.Cluster{CP: cp, Cfg: cp.Config, C: cp.Client}
	c := cp.Client
	crds, _ := filepath.Glob(filepath.Join(e2eutil.ModuleDir(t, e2eutil.CertManagerModule), "deploy", "crds", "cert-manager.io_*.yaml"))
	e2eutil.InstallCRDs(ctx, t, c, crds)
	e2eutil.SetUpNamespace(ctx, t, c, e2eutil.OwnNamespace, nil, nil)
	const apps = "apps"
	e2eutil.SetUpNamespace(ctx, t, c, apps, map[string]string{policy.LabelEnabled: "true"}, nil)
	// Where pods wait behind wincompat's gate when it is uninstalled.
	const waiting = "waiting"
	e2eutil.SetUpNamespace(ctx, t, c, waiting, nil, nil)
	before := clusterObjects(t, cp)
	pods := &lifecyclePods{t: t, c: c, ns: apps}
	pods.rejected("before install")

	rel := e2eutil.NewChartRelease(t, cl)
	helmOK := func(step string, args ...string) {
		t.Helper()
		start := time.Now()
		if out, err := rel.Upgrade(args...); err != nil {
			t.Fatalf("%s: %v\n%s", step, err, out)
		}
		t.Logf("%s: helm upgrade in %v", step, time.Since(start).Round(time.Millisecond))
	}
	var running *e2eutil.Replica
	rollout := func() {
		t.Helper()
		if running != nil {
			if err := running.Stop(10 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
		rel.SyncPolicyFile()
		running = rel.Replica()
		running.Start(t)
		running.WaitReady(t)
	}

	// Install as the chart README says, without cert-manager.
	helmOK("install", "--set", "tls.mode=self-managed", "--set", "imageResolver.enabled=false")
	rollout()
	checkEngine(t, c, "hybrid")
	waitForAdmissionPolicies(t, c, len(admissionpolicy.Names()))
	pods.rewritten("installed, engine hybrid", bothEngines)

	// Upgrade with a changed policy, keeping the values given before (--reuse-values): the new taint is
	// tolerated, and TLS stays self-managed.
	const taint = "e2e.wincompat.io/lifecycle"
	taints := `policy.windowsNodeTaints=[{"key":"os","value":"windows","effect":"NoSchedule"},{"key":"` + taint + `","value":"yes","effect":"NoSchedule"}]`
	helmOK("upgrade with a policy change", "--reuse-values", "--set-json", taints)
	if !slices.Contains(e2eutil.DeploymentArgs(t, c), "--self-managed-tls") {
		t.Errorf("helm upgrade --reuse-values dropped tls.mode=self-managed: %q", e2eutil.DeploymentArgs(t, c))
	}
	rollout()
	if pod := pods.rewritten("policy changed", bothEngines); e2eutil.CountToleration(pod, corev1.Toleration{Key: taint, Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}) != 1 {
		t.Errorf("the pod does not tolerate the upgraded policy's taint: %+v", pod.Spec.Tolerations)
	}

	// The webhook engine: the admission policies, their bindings and params go (helm deletes them), the
	// webhook alone rewrites, failing closed.
	helmOK("engine webhook", "--reuse-values", "--set", "engine=webhook")
	rollout()
	checkEngine(t, c, "webhook")
	waitForAdmissionPolicies(t, c, 0)
	pods.rewritten("engine webhook", webhookOnly)

	// And back to hybrid.
	helmOK("engine hybrid again", "--reuse-values", "--set", "engine=hybrid")
	rollout()
	checkEngine(t, c, "hybrid")
	waitForAdmissionPolicies(t, c, len(admissionpolicy.Names()))
	pods.rewritten("engine hybrid again", bothEngines)

	// cert-manager TLS: the API server takes the chart's Issuers and Certificates, the Deployment now
	// mounts the Secret cert-manager would issue. None runs here, so no replica can start: the admission
	// policies keep rewriting alone (the webhook fails open with hybrid), without a build decision.
	helmOK("TLS by cert-manager", "--reuse-values", "--set", "tls.mode=cert-manager")
	if err := running.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	running = nil
	for kind, want := range map[string]int{"Issuer": 2, "Certificate": 2} {
		if got := countObjects(t, c, "cert-manager.io", "v1", kind, e2eutil.OwnNamespace); got != want {
			t.Errorf("cert-manager TLS: %d %ss in %s, want %d", got, kind, e2eutil.OwnNamespace, want)
		}
	}
	if args := e2eutil.DeploymentArgs(t, c); slices.Contains(args, "--self-managed-tls") || !slices.Contains(args, "--cert-dir=/certs") {
		t.Errorf("cert-manager TLS: the Deployment still issues its own certificates: %q", args)
	}
	pods.rewritten("cert-manager TLS, no replica: admission policies alone", policiesOnly)

	// Back to self-managed TLS: the Issuers and Certificates go with the upgrade.
	helmOK("TLS self-managed again", "--reuse-values", "--set", "tls.mode=self-managed")
	rollout()
	for _, kind := range []string{"Issuer", "Certificate"} {
		if got := countObjects(t, c, "cert-manager.io", "v1", kind, e2eutil.OwnNamespace); got != 0 {
			t.Errorf("self-managed TLS again: %d %ss left", got, kind)
		}
	}
	pods.rewritten("self-managed TLS again", bothEngines)

	// Uninstall with pods waiting behind wincompat's scheduling gate that no leader will decide: the
	// replica stops first (a leader would decide them), as when wincompat is scaled to zero and then
	// uninstalled. helm deletes the release's objects, then runs the post-delete hook and waits for its
	// Job, which releases them: only wincompat's gate goes, another gate stays.
	// The pods the admission policies gated while no replica answered (TLS by cert-manager) are the
	// leader's to decide now, through the chart's RBAC and own-writes policy.
	took := e2eutil.WaitUntil(t, 30*time.Second, "the leader to decide the pods gated while no replica answered", func() bool {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(apps)); err != nil {
			t.Fatal(err)
		}
		return !slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return policy.Gated(&p) })
	})
	t.Logf("no pod of %s gated after %v", apps, took.Round(time.Millisecond))
	if err := running.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	gated := gatedPods(t, c, waiting)
	hook := e2eutil.PlayHookJob(t, cl, e2eutil.OwnNamespace, "wincompat-ungate")
	start := time.Now()
	if out, err := rel.Helm("uninstall", "wincompat"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	t.Logf("helm uninstall in %v", time.Since(start).Round(time.Millisecond))
	out, ran, err := hook.Wait(10 * time.Second)
	if err != nil {
		t.Fatalf("the post-delete hook: %v\n%s", err, out)
	}
	t.Logf("the post-delete hook ran %v: %s", ran.Round(time.Millisecond), strings.TrimSpace(out))
	gated.released(t, c)
	waitForAdmissionPolicies(t, c, 0)
	for _, list := range []client.ObjectList{&admissionregistrationv1.MutatingWebhookConfigurationList{},
		&admissionregistrationv1.ValidatingWebhookConfigurationList{}, &admissionregistrationv1.ValidatingAdmissionPolicyList{},
		&admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}} {
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(list); n != 0 {
			t.Errorf("after uninstall: %d %T left", n, list)
		}
	}
	// Until the API server's admission informers drop a binding whose params helm deleted first, that
	// binding refuses the pod (parameterNotFoundAction Deny): not yet the API server's own validation.
	e2eutil.WaitUntil(t, 30*time.Second, "the API server to reject a Windows pod with Linux-only fields again", func() bool {
		err := pods.dryRun()
		return err != nil && !strings.Contains(err.Error(), "no params found")
	})
	pods.rejected("after uninstall")

	// What is left is what the chart README's "Uninstall" says to remove by hand: the RuntimeClasses
	// (running pods' sandboxes need them) and the leader Lease. Events expire by themselves; the
	// namespaces and pods are the test's own.
	var left []string
	for _, key := range clusterObjects(t, cp) {
		if !slices.Contains(before, key) && !strings.Contains(key, " "+apps+"/") && !strings.Contains(key, " "+waiting+"/") {
			left = append(left, key)
		}
	}
	want := []string{"coordination.k8s.io/leases " + e2eutil.OwnNamespace + "/wincompat.io",
		"node.k8s.io/runtimeclasses windows-2019", "node.k8s.io/runtimeclasses windows-2022", "node.k8s.io/runtimeclasses windows-2025"}
	if !slices.Equal(left, want) {
		t.Errorf("left after uninstall:\n  %s\nwant (the chart README's list):\n  %s", strings.Join(left, "\n  "), strings.Join(want, "\n  "))
	}
}

// waitingPods are pods created behind scheduling gates: wincompat's, wincompat's and another's, another's.
type waitingPods struct{ ours, both, foreign *corev1.Pod }

// foreignGate is a gate wincompat did not add.
const foreignGate = "example.com/capacity"

// gatedPods creates pods that carry wincompat's gate and label, as admission leaves a pod whose build it
// could not decide (the API server takes gates at creation from anyone), one with another gate too, and
// one with another gate alone.
func gatedPods(t *testing.T, c client.Client, ns string) waitingPods {
	t.Helper()
	pod := func(name string, gates ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}}}}
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
			if g == policy.SchedulingGate {
				p.Labels[policy.LabelGated] = "true"
			}
		}
		e2eutil.Create(context.Background(), t, c, p)
		return p
	}
	return waitingPods{ours: pod("gated", policy.SchedulingGate), both: pod("gated-twice", foreignGate, policy.SchedulingGate), foreign: pod("gated-by-another", foreignGate)}
}

// released: no pod keeps wincompat's gate or label, each says why in its record, and another's gate
// stays where it was.
func (w waitingPods) released(t *testing.T, c client.Client) {
	t.Helper()
	for _, tc := range []struct {
		pod   *corev1.Pod
		gates []string
	}{{w.ours, nil}, {w.both, []string{foreignGate}}, {w.foreign, []string{foreignGate}}} {
		var p corev1.Pod
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.pod), &p); err != nil {
			t.Fatal(err)
		}
		var gates []string
		for _, g := range p.Spec.SchedulingGates {
			gates = append(gates, g.Name)
		}
		if !slices.Equal(gates, tc.gates) || p.Labels[policy.LabelGated] != "" || p.Labels["app"] != p.Name {
			t.Errorf("after uninstall, pod %s has gates %q and labels %v; want gates %q, no %s", p.Name, gates, p.Labels, tc.gates, policy.LabelGated)
		}
		if wasOurs := tc.pod != w.foreign; wasOurs != strings.Contains(p.Annotations[policy.AnnotationChanges], "wincompat was uninstalled") {
			t.Errorf("after uninstall, pod %s's record: %q", p.Name, p.Annotations[policy.AnnotationChanges])
		}
	}
}

// lifecyclePods creates Windows pods with a chart's Linux-only defaults (runAsUser, fsGroup,
// capabilities) in a namespace labelled for wincompat.
type lifecyclePods struct {
	t  *testing.T
	c  client.Client
	ns string
	n  int
}

func (p *lifecyclePods) pod() *corev1.Pod {
	p.n++
	pod := e2eutil.WindowsPod(p.ns, fmt.Sprintf("lifecycle-%d", p.n))
	pod.Spec.SecurityContext.FSGroup = new(int64(2000))
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	return pod
}

// Who rewrote a pod, read from its record: the admission policies mark it wincompat.io/admission-policy,
// the webhook wincompat.io/version.
type rewrittenBy struct{ policies, webhook bool }

var (
	bothEngines  = rewrittenBy{policies: true, webhook: true}
	webhookOnly  = rewrittenBy{webhook: true}
	policiesOnly = rewrittenBy{policies: true}
)

// rewritten creates a pod, which must be admitted and stored without the Linux-only fields, with the
// record of what changed, by exactly the engines given.
func (p *lifecyclePods) rewritten(step string, by rewrittenBy) *corev1.Pod {
	p.t.Helper()
	// The API server takes up added and deleted admission policies and bindings from its informers and
	// compiles them about once a second (k8s.io/apiserver, admission/plugin/policy/generic,
	// policy_source.go): a dry run shows when it acts as the step says it should.
	took := e2eutil.WaitUntil(p.t, 30*time.Second, fmt.Sprintf("%s: a dry run rewritten by %+v", step, by), func() bool {
		dry := p.pod()
		return p.c.Create(context.Background(), dry, client.DryRunAll) == nil && engines(dry) == by
	})
	p.t.Logf("%s: the admission chain acts as expected after %v", step, took.Round(time.Millisecond))
	pod := p.pod()
	if err := p.c.Create(context.Background(), pod); err != nil {
		p.t.Fatalf("%s: a Windows pod with Linux-only fields was not admitted: %v", step, err)
	}
	sc := pod.Spec.SecurityContext
	if csc := pod.Spec.Containers[0].SecurityContext; (sc != nil && (sc.RunAsUser != nil || sc.FSGroup != nil)) || (csc != nil && csc.Capabilities != nil) {
		p.t.Errorf("%s: stored with Linux-only fields: %+v %+v", step, sc, pod.Spec.Containers[0].SecurityContext)
	}
	if pod.Annotations[policy.AnnotationChanges] == "" {
		p.t.Errorf("%s: stored without %s: %v", step, policy.AnnotationChanges, pod.Annotations)
	}
	if got := engines(pod); got != by {
		p.t.Errorf("%s: rewritten by %+v, want %+v: %v", step, got, by, pod.Annotations)
	}
	return pod
}

func engines(pod *corev1.Pod) rewrittenBy {
	return rewrittenBy{policies: pod.Annotations[policy.AnnotationAdmissionPolicy] != "", webhook: pod.Annotations[policy.AnnotationVersion] != ""}
}

// rejected creates a pod, which the API server must reject for its Linux-only fields.
func (p *lifecyclePods) rejected(step string) {
	p.t.Helper()
	err := p.c.Create(context.Background(), p.pod())
	if err == nil || !strings.Contains(err.Error(), "cannot be set for a windows pod") {
		p.t.Errorf("%s: a Windows pod with Linux-only fields was not rejected by the API server: %v", step, err)
	}
}

// dryRun creates a pod in dry run: nil when it would be admitted.
func (p *lifecyclePods) dryRun() error {
	return p.c.Create(context.Background(), p.pod(), client.DryRunAll)
}

// waitForAdmissionPolicies waits up to 30 s until n MutatingAdmissionPolicies and n bindings exist, and
// fails the test (going on) when they do not.
func waitForAdmissionPolicies(t *testing.T, c client.Client, n int) {
	t.Helper()
	start := time.Now()
	var maps admissionregistrationv1.MutatingAdmissionPolicyList
	var bindings admissionregistrationv1.MutatingAdmissionPolicyBindingList
	for c.List(context.Background(), &maps) != nil || len(maps.Items) != n || c.List(context.Background(), &bindings) != nil || len(bindings.Items) != n {
		if time.Since(start) > 30*time.Second {
			t.Errorf("after 30s: %d admission policies and %d bindings, want %d of each", len(maps.Items), len(bindings.Items), n)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d admission policies and bindings after %v", n, time.Since(start).Round(time.Millisecond))
}

// checkEngine checks the engine the chart chose and the failurePolicy of its Windows webhooks: Fail when
// the webhook alone decides, Ignore when the admission policies do the static part.
func checkEngine(t *testing.T, c client.Client, engine string) {
	t.Helper()
	if args := e2eutil.DeploymentArgs(t, c); !slices.Contains(args, "--engine="+engine) {
		t.Errorf("the Deployment does not run engine %s: %q", engine, args)
	}
	want := admissionregistrationv1.Fail
	if engine == "hybrid" {
		want = admissionregistrationv1.Ignore
	}
	var m admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(context.Background(), client.ObjectKey{Name: e2eutil.WebhookConfigName}, &m); err != nil {
		t.Fatal(err)
	}
	for _, w := range m.Webhooks {
		if w.Name == "pods.wincompat.io" && (w.FailurePolicy == nil || *w.FailurePolicy != want) {
			t.Errorf("engine %s: webhook %s failurePolicy %v, want %s", engine, w.Name, w.FailurePolicy, want)
		}
	}
}

func countObjects(t *testing.T, c client.Client, group, version, kind, ns string) int {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind + "List"})
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// clusterObjects lists every object of every resource the API server serves (but Events, which expire by
// themselves), as "group/resource namespace/name", sorted.
func clusterObjects(t *testing.T, cp *controlplane.ControlPlane) []string {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metadata.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	seen := map[schema.GroupResource]bool{}
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		for _, r := range l.APIResources {
			gr := schema.GroupResource{Group: gv.Group, Resource: r.Name}
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || seen[gr] || r.Name == "events" {
				continue
			}
			seen[gr] = true
			objs, err := mc.Resource(gv.WithResource(r.Name)).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("listing %s: %v", gr, err)
			}
			for _, o := range objs.Items {
				name := o.Name
				if o.Namespace != "" {
					name = o.Namespace + "/" + name
				}
				keys = append(keys, gr.String()+" "+name)
			}
		}
	}
	// group/resource first: GroupResource.String() is resource.group.
	for i, k := range keys {
		gr, name, _ := strings.Cut(k, " ")
		resource, group, _ := strings.Cut(gr, ".")
		keys[i] = group + "/" + resource + " " + name
	}
	slices.Sort(keys)
	return keys
}
