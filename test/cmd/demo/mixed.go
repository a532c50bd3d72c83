package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook/audit"
)

// The third part: mixed clusters both ways.
const (
	linuxApps = "apps"            // labelled wincompat.io/default-os=linux
	plainApps = "apps-unlabelled" // the same objects without wincompat's Linux pin
)

// Two more Windows nodes: one untainted, as AKS leaves them, one tainted the GKE way.
var (
	nodeAKS  = nodeSpec{"win2025-aks", "windows", build2025}
	nodeGKE  = nodeSpec{"win2025-gke", "windows", build2025}
	gkeTaint = corev1.Taint{Key: "node.kubernetes.io/os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}
)

// mixedClusters shows the other direction (Linux workloads that choose no operating system, pinned in a
// namespace labelled default-os=linux), the tolerations a Windows pod takes from the taints it finds,
// the injector opt-outs, and what the audit reports.
func (d *demo) mixedClusters(ctx context.Context) error {
	d.section("Mixed clusters both ways: Windows %s nodes join, %s untainted (as on AKS), %s tainted %s (as on GKE)",
		build2025, nodeAKS.name, nodeGKE.name, gkeTaint.ToString())
	for _, n := range []struct {
		spec   nodeSpec
		taints []corev1.Taint
	}{{nodeAKS, nil}, {nodeGKE, []corev1.Taint{gkeTaint}}} {
		if err := fixtures.AddNode(ctx, d.c, fixtures.Node{Name: n.spec.name, OS: n.spec.os, Build: n.spec.build}, 110); err != nil {
			return err
		}
		var node corev1.Node
		if err := d.c.Get(ctx, client.ObjectKey{Name: n.spec.name}, &node); err != nil {
			return err
		}
		node.Spec.Taints = n.taints
		if err := d.c.Update(ctx, &node); err != nil {
			return fmt.Errorf("tainting %s: %w", n.spec.name, err)
		}
		d.nodes[n.spec.name] = n.spec
	}
	d.warnings.Take()

	d.step("Linux workloads that choose no operating system: a DaemonSet and a Deployment, in %s (labelled %s=linux) and in %s",
		linuxApps, policy.LabelDefaultOS, plainApps)
	for _, ns := range []struct {
		name   string
		labels map[string]string
	}{{linuxApps, map[string]string{policy.LabelDefaultOS: "linux"}}, {plainApps, nil}} {
		if err := d.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name, Labels: ns.labels}}); err != nil {
			return err
		}
		if err := d.waitForDefaultServiceAccount(ctx, ns.name); err != nil {
			return err
		}
	}
	if err := d.waitForLinuxPin(ctx); err != nil {
		return err
	}
	var nodeList corev1.NodeList
	if err := d.c.List(ctx, &nodeList); err != nil {
		return err
	}
	var wrong []string
	for _, ns := range []string{linuxApps, plainApps} {
		ds := logAgent(ns)
		if err := d.c.Create(ctx, ds); err != nil {
			return fmt.Errorf("creating DaemonSet %s/%s: %w", ns, ds.Name, err)
		}
		d.warnings.Take()
		// The DaemonSet controller does not run here: its own rule says which nodes would get a pod.
		var targets, onWindows []string
		for i := range nodeList.Items {
			if run, _ := daemon.NodeShouldRunDaemonPod(logr.Discard(), &nodeList.Items[i], ds); run {
				targets = append(targets, nodeList.Items[i].Name)
				if d.nodes[nodeList.Items[i].Name].os == "windows" {
					onWindows = append(onWindows, nodeList.Items[i].Name)
				}
			}
		}
		d.detail("%-16s DaemonSet log-agent  nodeSelector %-22s the DaemonSet controller targets %s", ns, selector(&ds.Spec.Template.Spec), strings.Join(targets, ", "))
		what := ns + ":"
		if ns == linuxApps {
			what = ns + " (" + policy.LabelDefaultOS + "=linux):"
		}
		if (ns == linuxApps) != (len(onWindows) == 0) {
			wrong = append(wrong, fmt.Sprintf("DaemonSet %s/log-agent targets Windows nodes %v", ns, onWindows))
		}

		pod := apiPod(ns)
		if err := d.c.Create(ctx, pod); err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", ns, pod.Name, err)
		}
		d.warnings.Take()
		reports := []podReport{{namespace: ns, name: pod.Name}}
		if err := d.waitBound(ctx, reports, time.Now()); err != nil {
			return err
		}
		var stored corev1.Pod
		if err := d.c.Get(ctx, client.ObjectKeyFromObject(pod), &stored); err != nil {
			return err
		}
		d.detail("%-16s Pod api              nodeSelector %-22s bound to %s", ns, selector(&stored.Spec), stored.Spec.NodeName)
		d.brief("%s DaemonSet log-agent targets %s; pod api, nodeSelector %s, on %s", what, strings.Join(targets, ", "), selector(&stored.Spec), stored.Spec.NodeName)
		if ns == linuxApps && d.nodes[stored.Spec.NodeName].os != "linux" {
			wrong = append(wrong, fmt.Sprintf("pod %s/api on %s", ns, stored.Spec.NodeName))
		}
	}
	d.detail("without the label nothing keeps them off the untainted %s: the DaemonSet controller makes a pod", nodeAKS.name)
	d.detail("there, which fails, and the scheduler may put the bare pod there too")

	if err := d.windowsTolerations(ctx); err != nil {
		return err
	}

	d.step("wincompat audit (in process) on %s and %s", linuxApps, plainApps)
	var audited []string
	rep, err := audit.Run(ctx, d.c, audit.Options{Namespaces: []string{linuxApps, plainApps}})
	if err != nil {
		return err
	}
	found := 0
	for _, f := range rep.Findings {
		if f.Kind == audit.NoOSPin || f.Kind == audit.DaemonSetOnWindows {
			d.detail("%-21s %s/%s: %s", f.Kind, f.Namespace, f.Object, f.Detail)
			audited = append(audited, string(f.Kind)+" "+f.Namespace+"/"+f.Object)
			found++
			if f.Namespace == linuxApps {
				wrong = append(wrong, "audit reports "+f.Object+" in "+linuxApps)
			}
		}
	}
	if found == 0 {
		wrong = append(wrong, "the audit reports nothing of "+plainApps)
	}
	if len(wrong) > 0 {
		return fmt.Errorf("mixed clusters: %s", strings.Join(wrong, "; "))
	}
	d.brief("wincompat audit: %s", strings.Join(audited, ", "))
	if d.verbose {
		fmt.Fprintln(d.out)
	}
	d.say("in %s nothing that chose no operating system can reach a Windows node; the audit finds what can in %s", linuxApps, plainApps)
	return nil
}

