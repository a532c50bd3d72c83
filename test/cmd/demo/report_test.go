package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/fixtures"
)

// The pods these tests report on are made by the real policy from the real example: a Deployment's
// template decided as the API server stores it, and its replicas created from it as the Deployment
// controller would and decided again, so that the records read are the ones wincompat writes.

var demoFacts = func() policy.Facts {
	// The cluster of the first part: the catalog's RuntimeClasses as wincompat keeps them.
	classes := map[string]policy.RuntimeClass{}
	for _, n := range []string{build2019, build2022} {
		b, _ := policy.Default().ResolveBuild(n)
		classes[b.RuntimeClass] = policy.RuntimeClass{NodeSelector: policy.Default().RuntimeClassNodeSelector(b)}
	}
	return policy.Facts{
		Operation: policy.Create,
		Namespace: policy.Namespace{Name: demoNamespace, Labels: map[string]string{policy.LabelEnabled: "true", policy.LabelDefaultOS: "windows"}},
		Cluster:   &policy.Cluster{Builds: []string{build2019, build2022}, RuntimeClasses: classes},
		Version:   "test",
	}
}()

var testNodes = map[string]nodeSpec{
	"linux-0":   {"linux-0", "linux", ""},
	"win2019-0": {"win2019-0", "windows", build2019},
	"win2022-0": {"win2022-0", "windows", build2022},
}

// exampleDeployment is the Deployment of a file in deploy/examples.
func exampleDeployment(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	docs, err := fixtures.ReadDocuments(filepath.Join("..", "..", "..", "deploy", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.GetKind() == "Deployment" {
			d.SetNamespace(demoNamespace)
			return d
		}
	}
	t.Fatalf("%s has no Deployment", file)
	return nil
}

// linuxDeployment is a Deployment of a Linux image declared Windows, as the demo declares a chart.
func linuxDeployment(t *testing.T, name, image string) *unstructured.Unstructured {
	t.Helper()
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: demoNamespace},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				OS:              &corev1.PodOS{Name: corev1.Windows},
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](472), FSGroup: ptr.To[int64](472)},
				Containers:      []corev1.Container{{Name: name, Image: image}},
			}}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// admitted are the pods of w as the demo reads them back: template and pods decided by the real policy
// with images (what registries said of them; nil: nothing), each pod bound to the next of nodes.
func admitted(t *testing.T, w *unstructured.Unstructured, images map[string]policy.Image, nodes ...string) []podReport {
	t.Helper()
	facts := demoFacts
	facts.Images = images
	var dep appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(w.Object, &dep); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Default().Decide(&dep, facts); err != nil {
		t.Fatal(err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&dep)
	if err != nil {
		t.Fatal(err)
	}
	stored := &unstructured.Unstructured{Object: obj}
	var reports []podReport
	for i, node := range nodes {
		u, err := podFromTemplate(stored)
		if err != nil {
			t.Fatal(err)
		}
		var pod corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
			t.Fatal(err)
		}
		pod.Name = pod.GenerateName + string(rune('a'+i)) + "x1z"
		decision, err := policy.Default().Decide(&pod, facts)
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.NodeName = node
		reports = append(reports, podReport{namespace: demoNamespace, name: pod.Name, owner: "Deployment " + w.GetName(),
			warnings: policy.Warnings(decision.Changes), pod: pod})
	}
	return reports
}

// linuxOnly is what a registry says of an image with no Windows entry.
var linuxOnly = policy.Image{Platforms: []policy.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}}

// The first part's report: identical replicas are one line, and a pod whose image has no Windows entry
// is not counted among the pods on Windows nodes, though kube-scheduler bound it to one.
func TestReportGroupsReplicasAndCountsLinuxImagesApart(t *testing.T) {
	const agent = "docker.io/example/agent:1.0"
	var pods []podReport
	pods = append(pods, admitted(t, exampleDeployment(t, "win-webserver.yaml"), nil, "win2019-0", "win2019-0")...)
	pods = append(pods, admitted(t, linuxDeployment(t, "agent", agent), map[string]policy.Image{agent: linuxOnly}, "win2022-0")...)
	var out bytes.Buffer
	d := &demo{out: &out, nodes: testNodes, pods: pods}
	if err := d.report(); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Logf("report:\n%s", text)

	var webserver, agentLines []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "win-webserver") {
			webserver = append(webserver, line)
		}
		if strings.Contains(line, "agent") {
			agentLines = append(agentLines, line)
		}
	}
	if len(webserver) != 1 || !strings.Contains(webserver[0], "2 pods") || !strings.Contains(webserver[0], "win2019-0") {
		t.Errorf("want the two identical win-webserver replicas as one line saying 2 pods on win2019-0, got %q", webserver)
	}
	for _, p := range pods {
		if strings.Contains(text, p.name) {
			t.Errorf("the default report names pod %s: replicas are told apart only with -v", p.name)
		}
	}
	if strings.Contains(text, "3 pods") {
		t.Errorf("the report counts the pod of a Linux-only image with the others:\n%s", text)
	}
	if !strings.Contains(text, "2 pods of Windows images") {
		t.Errorf("the report does not count the 2 Windows pods apart:\n%s", text)
	}
	said := false
	for _, line := range agentLines {
		said = said || strings.Contains(line, "Linux") && strings.Contains(line, "win2022-0") && strings.Contains(line, agent)
	}
	if !said {
		t.Errorf("no line says the agent pod's image %s is a Linux image and that it went to win2022-0: %q", agent, agentLines)
	}
	if n := strings.Count(strings.TrimSpace(text), "\n") + 1; n > 8 {
		t.Errorf("the report of 2 pod shapes is %d lines, want at most 8", n)
	}
}

