package auditing

// Issue 6: `wincompat audit` against the real kube-apiserver. One control plane, started with an audit
// policy and --audit-log-path, is seeded with mutated and unmutated pods and workloads in three
// namespaces (pods created through wincompat's real webhook, pods it never saw, a skipped pod, a corrupt
// annotation, pods bound to fake nodes of another build, a pod no node can run); then the real
// `wincompat audit` binary reads it as an administrator and as users with less permission, and reads
// the API server's audit log. Goldens live in testdata/audit; UPDATE_GOLDEN=1 rewrites them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/webhook/audit"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// The seeded namespaces: shop and batch are opted in, legacy is not.
const (
	nsShop   = "shop"
	nsBatch  = "batch"
	nsLegacy = "legacy"
)

// auditGoldenDir holds the outputs TestAudit compares; auditGoldens are all of them. A file there that
// is not listed has no producing case: it fails TestAuditGoldensHaveCases (UPDATE_GOLDEN=1 removes it).
const auditGoldenDir = "testdata/audit"

var auditGoldens = []string{
	"summary.txt", "objects.txt", "namespaces.csv", "changes.csv", "findings.csv", "report.json",
	"auditlog.txt", "auditlog.json", "forbidden.txt",
}

// auditPolicy logs pods and the eight workload kinds at Metadata level, the level that carries
// admission webhooks' audit annotations. wincompat-ready is left out: serve's readiness probes are
// dry-run creates there, and their number depends on timing.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  namespaces: [` + e2eutil.ReadyNamespace + `]
- level: Metadata
  resources:
  - group: ""
    resources: [pods, replicationcontrollers, podtemplates]
  - group: apps
    resources: [deployments, replicasets, statefulsets, daemonsets]
  - group: batch
    resources: [jobs, cronjobs]
