package auditing

// Issue 6, at scale: `wincompat audit` lists 100,000 pods from the real API server page by page. A
// benchmark, not a test, so that `make test` never spends minutes creating pods:
//
//	cd test && go test -run '^$' -bench BenchmarkAudit100kPods -benchtime 1x ./e2e/auditing/

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/fixtures"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// The 100k mix: per namespace, every tenth pod is a Windows pod wincompat changed (its annotations set
// directly, as wincompat would have left them; no webhook runs here), every thousandth (offset 1) a
// Windows pod it never saw, the rest Linux pods the report skips.
const (
	benchNamespaces   = 4
	benchPerNamespace = 25_000
	benchNode         = "win2022-bench"
)

func benchPodIsChanged(i int) bool { return i%10 == 0 }

func benchPodIsUncovered(i int) bool { return i%1000 == 1 }

// benchChanges is the changes annotation of every changed pod: two strips and a toleration.
var benchChanges = policy.EncodeChanges([]policy.Change{
	{Action: policy.Strip, Path: "spec.securityContext.runAsUser", From: []byte("1000"), Reason: "not supported on Windows"},
	{Action: policy.Strip, Path: "spec.containers[app].securityContext.capabilities", From: []byte(`{"drop":["ALL"]}`), Reason: "not supported on Windows"},
	{Action: policy.Inject, Path: "spec.tolerations", To: []byte(`{"key":"os","operator":"Equal","value":"windows","effect":"NoSchedule"}`), Reason: "tolerates the Windows node taint os=windows:NoSchedule"},
})

func benchPod(ns string, i int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%06d", i), Namespace: ns},
		Spec: corev1.PodSpec{
			// No token volume: small pods, and no ServiceAccount token to mint per pod.
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	switch {
	case benchPodIsChanged(i):
		pod.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
		pod.Spec.Containers[0].Image = e2eutil.Images2022[0]
		pod.Spec.NodeName = benchNode // bound to a node of its build: no finding
		pod.Annotations = map[string]string{
			policy.AnnotationVersion: "bench", policy.AnnotationChanges: benchChanges,
			policy.AnnotationBuild: e2eutil.Build2022, policy.AnnotationBuildSource: policy.SourceImage,
		}
	case benchPodIsUncovered(i):
		pod.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
		pod.Spec.Containers[0].Image = e2eutil.Images2022[0]
	}
	return pod
}

// benchControlPlane starts a control plane for a benchmark, stopped when it ends, and a client to fill
// it with. Protobuf and no client-side rate limit: the creation, not the client, should be the
// bottleneck. The administrator (system:masters) is in API Priority and Fairness's exempt level, so the
// API server's in-flight limits do not hold these requests back either.
func benchControlPlane(b *testing.B) (*controlplane.ControlPlane, kubernetes.Interface) {
	b.Helper()
	cp, err := controlplane.Launch(controlplane.Options{WorkDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			b.Error(err)
		}
	})
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return cp, cs
}