// windowsTolerations creates a Windows pod in the shop namespace, configured with no taint but the
// policy's default, and shows the tolerations and injector opt-outs it gets.
func (d *demo) windowsTolerations(ctx context.Context) error {
	d.step("a Windows pod in %s: tolerations from the taints found on Windows nodes, injector opt-outs", shopNamespace)
	sp := &shopPod{name: "iis", containers: []shopContainer{{"iis", imgAPI}}}
	// The inventory sees the new node's taint a moment after it was set.
	var pod *corev1.Pod
	err := d.poll(ctx, 30*time.Second, func() (bool, error) {
		pod = sp.pod()
		if err := d.c.Create(ctx, pod, client.DryRunAll); err != nil {
			return false, nil
		}
		return slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == gkeTaint.Key }), nil
	})
	d.warnings.Take()
	if err != nil {
		return fmt.Errorf("wincompat did not come to tolerate %s on a Windows pod: %w", gkeTaint.ToString(), err)
	}
	pod = sp.pod()
	if err := d.c.Create(ctx, pod); err != nil {
		return err
	}
	d.warnings.Take()
	if err := d.waitBound(ctx, []podReport{{namespace: shopNamespace, name: pod.Name}}, time.Now()); err != nil {
		return err
	}
	if err := d.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		return err
	}
	var tolerated []string // in a few words
	for _, t := range pod.Spec.Tolerations {
		var why string
		switch t.Key {
		case gkeTaint.Key:
			why = "wincompat: found on " + nodeGKE.name + ", no configuration"
		case "os":
			why = "wincompat: the policy's windowsNodeTaints"
		default:
			continue // the API server's DefaultTolerationSeconds (not-ready, unreachable)
		}
		d.detail("toleration  %-42s (%s)", t.Key+"="+t.Value+":"+string(t.Effect), why)
		taint := t.Key + "=" + t.Value + ":" + string(t.Effect)
		if t.Key == gkeTaint.Key {
			tolerated = append(tolerated, taint+" found on "+nodeGKE.name)
		} else {
			tolerated = append(tolerated, "the policy's "+taint)
		}
	}
	var optOuts []string
	for _, in := range policy.Injectors() {
		form, v := "annotation", pod.Annotations[in.Key]
		if in.Label {
			form, v = "label", pod.Labels[in.Key]
		}
		if v == in.Value {
			optOuts = append(optOuts, fmt.Sprintf("%s (%s %s=%s)", in.Name, form, in.Key, v))
		}
	}
	d.detail("opted out of %d Linux-only injectors: %s", len(optOuts), strings.Join(optOuts[:3], ", ")+", ...")
	d.detail("bound to %s; a team's taint on a node would never be tolerated", pod.Spec.NodeName)
	d.brief("a Windows pod in %s tolerates %s;", shopNamespace, strings.Join(tolerated, " and "))
	d.brief("  it opts out of %d Linux-only sidecar injectors, and is bound to %s", len(optOuts), pod.Spec.NodeName)
	if len(optOuts) != len(policy.Injectors()) {
		return fmt.Errorf("the Windows pod has %d of %d injector opt-outs", len(optOuts), len(policy.Injectors()))
	}
	return nil
}

// waitForLinuxPin returns once wincompat pins a dry-run pod in the labelled namespace: it reads
// namespaces from its cache.
func (d *demo) waitForLinuxPin(ctx context.Context) error {
	err := d.poll(ctx, 30*time.Second, func() (bool, error) {
		p := apiPod(linuxApps)
		if err := d.c.Create(ctx, p, client.DryRunAll); err != nil {
			return false, nil
		}
		return p.Spec.NodeSelector[corev1.LabelOSStable] == "linux", nil
	})
	d.warnings.Take()
	if err != nil {
		return fmt.Errorf("wincompat did not pin a pod in %s to Linux: %w", linuxApps, err)
	}
	return nil
}

func logAgent(ns string) *appsv1.DaemonSet {
	labels := map[string]string{"app": "log-agent"}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "log-agent", Namespace: ns}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "agent", Image: "ghcr.io/example/log-agent:2.3"}},
		}},
	}}
}

func apiPod(ns string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "api", Image: "ghcr.io/example/api:1.0"}},
	}}
}

func selector(spec *corev1.PodSpec) string {
	if len(spec.NodeSelector) == 0 {
		return "(none)"
	}
	var s []string
	for k, v := range spec.NodeSelector {
		s = append(s, k+"="+v)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}