- level: None
`

func TestAudit(t *testing.T) {
	work := t.TempDir()
	policyFile, logFile := filepath.Join(work, "audit-policy.yaml"), filepath.Join(work, "audit.log")
	if err := os.WriteFile(policyFile, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	// envtest runs kube-apiserver with --authorization-mode=RBAC (its default arguments), which the
	// permission cases below rely on; the first of them checks that a user without bindings is refused.
	cl := e2eutil.NewCluster(t,
		controlplane.WithAPIServerFlag("audit-policy-file", policyFile),
		controlplane.WithAPIServerFlag("audit-log-path", logFile),
		controlplane.WithAPIServerFlag("audit-log-format", "json"),
		// Rotation would split the log under the test; 1 GiB is never reached.
		controlplane.WithAPIServerFlag("audit-log-maxsize", "1024"),
	)
	// Nodes before wincompat starts, so its first inventory already holds them: whether a pod's changes
	// carry "no ready node runs build ..." must not depend on informer timing.
	for _, n := range []e2eutil.TestNode{{Name: "linux-0", OS: "linux", Build: ""}, {Name: "win2019-0", OS: "windows", Build: e2eutil.Build2019}, {Name: "win2022-0", OS: "windows", Build: e2eutil.Build2022}} {
		cl.AddNode(t, n)
	}
	cl.Serve(t)
	for _, b := range []struct{ image, build string }{{e2eutil.Images2019[0], e2eutil.Build2019}, {e2eutil.Images2022[0], e2eutil.Build2022}} {
		cl.WaitForAdmission(t, e2eutil.ReadyNamespace, e2eutil.ProbePod(b.image), "the "+b.build+" node", func(_ *corev1.Pod, w []string) bool {
			return !e2eutil.HasWarning(w, e2eutil.NoReadyNode(b.build))
		})
	}
	seedAudit(t, cl)

	bin := e2eutil.BuildWincompat(t)
	admin := e2eutil.WriteKubeConfig(t, cl, "audit-admin", "system:masters")
	goldens := &goldenSet{}
	t.Run("report", func(t *testing.T) { checkAuditReport(t, cl) })
	t.Run("goldens", func(t *testing.T) { checkAuditGoldens(t, cl, bin, admin, goldens) })
	t.Run("audit log", func(t *testing.T) { checkAuditLog(t, cl, bin, logFile, goldens) })
	t.Run("selection", func(t *testing.T) { checkAuditSelection(t, bin, admin) })
	t.Run("unreachable cluster", func(t *testing.T) { checkUnreachable(t, bin) })
	t.Run("usage and lookup errors", func(t *testing.T) { checkAuditErrors(t, bin, admin) })
	t.Run("no permission to list pods in one namespace", func(t *testing.T) { checkForbiddenNamespace(t, cl, bin, goldens) })
	t.Run("pods readable only namespace by namespace", func(t *testing.T) { checkPerNamespaceAccess(t, cl, bin, admin) })
	t.Run("build annotation set by the user", func(t *testing.T) { checkUserBuildAnnotation(t, cl) })
	t.Run("--kubeconfig is not rate-limited", func(t *testing.T) { checkKubeconfigNotThrottled(t, cl, bin, admin) })
	// Last: it adds requests to the audit log that the "audit log" case must not see.
	t.Run("audit log: dry-run and rejected requests", func(t *testing.T) { checkAuditLogNotStored(t, cl, logFile) })
	// After everything that reads all namespaces or counts the log: its objects are not in the goldens.
	t.Run("warn mode", func(t *testing.T) { checkWarnMode(t, cl, bin, admin, logFile) })

	// Unless -run picks some of the cases, every golden must have been compared.
	if f := flag.Lookup("test.run"); f == nil || !strings.Contains(f.Value.String(), "/") {
		goldens.checkAllCompared(t)
	}
}

// seedAudit creates the objects of the report. Names are fixed and nothing carries a timestamp, so
// that the outputs are byte-for-byte stable.
func seedAudit(t *testing.T, cl *e2eutil.Cluster) {
	t.Helper()
	ctx := context.Background()
	enabled := map[string]string{policy.LabelEnabled: "true"}
	// setUpNamespace, not newNamespace: newNamespace's dry-run probe would be audited in these
	// namespaces. wincompat reads a namespace it has not cached yet from the API server.
	e2eutil.SetUpNamespace(ctx, t, cl.C, nsShop, enabled, nil)
	e2eutil.SetUpNamespace(ctx, t, cl.C, nsBatch, enabled, nil)
	e2eutil.SetUpNamespace(ctx, t, cl.C, nsLegacy, nil, nil)

	// shop, through wincompat: a chart-style pod with two containers on a node of its build; a 2019 pod
	// bound to the 2022 node (build-mismatch); a 2025 pod that no node runs (pending-no-build); a
	// chart-style Deployment and a pod created from its stored template, as its ReplicaSet would; and a
	// Linux pod, which the report ignores.
	api := e2eutil.WindowsChartPod(nsShop, "api", e2eutil.Images2022[0], "app", "metrics")
	api.Spec.NodeName = "win2022-0"
	worker := e2eutil.WindowsChartPod(nsShop, "worker", e2eutil.Images2019[0], "worker")
	worker.Spec.NodeName = "win2022-0"
	report := e2eutil.WindowsChartPod(nsShop, "report", e2eutil.Images2025[0], "report")
	report.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
	report.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: `C:\scratch`}}
	for _, p := range []*corev1.Pod{api, worker, report} {
		createMutated(t, cl, p)
	}
	web := e2eutil.WindowsChartPod(nsShop, "web", e2eutil.Images2022[0], "app", "proxy")
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: nsShop, Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: web.Spec},
		},
	}
	createMutated(t, cl, deployment)
	webPod := &corev1.Pod{ObjectMeta: *deployment.Spec.Template.ObjectMeta.DeepCopy(), Spec: *deployment.Spec.Template.Spec.DeepCopy()}
	webPod.Name, webPod.Namespace = "web-1", nsShop
	webPod.Spec.NodeName = "win2022-0"
	createMutated(t, cl, webPod)
	e2eutil.Create(ctx, t, cl.C, e2eutil.LinuxPod(nsShop, "linux-tools", nil))

	// batch: a chart-style CronJob through wincompat, and a pod opted out with the skip label (the
	// webhook's objectSelector keeps it away, so it must be valid for Windows as it is).
	nightly := e2eutil.WindowsChartPod(nsBatch, "nightly", e2eutil.Images2019[0], "job")
	nightly.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: nsBatch},
		Spec: batchv1.CronJobSpec{Schedule: "0 2 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: nightly.Spec},
		}}},
	}
	createMutated(t, cl, cron)
	optedOut := plainWindowsPod(nsBatch, "opted-out", e2eutil.Images2022[0])
	optedOut.Labels = map[string]string{policy.LabelSkip: "true"}
	createUnmutated(t, cl, optedOut)

	// legacy, never seen by wincompat: a Windows pod without Linux-only fields on a 2019 node, a
	// Windows Deployment, and a pod mutated once whose changes annotation was since mangled by hand.
	plain := plainWindowsPod(nsLegacy, "plain", e2eutil.Images2019[0])
	plain.Spec.NodeName = "win2019-0"
	createUnmutated(t, cl, plain)
	app := plainWindowsPod(nsLegacy, "app", e2eutil.Images2022[0])
	createUnmutated(t, cl, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: nsLegacy},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "app"}}, Spec: app.Spec},
		},
	})
	corrupt := plainWindowsPod(nsLegacy, "corrupt", e2eutil.Images2022[0])
	corrupt.Spec.NodeName = "win2022-0"
	corrupt.Annotations = map[string]string{
		policy.AnnotationVersion:     "0.9.0",
		policy.AnnotationBuild:       e2eutil.Build2022,
		policy.AnnotationBuildSource: policy.SourceImage,
		policy.AnnotationChanges:     `[{"action":"strip","path":"spec.securityContext.runAsUser"},{"action":`,
	}
	createUnmutated(t, cl, corrupt)
}

// plainWindowsPod is a Windows pod the API server accepts without wincompat: no Linux-only fields.
func plainWindowsPod(ns, name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			OS:           &corev1.PodOS{Name: corev1.Windows},
			NodeSelector: map[string]string{corev1.LabelOSStable: "windows"},
			Containers:   []corev1.Container{{Name: "app", Image: image}},
		},
	}
}

// createMutated creates obj through the webhook and fails unless wincompat recorded itself on it: its
// version on a pod, its template changes on a workload's pod template.
func createMutated(t *testing.T, cl *e2eutil.Cluster, obj client.Object) {
	t.Helper()
	e2eutil.Create(context.Background(), t, cl.C, obj)
	if pod, ok := obj.(*corev1.Pod); ok {
		if pod.Annotations[policy.AnnotationVersion] != "e2e" {
			t.Fatalf("pod %s was not mutated by wincompat: annotations %v", pod.Name, pod.Annotations)
		}
		return
	}
	tpl, err := policy.PodTemplateOf(obj)
	if err != nil || tpl == nil || tpl.Annotations[policy.AnnotationTemplateChanges] == "" {
		t.Fatalf("%T %s was not mutated by wincompat (%v)", obj, obj.GetName(), err)
	}
}

// createUnmutated creates obj and fails if wincompat touched it.
func createUnmutated(t *testing.T, cl *e2eutil.Cluster, obj client.Object) {
	t.Helper()
	before := obj.DeepCopyObject().(client.Object)
	e2eutil.Create(context.Background(), t, cl.C, obj)
	if got := obj.GetAnnotations()[policy.AnnotationVersion]; got != before.GetAnnotations()[policy.AnnotationVersion] {
		t.Fatalf("%T %s was mutated by wincompat (version %q): the report's uncovered cases need it untouched", obj, obj.GetName(), got)
	}
}

// checkAuditReport checks the report itself, independently of the goldens: the namespace rows and the
// findings written out by hand, and the change counts derived from what the API server stored.
func checkAuditReport(t *testing.T, cl *e2eutil.Cluster) {
	ctx := context.Background()
	rep, err := audit.Run(ctx, cl.C, audit.Options{PageSize: 1, Objects: true})
	if err != nil {
		t.Fatal(err)
	}
	wantRows := []audit.NamespaceRow{
		{Namespace: nsBatch, OptedIn: true, WindowsPods: 1, Covered: 0, Changed: 0, Workloads: 1, Templates: 1},
		// plain and corrupt; corrupt carries wincompat.io/version, so it counts as covered, but its
		// changes do not parse, so not as changed.
		{Namespace: nsLegacy, OptedIn: false, WindowsPods: 2, Covered: 1, Changed: 0, Workloads: 1, Templates: 0},
		{Namespace: nsShop, OptedIn: true, WindowsPods: 4, Covered: 4, Changed: 4, Workloads: 1, Templates: 1},
	}
	if !slices.Equal(rep.Namespaces, wantRows) {
		t.Errorf("namespace rows:\n got %+v\nwant %+v", rep.Namespaces, wantRows)
	}

	type key struct{ kind, ns, obj string }
	noLimit := audit.ReadinessKind(policy.RuleMemoryNoLimit)
	var got []key
	for _, f := range rep.Findings {
		got = append(got, key{f.Kind, f.Namespace, f.Object})
	}
	want := []key{
		{audit.BadAnnotation, nsLegacy, "Pod/corrupt"},
		{audit.BuildMismatch, nsShop, "Pod/worker"},
		{audit.NamespaceUnlabeled, nsLegacy, ""},
		{audit.NotCovered, nsBatch, "Pod/opted-out"},
		{audit.NotCovered, nsLegacy, "Pod/plain"},
		{audit.PendingNoBuild, nsShop, "Pod/report"},
		// The chart-style containers set no memory limit: each object that records it, once. web-1 was
		// created with no owner, so nothing speaks for it.
		{noLimit, nsBatch, "CronJob/nightly"},
		{noLimit, nsShop, "Deployment/web"},
		{noLimit, nsShop, "Pod/api"},
		{noLimit, nsShop, "Pod/report"},
		{noLimit, nsShop, "Pod/web-1"},
		{noLimit, nsShop, "Pod/worker"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n got %v\nwant %v", got, want)
	}
	for _, f := range rep.Findings {
		if f.Kind == audit.BuildMismatch && f.Detail != "chosen build "+e2eutil.Build2019+", but node win2022-0 runs "+e2eutil.Build2022 {
			t.Errorf("build-mismatch detail: %q", f.Detail)
		}
		if f.Kind == audit.PendingNoBuild && !strings.Contains(f.Detail, e2eutil.Build2025) {
			t.Errorf("pending-no-build detail does not name %s: %q", e2eutil.Build2025, f.Detail)
		}
	}

	// The change counts are what the stored objects record, counted once per object and kind of change.
	wantChanges := storedChangeCounts(t, cl, nsShop, nsBatch, nsLegacy)
	if !equalChangeCounts(rep.Changes, wantChanges) {
		t.Errorf("change counts differ from the stored annotations:\n got %+v\nwant %+v", rep.Changes, wantChanges)
	}
	if len(rep.Changes) < 10 {
		t.Errorf("only %d kinds of change: the chart-style objects should give more", len(rep.Changes))
	}

	// Objects: every Windows pod and workload, with the build wincompat chose and its node's.
	objects := map[string]audit.ObjectRow{}
	for _, o := range rep.Objects {
		objects[o.Namespace+"/"+o.Kind+"/"+o.Name] = o
	}
	if len(rep.Objects) != 10 {
		t.Errorf("%d object rows, want 10 (7 Windows pods, 3 workloads): %+v", len(rep.Objects), rep.Objects)
	}
	for name, w := range map[string]audit.ObjectRow{
		"shop/Pod/api":        {Build: e2eutil.Build2022, BuildSource: "image", Node: "win2022-0", NodeBuild: e2eutil.Build2022, Covered: true},
		"shop/Pod/worker":     {Build: e2eutil.Build2019, BuildSource: "image", Node: "win2022-0", NodeBuild: e2eutil.Build2022, Covered: true},
		"shop/Pod/report":     {Build: e2eutil.Build2025, BuildSource: "image", Covered: true},
		"legacy/Pod/plain":    {Node: "win2019-0"},
		"batch/Pod/opted-out": {},
	} {
		o, ok := objects[name]
		if !ok {
			t.Errorf("no object row %s", name)
			continue
		}
		if o.Build != w.Build || o.BuildSource != w.BuildSource || o.Node != w.Node || o.NodeBuild != w.NodeBuild || o.Covered != w.Covered {
			t.Errorf("%s: %+v, want build %q (%q) node %q (%q) covered %v", name, o, w.Build, w.BuildSource, w.Node, w.NodeBuild, w.Covered)
		}
	}
	if len(rep.Incomplete) != 0 {
		t.Errorf("an administrator's report is incomplete: %q", rep.Incomplete)
	}
}

// storedChangeCounts counts the changes recorded on the stored pods and templates of namespaces, as
// the report counts them: once per object and (action, field).
func storedChangeCounts(t *testing.T, cl *e2eutil.Cluster, namespaces ...string) map[[2]string]audit.ChangeRow {
	t.Helper()
	ctx := context.Background()
	out := map[[2]string]audit.ChangeRow{}
	nsSeen := map[[2]string]map[string]bool{}
	add := func(ns, annotation string, pod bool) {
		if annotation == "" {
			return
		}
		changes, err := policy.DecodeChanges(annotation)
		if err != nil {
			return // the corrupt one: a finding, not a count
		}
		seen := map[[2]string]bool{}
		for _, c := range changes {
			k := [2]string{string(c.Action), c.Field()}
			if seen[k] {
				continue
			}
			seen[k] = true
			r := out[k]
			r.Action, r.Field = k[0], k[1]
			if pod {
				r.Pods++
			} else {
				r.Templates++
			}
			if nsSeen[k] == nil {
				nsSeen[k] = map[string]bool{}
			}
			nsSeen[k][ns] = true
			r.Namespaces = len(nsSeen[k])
			out[k] = r
		}
	}
	for _, ns := range namespaces {
		var pods corev1.PodList
		var deployments appsv1.DeploymentList
		var cronjobs batchv1.CronJobList
		for _, l := range []client.ObjectList{&pods, &deployments, &cronjobs} {
			if err := cl.C.List(ctx, l, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range pods.Items {
			add(ns, p.Annotations[policy.AnnotationChanges], true)
		}
		for _, d := range deployments.Items {
			add(ns, d.Spec.Template.Annotations[policy.AnnotationTemplateChanges], false)
		}
		for _, c := range cronjobs.Items {
			add(ns, c.Spec.JobTemplate.Spec.Template.Annotations[policy.AnnotationTemplateChanges], false)
		}
	}
	return out
}

func equalChangeCounts(got []audit.ChangeRow, want map[[2]string]audit.ChangeRow) bool {
	if len(got) != len(want) {
		return false
	}
	for _, r := range got {
		if want[[2]string{r.Action, r.Field}] != r {
			return false
		}
	}
	return true
}

// checkAuditGoldens runs the real binary as an administrator, two objects per page so that every list
// is continued, and compares each output with its golden. The library's JSON, read one object per
// page, must equal the binary's.
func checkAuditGoldens(t *testing.T, cl *e2eutil.Cluster, bin, kubeconfig string, g *goldenSet) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"summary.txt", nil},
		{"objects.txt", []string{"--view", "objects"}},
		{"namespaces.csv", []string{"-o", "csv", "--view", "namespaces"}},
		{"changes.csv", []string{"-o", "csv", "--view", "changes"}},
		{"findings.csv", []string{"-o", "csv", "--view", "findings"}},
		{"report.json", []string{"-o", "json"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			args := append([]string{"audit", "--kubeconfig", kubeconfig, "--page-size", "2"}, tc.args...)
			r := runWincompat(t, bin, nil, args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("wincompat %s: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
			}
			g.compare(t, tc.golden, []byte(r.stdout))
			if tc.golden == "report.json" {
				rep, err := audit.Run(context.Background(), cl.C, audit.Options{PageSize: 1, Objects: true})
				if err != nil {
					t.Fatal(err)
				}
				var lib bytes.Buffer
				if err := rep.WriteJSON(&lib); err != nil {
					t.Fatal(err)
				}
				if lib.String() != r.stdout {
					t.Errorf("audit.Run's JSON differs from the binary's:\n%s", lib.String())
				}
			}
		})
	}
}

// checkAuditLog: pods and workloads created through wincompat appear in the API server's audit log
// with wincompat's audit annotations under the webhooks' names, and SummariseLog counts exactly what
// was created.
func checkAuditLog(t *testing.T, cl *e2eutil.Cluster, bin, logFile string, g *goldenSet) {
	// Four pods (api, worker, report, web-1) and the Deployment in shop, the CronJob in batch.
	const want = 6
	rep := waitForAuditedRequests(t, logFile, want)
	if rep.Requests != want {
		t.Errorf("requests: %d, want %d", rep.Requests, want)
	}
	for _, c := range []struct {
		name string
		got  []audit.CountRow
		want []audit.CountRow
	}{
		{"by request", rep.ByResource, []audit.CountRow{{Key: "create pods", Count: 4}, {Key: "create cronjobs", Count: 1}, {Key: "create deployments", Count: 1}}},
		{"by namespace", rep.Namespaces, []audit.CountRow{{Key: nsShop, Count: 5}, {Key: nsBatch, Count: 1}}},
		{"builds", rep.Builds, []audit.CountRow{{Key: e2eutil.Build2022 + " (image)", Count: 2}, {Key: e2eutil.Build2019 + " (image)", Count: 1}, {Key: e2eutil.Build2025 + " (image)", Count: 1}}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, c.got, c.want)
		}
	}
	if rep.SkippedLines != 0 || rep.BadAnnotations != 0 {
		t.Errorf("%d skipped lines, %d bad annotations; want none", rep.SkippedLines, rep.BadAnnotations)
	}
	// The legacy namespace's objects never went through wincompat; its recorded changes are not counted.
	if wantChanges := storedChangeCounts(t, cl, nsShop, nsBatch); !equalChangeCounts(rep.Changes, wantChanges) {
		t.Errorf("change counts differ from what was created:\n got %+v\nwant %+v", rep.Changes, wantChanges)
	}

	// The raw events: the prefixed keys, and the value equal to what the stored object records.
	events := readAuditEvents(t, logFile)
	ctx := context.Background()
	var api corev1.Pod
	if err := cl.C.Get(ctx, client.ObjectKey{Namespace: nsShop, Name: "api"}, &api); err != nil {
		t.Fatal(err)
	}
	ev := findAuditEvent(t, events, "create", "pods", nsShop, "api")
	for k, want := range map[string]string{
		"pods.wincompat.io/changes":      api.Annotations[policy.AnnotationChanges],
		"pods.wincompat.io/build":        e2eutil.Build2022,
		"pods.wincompat.io/build-source": "image",
	} {
		if got, ok := ev.Annotations[k]; !ok || got != want {
			t.Errorf("pod api's audit event: %s = %q (present %v), want %q", k, got, ok, want)
		}
	}
	var web appsv1.Deployment
	if err := cl.C.Get(ctx, client.ObjectKey{Namespace: nsShop, Name: "web"}, &web); err != nil {
		t.Fatal(err)
	}
	ev = findAuditEvent(t, events, "create", "deployments", nsShop, "web")
	if got := ev.Annotations["workloads.wincompat.io/changes"]; got != web.Spec.Template.Annotations[policy.AnnotationTemplateChanges] {
		t.Errorf("Deployment web's audit event: workloads.wincompat.io/changes = %q, want the template's annotation %q", got, web.Spec.Template.Annotations[policy.AnnotationTemplateChanges])
	}
	if _, ok := ev.Annotations["workloads.wincompat.io/build"]; ok {
		t.Errorf("Deployment web's audit event names a build; templates get none: %v", ev.Annotations)
	}
	for _, name := range []string{"plain", "corrupt", "opted-out"} {
		ns := nsLegacy
		if name == "opted-out" {
			ns = nsBatch
		}
		for k := range findAuditEvent(t, events, "create", "pods", ns, name).Annotations {
			if strings.Contains(k, "wincompat.io/") {
				t.Errorf("pod %s/%s never went through wincompat, but its audit event has %s", ns, name, k)
			}
		}
	}

	// The binary's --audit-log over the same file; the log is not rotated, and the later cases add to it,
	// so summarise a copy taken now.
	snapshot := filepath.Join(t.TempDir(), "audit.log")
	e2eutil.CopyFile(t, logFile, snapshot)
	for golden, args := range map[string][]string{
		"auditlog.txt":  {"audit", "--audit-log", snapshot},
		"auditlog.json": {"audit", "--audit-log", snapshot, "-o", "json"},
	} {
		r := runWincompat(t, bin, nil, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("wincompat %s: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		g.compare(t, golden, []byte(r.stdout))
	}
}

// auditEvent is the part of an audit.k8s.io/v1 Event the test reads.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	ObjectRef  struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

func readAuditEvents(t *testing.T, path string) []auditEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	s := bufio.NewScanner(f)
	s.Buffer(nil, 16<<20)
	for s.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			t.Fatalf("audit log line is not an event: %v\n%s", err, s.Text())
		}
		out = append(out, ev)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// findAuditEvent returns the one event of a successful request.
func findAuditEvent(t *testing.T, events []auditEvent, verb, resource, ns, name string) auditEvent {
	t.Helper()
	var found []auditEvent
	for _, ev := range events {
		if ev.Verb == verb && ev.ObjectRef.Resource == resource && ev.ObjectRef.Namespace == ns && ev.ObjectRef.Name == name && ev.ResponseStatus.Code < 300 {
			found = append(found, ev)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d audit events for %s %s %s/%s, want 1", len(found), verb, resource, ns, name)
	}
	return found[0]
}

// waitForAuditedRequests summarises the audit log until it holds at least n requests wincompat
// annotated: the API server writes a ResponseComplete event after the response has gone out.
func waitForAuditedRequests(t *testing.T, path string, n int) *audit.LogReport {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := audit.SummariseLog(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if rep.Requests >= n {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log %s holds %d requests wincompat annotated after 30s, want %d", path, rep.Requests, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkAuditSelection: -n reads only the named namespaces, -l only the labelled pods and workloads.
func checkAuditSelection(t *testing.T, bin, kubeconfig string) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", nsShop, "-n", nsBatch, "-o", "csv", "--view", "namespaces"},
			"namespace,opted-in,windows-pods,covered,changed,workloads,templates-changed\nbatch,true,1,0,0,1,1\nshop,true,4,4,4,1,1\n"},
		// -l selects by the object's own labels: the Deployment's, and web-1's from its template.
		{[]string{"-l", "app=web", "-o", "csv", "--view", "objects"},
			"namespace,kind,name,covered,changes,build,build-source,node,node-build\nshop,Deployment,web,true,17,,,,\nshop,Pod,web-1,true,5,10.0.20348,image,win2022-0,10.0.20348\n"},
	} {
		args := append([]string{"audit", "--kubeconfig", kubeconfig}, tc.args...)
		r := runWincompat(t, bin, nil, args...)
		if r.code != 0 || r.stdout != tc.want {
			t.Errorf("wincompat %s: exit %d\n%s%s--- want\n%s", strings.Join(tc.args, " "), r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// checkKubeconfigNotThrottled: `--kubeconfig FILE` and `KUBECONFIG=FILE` read the cluster equally fast.
// 30 pods listed one per page are 30 requests for pods: under client-go's default client-side limit (5
// requests/s after a burst of 10) they take 4 s, where the API server answers them all in a fraction of
// a second. On 100,000 pods the difference is 38 s against 6 s (BenchmarkAudit100kPods).
func checkKubeconfigNotThrottled(t *testing.T, cl *e2eutil.Cluster, bin, kubeconfig string) {
	ctx := context.Background()
	const ns = "filler"
	e2eutil.SetUpNamespace(ctx, t, cl.C, ns, nil, nil)
	for i := range 30 {
		e2eutil.Create(ctx, t, cl.C, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("linux-%02d", i), Namespace: ns},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}})
	}
	args := []string{"audit", "-n", ns, "--page-size", "1"}
	viaEnv := runWincompat(t, bin, []string{"KUBECONFIG=" + kubeconfig}, args...)
	viaFlag := runWincompat(t, bin, nil, append(args, "--kubeconfig", kubeconfig)...)
	if viaEnv.code != 0 || viaFlag.code != 0 || viaEnv.stdout != viaFlag.stdout {
		t.Fatalf("KUBECONFIG: exit %d; --kubeconfig: exit %d; outputs equal: %v\n%s%s", viaEnv.code, viaFlag.code, viaEnv.stdout == viaFlag.stdout, viaEnv.stderr, viaFlag.stderr)
	}
	t.Logf("KUBECONFIG: %v, --kubeconfig: %v", viaEnv.elapsed.Round(time.Millisecond), viaFlag.elapsed.Round(time.Millisecond))
	if viaFlag.elapsed > 2*viaEnv.elapsed+1500*time.Millisecond {
		t.Errorf("with --kubeconfig the audit took %v, with $KUBECONFIG %v: the --kubeconfig client is rate-limited to client-go's default 5 requests/s",
			viaFlag.elapsed.Round(time.Millisecond), viaEnv.elapsed.Round(time.Millisecond))
	}
}

// checkUnreachable: a kubeconfig pointing at a port nobody listens on is exit status 1, with one line
// that says where the cluster was expected.
func checkUnreachable(t *testing.T, bin string) {
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", port)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["closed"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	kc.AuthInfos["nobody"] = &clientcmdapi.AuthInfo{Token: "unused"}
	kc.Contexts["closed"] = &clientcmdapi.Context{Cluster: "closed", AuthInfo: "nobody"}
	kc.CurrentContext = "closed"
	path := filepath.Join(t.TempDir(), "closed.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	r := runWincompat(t, bin, nil, "audit", "--kubeconfig", path)
	t.Logf("exit %d after %v; stderr: %s", r.code, r.elapsed.Round(time.Millisecond), r.stderr)
	if r.code != 1 {
		t.Errorf("exit status %d, want 1 (nothing could be read)", r.code)
	}
	if r.stdout != "" {
		t.Errorf("a report was printed for an unreachable cluster:\n%s", r.stdout)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "wincompat audit: ") ||
		!strings.Contains(lines[0], fmt.Sprint(port)) || !strings.Contains(lines[0], "connection refused") {
		t.Errorf("want one line starting \"wincompat audit: \" naming port %d and \"connection refused\"; got:\n%s", port, r.stderr)
	}
	if r.elapsed > 20*time.Second {
		t.Errorf("took %v to give up on a closed port", r.elapsed)
	}
}

// checkAuditErrors: the other documented exit statuses: 1 for a missing kubeconfig or namespace, 2 for
// usage errors.
func checkAuditErrors(t *testing.T, bin, kubeconfig string) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"missing kubeconfig", []string{"--kubeconfig", filepath.Join(t.TempDir(), "none")}, 1, "no such file"},
		{"missing namespace", []string{"--kubeconfig", kubeconfig, "-n", "nosuch"}, 1, "namespace nosuch not found"},
		{"unknown output", []string{"--kubeconfig", kubeconfig, "-o", "yaml"}, 2, `-o "yaml"`},
		{"unknown view", []string{"--kubeconfig", kubeconfig, "--view", "pods"}, 2, `--view "pods"`},
		{"bad selector", []string{"--kubeconfig", kubeconfig, "-l", "a=(b"}, 2, `-l "a=(b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runWincompat(t, bin, nil, append([]string{"audit"}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line containing %q", r.code, r.stderr, tc.code, tc.msg)
			}
		})
	}
}