func BenchmarkAudit100kPods(b *testing.B) {
	began := time.Now()
	cp, cs := benchControlPlane(b)
	ctx := context.Background()
	if err := fixtures.AddNode(ctx, cp.Client, fixtures.Node{Name: benchNode, OS: "windows", Build: e2eutil.Build2022}, 110); err != nil {
		b.Fatal(err)
	}
	var namespaces []string
	for n := range benchNamespaces {
		ns := fmt.Sprintf("bench-%d", n)
		namespaces = append(namespaces, ns)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	bin := e2eutil.BuildWincompat(b)
	kubeconfig := filepath.Join(b.TempDir(), "admin.kubeconfig")
	if err := cp.WriteKubeConfig(kubeconfig, "bench-admin", "system:masters"); err != nil {
		b.Fatal(err)
	}
	b.Logf("control plane up in %v", time.Since(began).Round(time.Millisecond))

	// A first audit at a tenth of the pods, so that the peak RSS at 100,000 has something to be compared
	// with: bounded memory means it barely grows.
	created := time.Now()
	createBenchPods(b, cs, namespaces, 0, benchPerNamespace/10)
	b.Logf("10,000 pods created in %v", time.Since(created).Round(time.Millisecond))
	small := auditBenchRun(b, cs, bin, kubeconfig, benchPerNamespace/10)
	createBenchPods(b, cs, namespaces, benchPerNamespace/10, benchPerNamespace)
	b.Logf("100,000 pods created in %v (%.0f pods/s)", time.Since(created).Round(time.Millisecond),
		float64(benchNamespaces*benchPerNamespace)/time.Since(created).Seconds())

	b.ResetTimer()
	var big benchResult
	for range b.N {
		big = auditBenchRun(b, cs, bin, kubeconfig, benchPerNamespace)
	}
	b.StopTimer()
	b.ReportMetric(big.elapsed.Seconds(), "audit-s")
	b.ReportMetric(float64(big.maxRSS)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(big.pages), "pod-pages")
	b.ReportMetric(float64(small.maxRSS)/(1<<20), "peak-RSS-MiB@10k")
	b.Logf("audit of 10,000 pods: %v, peak RSS %.1f MiB, %d pod pages", small.elapsed.Round(time.Millisecond), float64(small.maxRSS)/(1<<20), small.pages)
	b.Logf("audit of 100,000 pods: %v, peak RSS %.1f MiB, %d pod pages; progress: %q", big.elapsed.Round(time.Millisecond), float64(big.maxRSS)/(1<<20), big.pages, big.progress)
	if big.progress == "" {
		b.Errorf("no progress line while auditing 100,000 pods (%v)", big.elapsed)
	}

	// The same audit with the kubeconfig from $KUBECONFIG instead of --kubeconfig: the two should cost
	// the same.
	viaEnv := auditBenchRunEnv(b, cs, bin, kubeconfig)
	b.Logf("with KUBECONFIG instead of --kubeconfig: %v, peak RSS %.1f MiB", viaEnv.elapsed.Round(time.Millisecond), float64(viaEnv.maxRSS)/(1<<20))
	b.ReportMetric(viaEnv.elapsed.Seconds(), "audit-s-KUBECONFIG")
	if big.elapsed > 2*viaEnv.elapsed+5*time.Second {
		b.Errorf("with --kubeconfig the audit took %v, with $KUBECONFIG %v: the --kubeconfig client is rate-limited (client-go's default 5 requests/s)",
			big.elapsed.Round(time.Millisecond), viaEnv.elapsed.Round(time.Millisecond))
	}
}

// createBenchPods creates pods [from, to) in every namespace, 64 at a time.
func createBenchPods(b *testing.B, cs kubernetes.Interface, namespaces []string, from, to int) {
	b.Helper()
	type job struct {
		ns string
		i  int
	}
	jobs := make(chan job, 1024)
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for j := range jobs {
				if _, err := cs.CoreV1().Pods(j.ns).Create(context.Background(), benchPod(j.ns, j.i), metav1.CreateOptions{}); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for i := from; i < to; i++ {
		for _, ns := range namespaces {
			jobs <- job{ns, i}
		}
	}
	close(jobs)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d pods not created; the first error: %v", n, firstErr.Load())
	}
}

type benchResult struct {
	cliRun
	pages    int    // LIST requests for pods the API server served during the run
	progress string // the last progress line on stderr
}

var progressLine = regexp.MustCompile(`read (\d+) objects in \S+`)

// auditBenchRun runs `wincompat audit --kubeconfig` over perNamespace pods in each bench namespace and
// checks what it counted and that it showed its progress.
func auditBenchRun(b *testing.B, cs kubernetes.Interface, bin, kubeconfig string, perNamespace int) benchResult {
	b.Helper()
	before := podListRequests(b, cs)
	r := runWincompat(b, bin, nil, "audit", "--kubeconfig", kubeconfig)
	res := benchResult{cliRun: r, pages: podListRequests(b, cs) - before}
	res.progress = checkBenchReport(b, r, perNamespace)
	return res
}

// auditBenchRunEnv is auditBenchRun over all pods with the kubeconfig in $KUBECONFIG.
func auditBenchRunEnv(b *testing.B, cs kubernetes.Interface, bin, kubeconfig string) benchResult {
	b.Helper()
	before := podListRequests(b, cs)
	r := runWincompat(b, bin, []string{"KUBECONFIG=" + kubeconfig}, "audit")
	res := benchResult{cliRun: r, pages: podListRequests(b, cs) - before}
	res.progress = checkBenchReport(b, r, benchPerNamespace)
	return res
}

// checkBenchReport checks the counts in the table and returns the last progress line.
func checkBenchReport(b *testing.B, r cliRun, perNamespace int) string {
	b.Helper()
	if r.code != 0 {
		b.Fatalf("wincompat audit: exit %d\n%s", r.code, r.stderr)
	}
	changed, uncovered := 0, 0
	for i := range perNamespace {
		if benchPodIsChanged(i) {
			changed++
		}
		if benchPodIsUncovered(i) {
			uncovered++
		}
	}
	for n := range benchNamespaces {
		row := []string{fmt.Sprintf("bench-%d", n), "false", strconv.Itoa(changed + uncovered), strconv.Itoa(changed), strconv.Itoa(changed), "0", "0"}
		if !hasTableRow(r.stdout, row) {
			b.Errorf("no namespace row %q in:\n%s", row, head(r.stdout, 40))
		}
	}
	for _, sentence := range []string{
		fmt.Sprintf("strip spec.securityContext.runAsUser: %d pods in %d namespaces", changed*benchNamespaces, benchNamespaces),
		fmt.Sprintf("strip spec.containers[*].securityContext.capabilities: %d pods in %d namespaces", changed*benchNamespaces, benchNamespaces),
		fmt.Sprintf("inject spec.tolerations: %d pods in %d namespaces", changed*benchNamespaces, benchNamespaces),
	} {
		if !strings.Contains(r.stdout, "  "+sentence+"\n") {
			b.Errorf("no change line %q in:\n%s", sentence, head(r.stdout, 40))
		}
	}
	if got, want := strings.Count(r.stdout, "\n  not-covered "), uncovered*benchNamespaces; got != want {
		b.Errorf("%d not-covered findings, want %d", got, want)
	}
	if strings.Contains(r.stdout, "build-mismatch") || strings.Contains(r.stdout, "pending-no-build") {
		b.Errorf("build findings for pods bound to a node of their build:\n%s", head(r.stdout, 40))
	}
	// Progress: "\rread N objects..." while listing, then "\rread N objects in 3.2s"; N counts the
	// node and every pod.
	// The CLI promises a progress line only once listing takes more than a second.
	m := progressLine.FindAllStringSubmatch(r.stderr, -1)
	if len(m) == 0 {
		if r.elapsed > 1500*time.Millisecond {
			b.Fatalf("no progress line on stderr after %v: %q", r.elapsed, r.stderr)
		}
		return ""
	}
	if n, _ := strconv.Atoi(m[len(m)-1][1]); n < perNamespace*benchNamespaces {
		b.Errorf("the progress line counts %d objects, want at least %d: %q", n, perNamespace*benchNamespaces, m[len(m)-1][0])
	}
	return m[len(m)-1][0]
}

// podListRequests is the API server's count of LIST requests for pods so far (every page is one).
func podListRequests(b *testing.B, cs kubernetes.Interface) int {
	b.Helper()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	s := bufio.NewScanner(bytes.NewReader(raw))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="pods"`) ||
			!strings.Contains(line, `verb="LIST"`) || !strings.Contains(line, `subresource=""`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			b.Fatalf("metrics line %q: %v", line, err)
		}
		total += v
	}
	return int(total)
}

func head(s string, lines int) string {
	parts := strings.SplitN(s, "\n", lines+1)
	if len(parts) > lines {
		parts = parts[:lines]
	}
	return strings.Join(parts, "\n")
}
