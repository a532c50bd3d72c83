package auditing

// Issue 13, item 5: `wincompat audit --builds`, the migration planner, run as the real binary against
// the real kube-apiserver, first judging images by their tags, then with --resolve-images reading them
// from a registry on loopback (go-containerregistry's, through registrytest) that holds every image the
// pods name, so that nothing leaves the machine. The pods are created as wincompat would have left them
// (annotations and pins written here), in a namespace that is not opted in, so no webhook is involved.

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/audit"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

func TestAuditBuilds(t *testing.T) {
	cl := e2eutil.NewCluster(t)
	for _, n := range []e2eutil.TestNode{{Name: "win2019-0", OS: "windows", Build: e2eutil.Build2019}, {Name: "win2022-0", OS: "windows", Build: e2eutil.Build2022}, {Name: "win2025-0", OS: "windows", Build: e2eutil.Build2025}} {
		cl.AddNode(t, n)
	}
	reg := registrytest.Start()
	t.Cleanup(reg.Close)
	push := func(ref string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	// The tags of the first three name their build, as Microsoft's do; the others' say nothing.
	var (
		servercore2019 = push(reg.PushIndex("windows/servercore", "ltsc2019", types.DockerManifestList, registrytest.Windows("10.0.17763.5830")))
		nanoserver2022 = push(reg.PushIndex("windows/nanoserver", "ltsc2022", types.OCIImageIndex, registrytest.Windows("10.0.20348.2227")))
		servercore2025 = push(reg.PushIndex("windows/servercore", "ltsc2025", types.OCIImageIndex, registrytest.Windows("10.0.26100.2894")))
		api            = push(reg.PushIndex("shop/api", "1.4.2", types.OCIImageIndex, registrytest.Windows("10.0.17763.5830"), registrytest.Windows("10.0.26100.2894"), registrytest.Linux("amd64")))
		legacy         = push(reg.PushImage("shop/legacy", "3.0", registrytest.Windows("10.0.17763.5830"))) // os.version in its config only
		agent          = push(reg.PushImage("tools/agent", "2.3", registrytest.Linux("amd64")))
	)

	ctx := context.Background()
	const ns = "migrate"
	e2eutil.SetUpNamespace(ctx, t, cl.C, ns, nil, nil)
	pod := func(name, image string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{}},
			Spec: corev1.PodSpec{
				OS:          &corev1.PodOS{Name: corev1.Windows},
				Containers:  []corev1.Container{{Name: "app", Image: image}},
				Tolerations: []corev1.Toleration{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}},
			},
		}
	}
	// chosen marks a pod as wincompat leaves it: the builds it chose (several: required node affinity),
	// from the images, and the pins that go with them.
	chosen := func(p *corev1.Pod, node, source string, builds ...string) *corev1.Pod {
		p.Annotations[policy.AnnotationVersion] = "e2e"
		p.Annotations[policy.AnnotationBuild] = strings.Join(builds, ",")
		p.Annotations[policy.AnnotationBuildSource] = source
		if len(builds) == 1 {
			p.Spec.NodeSelector = map[string]string{corev1.LabelWindowsBuild: builds[0]}
		} else {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: builds}}}}}}}
		}
		p.Spec.NodeName = node
		return p
	}
	userPinned := func(p *corev1.Pod, build string) *corev1.Pod {
		p.Spec.NodeSelector = map[string]string{corev1.LabelWindowsBuild: build}
		return p
	}
	sidecar := pod("sidecar", nanoserver2022)
	sidecar.Spec.Containers = append(sidecar.Spec.Containers, corev1.Container{Name: "agent", Image: agent})
	hostAgent := pod("", servercore2019).Spec
	hostAgent.HostNetwork = true
	hostAgent.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
		HostProcess: ptr.To(true), RunAsUserName: ptr.To(`NT AUTHORITY\SYSTEM`)}}
	nightly := pod("", servercore2019).Spec
	nightly.RestartPolicy = corev1.RestartPolicyOnFailure
	labels := map[string]string{"app": "x"}
	template := func(spec corev1.PodSpec) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}
	}
	for _, obj := range []client.Object{
		pod("iis-2019", servercore2019),
		pod("api-2022", nanoserver2022),
		pod("web-2025", servercore2025),
		userPinned(pod("pinned-17763", api), e2eutil.Build2019),
		userPinned(pod("legacy-pinned-20348", legacy), e2eutil.Build2022),
		// wincompat pinned it to 2022 from its tag; a 2025 node runs 2022 images, so it is no mismatch,
		// and its pin, derived from the image, does not hold it back from 2025.
		chosen(pod("wincompat-2022", nanoserver2022), "win2025-0", policy.SourceImage, e2eutil.Build2022),
		chosen(pod("multi-on-2025", api), "win2025-0", policy.SourceImageManifest, e2eutil.Build2019, e2eutil.Build2025),
		chosen(pod("multi-on-2022", api), "win2022-0", policy.SourceImageManifest, e2eutil.Build2019, e2eutil.Build2025),
		sidecar,
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template(pod("", legacy).Spec)}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "host-agent", Namespace: ns},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template(hostAgent)}},
		&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
			Spec: batchv1.CronJobSpec{Schedule: "0 2 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template(nightly)}}}},
		e2eutil.LinuxPod(ns, "linux-agent", nil),
	} {
		createUnmutated(t, cl, obj)
	}

	bin := e2eutil.BuildWincompat(t)
	kubeconfig := e2eutil.WriteKubeConfig(t, cl, "audit-builds-admin", "system:masters")
	// An empty docker config: anonymous pulls, whatever the machine's user has configured.
	env := []string{"DOCKER_CONFIG=" + t.TempDir()}
	report := func(t *testing.T, args ...string) *audit.Report {
		t.Helper()
		args = append([]string{"audit", "--kubeconfig", kubeconfig, "-n", ns, "-o", "json"}, args...)
		r := runWincompat(t, bin, env, args...)
		if r.code != 0 || strings.TrimSpace(progress.ReplaceAllString(r.stderr, "")) != "" {
			t.Fatalf("wincompat %s: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		var rep audit.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		return &rep
	}
	// Before the runs: pushing asks the registry about manifests too.
	pushed := reg.Requests.Load()
	const on2025 = " cannot run on " + e2eutil.Build2025
	pinnedTo := func(b string) string { return "pinned to Windows build " + b + " by " + corev1.LabelWindowsBuild }
	mismatch := "build-mismatch Pod/multi-on-2022: chosen builds 10.0.17763, 10.0.26100, but node win2022-0 runs 10.0.20348"

	t.Run("tags", func(t *testing.T) {
		rep := report(t, "--builds", e2eutil.Build2025)
		checkBuildFindings(t, rep, []string{
			"cannot-run-on-builds Pod/iis-2019: containers[app]: image " + servercore2019 + " (tag: Windows build 10.0.17763)" + on2025,
			"cannot-run-on-builds Pod/pinned-17763: " + pinnedTo(e2eutil.Build2019),
			"cannot-run-on-builds Pod/legacy-pinned-20348: " + pinnedTo(e2eutil.Build2022),
			"cannot-run-on-builds CronJob/nightly: containers[app]: image " + servercore2019 + " (tag: Windows build 10.0.17763)" + on2025,
			mismatch,
		})
		checkBuildsSummary(t, rep, audit.BuildsSummary{Builds: []string{e2eutil.Build2025}, Pods: 9, PodsRunnable: 6, Templates: 3, TemplatesRunnable: 2,
			Reasons: []audit.ReasonRow{
				{Reason: "image " + servercore2019 + " (tag: Windows build 10.0.17763)" + on2025, Pods: 1, Templates: 1},
				{Reason: pinnedTo(e2eutil.Build2019), Pods: 1},
				{Reason: pinnedTo(e2eutil.Build2022), Pods: 1},
			}})
		if got := reg.Requests.Load() - pushed; got != 0 {
			t.Errorf("the registry was asked %d times without --resolve-images", got)
		}
	})

	t.Run("registry", func(t *testing.T) {
		before := reg.Requests.Load()
		// The registry is on loopback, which an audit dials only when told: its references are the pod authors'.
		rep := report(t, "--builds", "ltsc2025", "--resolve-images", "--image-allow-private-networks")
		checkBuildFindings(t, rep, []string{
			"cannot-run-on-builds Pod/iis-2019: containers[app]: image " + servercore2019 + " (windows/amd64:10.0.17763.5830)" + on2025,
			"cannot-run-on-builds Pod/pinned-17763: " + pinnedTo(e2eutil.Build2019),
			"cannot-run-on-builds Pod/legacy-pinned-20348: " + pinnedTo(e2eutil.Build2022) + "; containers[app]: image " + legacy + " (windows/amd64:10.0.17763.5830)" + on2025,
			"cannot-run-on-builds Pod/sidecar: containers[agent]: image " + agent + " (linux/amd64) has no Windows entry",
			"cannot-run-on-builds Deployment/legacy: containers[app]: image " + legacy + " (windows/amd64:10.0.17763.5830)" + on2025,
			"cannot-run-on-builds CronJob/nightly: containers[app]: image " + servercore2019 + " (windows/amd64:10.0.17763.5830)" + on2025,
			"build-not-in-image Pod/legacy-pinned-20348: pinned to 10.0.20348 by its nodeSelector, but containers[app]: image " + legacy + " (windows/amd64:10.0.17763.5830) cannot run on 10.0.20348",
			"linux-only-image Pod/sidecar: containers[agent]: image " + agent + " (linux/amd64) has no Windows entry",
			mismatch,
		})
		checkBuildsSummary(t, rep, audit.BuildsSummary{Builds: []string{e2eutil.Build2025}, Pods: 9, PodsRunnable: 5, Templates: 3, TemplatesRunnable: 1,
			Reasons: []audit.ReasonRow{
				{Reason: "image " + legacy + " (windows/amd64:10.0.17763.5830)" + on2025, Pods: 1, Templates: 1},
				{Reason: "image " + servercore2019 + " (windows/amd64:10.0.17763.5830)" + on2025, Pods: 1, Templates: 1},
				{Reason: "image " + agent + " (linux/amd64) has no Windows entry", Pods: 1},
				{Reason: pinnedTo(e2eutil.Build2019), Pods: 1},
				{Reason: pinnedTo(e2eutil.Build2022), Pods: 1},
			}})
		// Six distinct images in Windows objects, several named by more than one: one manifest request each.
		if got := reg.Requests.Load() - before; got != 6 {
			t.Errorf("%d manifest requests, want 6: each distinct image once per run", got)
		}
	})

	t.Run("table and usage", func(t *testing.T) {
		r := runWincompat(t, bin, env, "audit", "--kubeconfig", kubeconfig, "-n", ns, "--builds", "2022,2025")
		if r.code != 0 || !strings.Contains(r.stdout, "\nBUILD CHECK") ||
			!strings.Contains(r.stdout, "\n  7 of 9 Windows pods and 2 of 3 Windows pod templates could run on 10.0.20348 or 10.0.26100\n") {
			t.Errorf("exit %d; the table lacks the BUILD CHECK summary for 2022 or 2025:\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = runWincompat(t, bin, env, "audit", "--kubeconfig", kubeconfig, "--builds", "ltsc2030")
		if r.code != 2 || !strings.Contains(r.stderr, `--builds: "ltsc2030" is not a Windows build`) {
			t.Errorf("--builds ltsc2030: exit %d, stderr %q; want 2 and the build named", r.code, r.stderr)
		}
	})
}

// progress is what audit prints on stderr when reading takes more than a second.
var progress = regexp.MustCompile(`\rread \d+ objects[^\r\n]*\n?`)

// checkBuildFindings compares the findings about builds and images, as "kind Kind/name: detail".
func checkBuildFindings(t *testing.T, rep *audit.Report, want []string) {
	t.Helper()
	var got []string
	for _, f := range rep.Findings {
		switch f.Kind {
		case audit.CannotRunOnBuilds, audit.BuildNotInImage, audit.LinuxOnlyImage, audit.BuildMismatch, audit.PendingNoBuild:
			got = append(got, f.Kind+" "+f.Object+": "+f.Detail)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

func checkBuildsSummary(t *testing.T, rep *audit.Report, want audit.BuildsSummary) {
	t.Helper()
	got := rep.Builds
	if got == nil || !slices.Equal(got.Builds, want.Builds) || got.Pods != want.Pods || got.PodsRunnable != want.PodsRunnable ||
		got.Templates != want.Templates || got.TemplatesRunnable != want.TemplatesRunnable || !slices.Equal(got.Reasons, want.Reasons) {
		t.Errorf("build check:\n got %+v\nwant %+v", got, want)
	}
}