// workloadRules let a user list the eight workload kinds, namespaces, nodes and Services (read in the
// namespaces with Windows pods) in the whole cluster.
var workloadRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces", "nodes", "replicationcontrollers", "podtemplates", "services"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get", "list"}},
}

// grantAuditor gives user the workload rules cluster-wide and list on pods through a RoleBinding in
// each namespace but except, and waits until the API server's authorizer says so.
func grantAuditor(t *testing.T, cl *e2eutil.Cluster, user, except string) {
	t.Helper()
	ctx := context.Background()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	e2eutil.Create(ctx, t, cl.C, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user + "-workloads"}, Rules: workloadRules})
	e2eutil.Create(ctx, t, cl.C, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-workloads"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user + "-workloads"}, Subjects: subject})
	e2eutil.Create(ctx, t, cl.C, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user + "-pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}})
	var namespaces corev1.NamespaceList
	if err := cl.C.List(ctx, &namespaces); err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces.Items {
		if ns.Name == except {
			continue
		}
		e2eutil.Create(ctx, t, cl.C, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-pods", Namespace: ns.Name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user + "-pods"}, Subjects: subject})
	}
	for _, ns := range namespaces.Items {
		waitForAccess(t, cl, user, ns.Name, "pods", ns.Name != except)
	}
	waitForAccess(t, cl, user, "", "pods", false) // never cluster-wide
	waitForAccess(t, cl, user, "", "deployments", true)
}

// waitForAccess waits until a SubjectAccessReview for user listing resource in ns answers allowed; the
// authorizer learns new bindings from its informers a moment after they are stored.
func waitForAccess(t *testing.T, cl *e2eutil.Cluster, user, ns, resource string, allowed bool) {
	t.Helper()
	group := ""
	if resource == "deployments" {
		group = "apps"
	}
	for i := 0; ; i++ {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Group: group, Resource: resource}}}
		if err := cl.C.Create(context.Background(), sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed == allowed {
			return
		}
		if i == 300 {
			t.Fatalf("%s may list %s in %q: %v after 30s, want %v", user, resource, ns, sar.Status.Allowed, allowed)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkForbiddenNamespace: a user who may list pods in every namespace but legacy gets exit status 3,
// the report of what it could read, and an INCOMPLETE section naming legacy.
func checkForbiddenNamespace(t *testing.T, cl *e2eutil.Cluster, bin string, g *goldenSet) {
	const user = "auditor"
	kubeconfig := e2eutil.WriteKubeConfig(t, cl, user)
	// First, that RBAC is what authorizes here: without bindings the user may list nothing.
	if r := runWincompat(t, bin, nil, "audit", "--kubeconfig", kubeconfig); r.code != 1 || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("a user without bindings: exit %d, stderr %q; want 1 and forbidden (is RBAC on?)", r.code, r.stderr)
	}
	grantAuditor(t, cl, user, nsLegacy)

	r := runWincompat(t, bin, nil, "audit", "--kubeconfig", kubeconfig)
	if r.code != 3 {
		t.Errorf("exit status %d, want 3 (partial); stderr:\n%s", r.code, r.stderr)
	}
	g.compare(t, "forbidden.txt", []byte(r.stdout))
	_, incomplete, ok := strings.Cut(r.stdout, "\nINCOMPLETE")
	if !ok || !strings.Contains(incomplete, "pods in "+nsLegacy+": forbidden") {
		t.Errorf("no INCOMPLETE section naming %s:\n%s", nsLegacy, r.stdout)
	}
	// What could be read stands: shop and batch as the administrator sees them, legacy's Deployment
	// (workloads are listed cluster-wide) but none of its pods.
	for _, want := range [][]string{
		{nsBatch, "true", "1", "0", "0", "1", "1"},
		{nsLegacy, "false", "0", "0", "0", "1", "0"},
		{nsShop, "true", "4", "4", "4", "1", "1"},
		{audit.NotCovered, nsBatch, "Pod/opted-out"},
		{audit.BuildMismatch, nsShop, "Pod/worker"},
		{audit.PendingNoBuild, nsShop, "Pod/report"},
	} {
		if !hasTableRow(r.stdout, want) {
			t.Errorf("the partial report has no row starting %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "Pod/plain") || strings.Contains(r.stdout, "Pod/corrupt") {
		t.Errorf("the partial report names pods of %s, which the user may not list", nsLegacy)
	}
	// stderr holds only the incomplete notices and the note that pods were read namespace by namespace.
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(line, "wincompat audit: incomplete: ") && !strings.HasPrefix(line, "wincompat audit: note: ") {
			t.Errorf("stderr line %q is neither an incomplete notice nor a note", line)
		}
	}
	if !strings.Contains(r.stderr, "pods in "+nsLegacy) {
		t.Errorf("stderr does not name %s:\n%s", nsLegacy, r.stderr)
	}
}

// checkPerNamespaceAccess: a user who may list pods in every namespace, but only through a RoleBinding
// in each (no cluster-wide list), reads everything: the report is complete and equals the
// administrator's, so the exit status is 0.
func checkPerNamespaceAccess(t *testing.T, cl *e2eutil.Cluster, bin, admin string) {
	const user = "team-auditor"
	kubeconfig := e2eutil.WriteKubeConfig(t, cl, user)
	grantAuditor(t, cl, user, "")
	want := runWincompat(t, bin, nil, "audit", "--kubeconfig", admin)
	r := runWincompat(t, bin, nil, "audit", "--kubeconfig", kubeconfig)
	if r.code != 0 {
		t.Errorf("exit status %d, want 0: every namespace was read (documented: 3 only when some namespaces or kinds could not be read); stderr:\n%s", r.code, r.stderr)
	}
	if r.stdout != want.stdout {
		t.Errorf("the report differs from the administrator's:\n%s\n--- administrator's:\n%s", r.stdout, want.stdout)
	}
}

// checkUserBuildAnnotation: wincompat.io/build is also the user's request for a build, and accepts
// "ltsc2022" and "2022". On a pod wincompat never processed it is not a chosen build number: a pod
// asking for ltsc2022 on a 2022 node is no mismatch, and a Pending one asking for 2022 while a 2022
// node is ready is not stuck for want of its build.
func checkUserBuildAnnotation(t *testing.T, cl *e2eutil.Cluster) {
	ctx := context.Background()
	const ns = "user-build"
	e2eutil.SetUpNamespace(ctx, t, cl.C, ns, nil, nil)
	bound := plainWindowsPod(ns, "bound", e2eutil.Images2022[0])
	bound.Annotations = map[string]string{policy.AnnotationBuild: "ltsc2022"}
	bound.Spec.NodeName = "win2022-0"
	createUnmutated(t, cl, bound)
	pending := plainWindowsPod(ns, "pending", e2eutil.Images2022[0])
	pending.Annotations = map[string]string{policy.AnnotationBuild: "2022"}
	createUnmutated(t, cl, pending)

	rep, err := audit.Run(ctx, cl.C, audit.Options{Namespaces: []string{ns}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Kind == audit.BuildMismatch || f.Kind == audit.PendingNoBuild {
			t.Errorf("false %s finding for %s: %s", f.Kind, f.Object, f.Detail)
		}
	}
}

// checkAuditLogNotStored: a dry-run create and a create the API server rejects after wincompat
// answered (the name is taken) are audited with wincompat's annotations, but neither changed anything
// in the cluster: the summary of what wincompat changed must not count them.
func checkAuditLogNotStored(t *testing.T, cl *e2eutil.Cluster, logFile string) {
	ctx := context.Background()
	before := waitForAuditedRequests(t, logFile, 6)
	if err := cl.C.Create(ctx, e2eutil.WindowsChartPod(nsShop, "dry-run", e2eutil.Images2022[0], "app"), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	err := cl.C.Create(ctx, e2eutil.WindowsChartPod(nsShop, "api", e2eutil.Images2022[0], "app"))
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating pod api again: %v, want AlreadyExists", err)
	}
	// Wait until both requests are in the log (each counted or not), then summarise.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var dry, dup int
		for _, ev := range readAuditEvents(t, logFile) {
			if ev.Verb == "create" && ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Namespace == nsShop {
				switch {
				case strings.Contains(ev.RequestURI, "dryRun"):
					dry++
				case ev.ResponseStatus.Code == 409:
					dup++
				}
			}
		}
		if dry == 1 && dup == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log holds %d dry-run and %d rejected creates in %s after 30s, want 1 and 1", dry, dup, nsShop)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f, err := os.Open(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	after, err := audit.SummariseLog(f)
	if err != nil {
		t.Fatal(err)
	}
	if after.Requests != before.Requests || !slices.Equal(after.Changes, before.Changes) {
		t.Errorf("a dry-run and a rejected create changed the summary: requests %d -> %d; changes\n before %+v\n after  %+v",
			before.Requests, after.Requests, before.Changes, after.Changes)
	}
}

// goldenSet compares outputs with testdata/audit and remembers which it compared.
type goldenSet struct{ compared map[string]bool }

func (g *goldenSet) compare(t *testing.T, name string, got []byte) {
	t.Helper()
	if !slices.Contains(auditGoldens, name) {
		t.Fatalf("golden %s is not listed in auditGoldens", name)
	}
	if g.compared == nil {
		g.compared = map[string]bool{}
	}
	g.compared[name] = true
	e2eutil.CompareGolden(t, filepath.Join(auditGoldenDir, name), got, "TestAudit")
}

// checkAllCompared fails when a listed golden was not compared although every case ran: a golden whose
// case was deleted.
func (g *goldenSet) checkAllCompared(t *testing.T) {
	t.Helper()
	for _, name := range auditGoldens {
		if !g.compared[name] {
			t.Errorf("golden %s was not compared: remove it from auditGoldens and %s, or restore its case", name, auditGoldenDir)
		}
	}
}

// TestAuditGoldensHaveCases: every file in testdata/audit is one TestAudit produces (UPDATE_GOLDEN=1
// deletes the others).
func TestAuditGoldensHaveCases(t *testing.T) {
	entries, err := os.ReadDir(auditGoldenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if slices.Contains(auditGoldens, e.Name()) {
			continue
		}
		path := filepath.Join(auditGoldenDir, e.Name())
		if e2eutil.UpdateGolden() {
			_ = os.RemoveAll(path)
			continue
		}
		t.Errorf("%s has no case in TestAudit: delete it, or list it in auditGoldens with its case", path)
	}
}

// cliRun is how a run of the binary went.
type cliRun struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
	maxRSS         int64 // bytes, the process's peak resident set (perf.RunPeakRSS)
}

// runWincompat runs the binary with args (env added to the test's environment) and waits at most
// 10 minutes.
func runWincompat(t testing.TB, bin string, env []string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	peak, err := perf.RunPeakRSS(cmd)
	r := cliRun{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start), maxRSS: peak}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		r.code = exit.ExitCode()
	default:
		t.Fatalf("running %s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	return r
}

// hasTableRow reports whether a line of a table output starts with the cells of row.
func hasTableRow(table string, row []string) bool {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) >= len(row) && slices.Equal(f[:len(row)], row) {
			return true
		}
	}
	return false
}