// With -v each pod shape is one block naming its pods, and no line is printed twice: not a change the
// replicas share, not a warning already printed when their workload was applied.
func TestVerboseReportPrintsEachShapeOnce(t *testing.T) {
	dep := exampleDeployment(t, "win-webserver.yaml")
	pods := admitted(t, dep, nil, "win2019-0", "win2019-0")
	// The warnings printed when the Deployment was applied: its template's changes, in words.
	var typed appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(dep.Object, &typed); err != nil {
		t.Fatal(err)
	}
	decision, err := policy.Default().Decide(&typed, demoFacts)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	d := &demo{out: &out, verbose: true, nodes: testNodes, pods: pods,
		applyWarnings: map[string][]string{"Deployment win-webserver": policy.Warnings(decision.Changes)}}
	if err := d.report(); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Logf("report:\n%s", text)
	header := pods[0].name + ", " + pods[1].name
	if strings.Count(text, header) != 1 {
		t.Errorf("want one block headed by both replicas %q", header)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if seen[line] {
			t.Errorf("printed twice: %q", line)
		}
		seen[line] = true
		for _, w := range policy.Warnings(decision.Changes) {
			if strings.Contains(line, w) {
				t.Errorf("the template's warning %q, printed at apply time, is printed again", w)
			}
		}
	}
	for _, want := range []string{"rewrote: emptyDir.medium", "RuntimeClass  windows-2019", "2 pods of Windows images"} {
		if strings.Count(text, want) != 1 {
			t.Errorf("want %q once, got %d times", want, strings.Count(text, want))
		}
	}
}

// The chart's pods are Linux software the demo declares Windows: with no registry to say so (offline,
// the usual case), they are still told apart from the pods of Windows images, and where they went said.
func TestLinuxChartPodsAreNotCounted(t *testing.T) {
	const grafana = "docker.io/grafana/grafana:13.2.0"
	chart := admitted(t, linuxDeployment(t, "grafana", grafana), nil, "win2022-0")
	for i := range chart {
		chart[i].linuxChart = true
	}
	iis := admitted(t, exampleDeployment(t, "iis-2019.yaml"), nil, "win2019-0")
	var out bytes.Buffer
	d := &demo{out: &out, nodes: testNodes, pods: append(iis, chart...)}
	if err := d.report(); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Logf("report:\n%s", text)
	if !strings.Contains(text, "1 pod of Deployment grafana: Linux image "+grafana+" (a Linux chart declared Windows)") ||
		!strings.Contains(text, "bound to win2022-0, where it would not start") {
		t.Errorf("the report does not say the chart's pod is of a Linux image and where it went")
	}
	if !strings.Contains(text, "1 pod of Windows images on Windows nodes") ||
		!strings.Contains(text, "not counted: 1 pod of Linux images (Deployment grafana)") {
		t.Errorf("the report counts the chart's pod among the pods of Windows images")
	}
}

// brief says what changed in one line, each kind of field once, whatever the containers and replicas.
func TestBrief(t *testing.T) {
	pods := admitted(t, exampleDeployment(t, "win-webserver.yaml"), nil, "win2019-0")
	g := groupPods(pods)[0]
	const want = "removed 6 Linux-only fields; rewrote emptyDir.medium; " +
		"set runAsUserName, injector opt-outs, nodeSelector, tolerations, RuntimeClass; warned: memory-emptydir, memory-no-limit"
	if got := g.changes(); got != want {
		t.Errorf("changes:\n got %s\nwant %s", got, want)
	}
	for _, tc := range []struct {
		change policy.Change
		want   string
	}{
		{policy.Change{Action: policy.Inject, Path: "spec.nodeSelector[kubernetes.io/os]"}, "nodeSelector"},
		{policy.Change{Action: policy.Warn, Path: "spec.containers[app].volumeMounts[/etc/app/app.ini].subPath"}, "volumeMounts.subPath"},
		{policy.Change{Action: policy.Warn, Path: "spec.containers[app].image", Reason: "anything"}, "image"},
		{policy.Change{Action: policy.Inject, Path: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"}, "node affinity"},
	} {
		if got := briefName(tc.change); got != tc.want {
			t.Errorf("briefName(%s) = %q, want %q", tc.change.Path, got, tc.want)
		}
	}
}

// Every command -keep suggests names the demo's kubeconfig, so that none reaches the user's own
// cluster; kubectl is suggested only when there is one.
func TestExploreLines(t *testing.T) {
	for _, kubectl := range []bool{true, false} {
		lines := exploreLines("bin/demo/kubeconfig", "bin/wincompat", kubectl)
		commands := 0
		for _, l := range lines {
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "bin/wincompat ") || strings.HasPrefix(l, "kubectl ") {
				commands++
				if !strings.Contains(l, "--kubeconfig bin/demo/kubeconfig") {
					t.Errorf("kubectl %v: %q does not name the demo's kubeconfig", kubectl, l)
				}
			}
			if !kubectl && strings.HasPrefix(l, "kubectl ") {
				t.Errorf("no kubectl, yet %q", l)
			}
		}
		if want := map[bool]int{true: 5, false: 2}[kubectl]; commands != want {
			t.Errorf("kubectl %v: %d commands, want %d: %q", kubectl, commands, want, lines)
		}
	}
}
