// Command scale is the scale lab of issue 41: it fills a real control plane (etcd, kube-apiserver) with
// pods, nodes and Events in the proportions of a mixed cluster, runs two `wincompat serve` replicas as the
// Helm chart runs them (leader election, the misplaced-pods watcher, RuntimeClass management) at each
// size, and measures what they hold and how fast they start, sync, answer and fail over, and what a
// whole-cluster `wincompat audit` costs. See test/lab/README.md, "scale".
//
// Usage (from test/, after `make build k8s`; `make scale` does all of it):
//
//	go run ./lab/cmd/scale [-runs 3] [-sizes 10000,30000,60000] [-out DIR] [-work DIR]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
	"github.com/wincompat/wincompat/webhook"
)

type config struct {
	root, wincompat, out, workDir string
	runs                          int
	sizes                         []int
	baselineNodes                 int
	podsPerNode                   int
	windowsEvery                  int
	workers                       int
	reviews, warmup               int
	memoryLimit                   string
	syncTimeout                   time.Duration
	replot                        string
}

func main() {
	c := config{sizes: []int{10000, 30000, 60000}}
	fl := flag.NewFlagSet("scale", flag.ExitOnError)
	fl.StringVar(&c.root, "root", "", "the wincompat checkout (default: found from the working directory)")
	fl.StringVar(&c.wincompat, "wincompat", "", "the wincompat binary (default ROOT/bin/wincompat, from `make build`)")
	fl.StringVar(&c.out, "out", "", "where to write scale.png (default ROOT/bin/lab/scale)")
	fl.StringVar(&c.workDir, "work", "", "keep the replicas' logs and the kubeconfig here (default: a temporary directory, removed)")
	fl.IntVar(&c.runs, "runs", 3, "runs, each on a fresh control plane filled from empty; the report takes each figure's median")
	fl.Func("sizes", "pod counts to measure at, ascending, comma-separated (default 10000,30000,60000)", func(v string) error {
		c.sizes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 || len(c.sizes) > 0 && n <= c.sizes[len(c.sizes)-1] {
				return fmt.Errorf("%q: want ascending positive pod counts", v)
			}
			c.sizes = append(c.sizes, n)
		}
		return nil
	})
	fl.IntVar(&c.baselineNodes, "baseline-nodes", 100, "nodes of the first measurement, before any pod is created")
	fl.IntVar(&c.podsPerNode, "pods-per-node", 30, "pods per node: the nodes grow with the pods")
	fl.IntVar(&c.windowsEvery, "windows-every", 10, "one pod in this many is Windows")
	fl.IntVar(&c.workers, "workers", 16, "concurrent writers while filling")
	fl.IntVar(&c.reviews, "reviews", 2000, "measured reviews per replica and size, sent one after the other")
	fl.IntVar(&c.warmup, "warmup", 200, "unmeasured reviews before them")
	fl.StringVar(&c.memoryLimit, "memory-limit", "384Mi", "the chart's memory limit: WINCOMPAT_MEMORY_LIMIT of the replicas, and the bound their RSS is held to")
	fl.StringVar(&c.replot, "replot", "", "print the report and draw scale.png again from the scale.json a run left in its -work directory, without measuring")
	fl.DurationVar(&c.syncTimeout, "sync-timeout", 5*time.Minute, "how long a replica may take to lead with synced watchers before the run fails")
	_ = fl.Parse(os.Args[1:])
	if fl.NArg() > 0 || c.runs < 1 || c.reviews < 100 || c.workers < 1 || c.windowsEvery < 2 || c.podsPerNode < 1 {
		fl.Usage()
		os.Exit(2)
	}
	perf.Main("scale", func(ctx context.Context) error { return run(ctx, c) })
}

// lab is what one run's measurements share.
type lab struct {
	cp                     *controlplane.ControlPlane
	cs                     kubernetes.Interface
	wincompat, work, stage string
	kubeconfig, policyFile string
	memoryLimit            int64
	c                      config
}

func run(ctx context.Context, c config) error {
	cleanup, err := perf.ResolvePaths(&c.root, &c.wincompat, &c.out, &c.workDir, "scale")
	if err != nil {
		return err
	}
	defer cleanup()
	limit, err := resource.ParseQuantity(c.memoryLimit)
	if err != nil || limit.Value() <= 0 {
		return fmt.Errorf("-memory-limit %q: want a quantity such as 256Mi", c.memoryLimit)
	}
	if c.replot != "" {
		return replot(c)
	}
	keep := c.workDir != ""
	version, err := versionOf(ctx, c.wincompat)
	if err != nil {
		return err
	}
	fmt.Printf("wincompat %s; %d run(s) at %v pods (and %d nodes before any pod); machine: %s\n",
		version, c.runs, c.sizes, c.baselineNodes, machineLine())
	var runs []runResult
	for i := range c.runs {
		work := filepath.Join(c.workDir, fmt.Sprintf("run-%d", i+1))
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
		fmt.Printf("\n== run %d of %d\n", i+1, c.runs)
		r, err := oneRun(ctx, c, limit.Value(), work)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		runs = append(runs, r)
		printRun(os.Stdout, r)
	}
	saved := saved{Version: version, Sizes: c.sizes, LimitMiB: float64(limit.Value()) / (1 << 20), Runs: runs}
	if keep {
		// Beside the logs, for -replot; never committed (the README keeps the table).
		if err := perf.WriteJSON(filepath.Join(c.workDir, "scale.json"), saved); err != nil {
			return err
		}
	}
	return report(saved, c)
}

// saved is what a run leaves in its work directory for -replot.
type saved struct {
	Version  string
	Sizes    []int
	LimitMiB float64
	Runs     []runResult
}

func replot(c config) error {
	b, err := os.ReadFile(c.replot)
	if err != nil {
		return err
	}
	var s saved
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", c.replot, err)
	}
	c.sizes = s.Sizes
	return report(s, c)
}

// report prints the medians and goals and draws the plot.
func report(s saved, c config) error {
	rep := summarize(s.Runs, c, s.LimitMiB)
	rep.Version = s.Version
	printReport(os.Stdout, rep)
	plotPath := filepath.Join(c.out, "scale.png")
	if err := writePlot(rep, plotPath); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", plotPath)
	if !rep.allChecksPassed() {
		return errors.New("a check failed (see above): the figures do not measure what they claim")
	}
	return nil
}

// oneRun fills a fresh control plane size by size and measures the replicas at each.
func oneRun(ctx context.Context, c config, memoryLimit int64, work string) (r runResult, err error) {
	// etcd's default quota (2 GiB) is too small for 60,000 realistic pods and their history between
	// compactions; the API server's flags stay test/controlplane's.
	cp, err := controlplane.Launch(controlplane.Options{WorkDir: filepath.Join(work, "controlplane"),
		EtcdFlags: []controlplane.Flag{{Name: "quota-backend-bytes", Values: []string{strconv.FormatInt(8<<30, 10)}}}})
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	if cp.Webhook.CertDir == "" {
		return r, errors.New("envtest made no serving certificate")
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return r, err
	}
	l := &lab{cp: cp, cs: cs, wincompat: c.wincompat, work: work, memoryLimit: memoryLimit, c: c,
		kubeconfig: filepath.Join(work, "lab.kubeconfig"), policyFile: filepath.Join(work, "policy.yaml")}
	if err := cp.WriteKubeConfig(l.kubeconfig, "wincompat-scale", "system:masters"); err != nil {
		return r, err
	}
	cl, err := newCluster(ctx, cs, c.wincompat, c.workers, c.windowsEvery)
	if err != nil {
		return r, err
	}
	r.LabelStamped = cl.stamped
	if err := cl.setup(ctx); err != nil {
		return r, err
	}
	if err := l.policy(ctx); err != nil {
		return r, err
	}
	if err := cl.addNodes(ctx, c.baselineNodes); err != nil {
		return r, err
	}
	l.stage = "baseline"
	fmt.Printf("  %d nodes, no pods: measuring\n", cl.nodes)
	base, err := l.measure(ctx, cl)
	if err != nil {
		return r, fmt.Errorf("before filling: %w", err)
	}
	r.Baseline = base
	for _, size := range c.sizes {
		t := time.Now()
		if err := cl.addNodes(ctx, max(c.baselineNodes, (size+c.podsPerNode-1)/c.podsPerNode)); err != nil {
			return r, err
		}
		if err := cl.addPods(ctx, size); err != nil {
			return r, err
		}
		fill := time.Since(t)
		l.stage = strconv.Itoa(size)
		fmt.Printf("  filled to %d pods, %d nodes, %d Events in %.0f s: measuring\n", cl.pods, cl.nodes, cl.events, fill.Seconds())
		s, err := l.measure(ctx, cl)
		if err != nil {
			return r, fmt.Errorf("at %d pods: %w", size, err)
		}
		s.FillSeconds = fill.Seconds()
		r.Sizes = append(r.Sizes, s)
	}
	return r, nil
}

// policy writes the policy file and the two ConfigMaps the chart creates (the policy, and the empty one
// wincompat keeps the last good policy in): the chart's default values' policy.
func (l *lab) policy(ctx context.Context) error {
	const pol = "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nlinuxByDefault: false\nlinuxByDefaultExcludedNamespaces:\n- kube-system\n"
	for name, data := range map[string]map[string]string{policyConfigMap: {webhook.PolicyKey: pol}, policyConfigMap + lastGoodSuffix: nil} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: wincompatNamespace}, Data: data}
		if _, err := l.cs.CoreV1().ConfigMaps(wincompatNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return os.WriteFile(l.policyFile, []byte(pol), 0o600)
}

// measure starts both replicas on the cluster as it stands and measures them, then audits the cluster.
func (l *lab) measure(ctx context.Context, cl *cluster) (s stage, err error) {
	s = stage{Pods: cl.pods, Nodes: cl.nodes, Events: cl.events, WindowsPods: cl.pods - cl.counts[roleLinux]}
	var rs []*replica
	defer func() { err = errors.Join(err, stopAll(rs)) }()
	for _, name := range []string{"a", "b"} {
		r, err := startReplica(l.cp, l, name)
		if err != nil {
			return s, err
		}
		rs = append(rs, r)
	}
	rss := sample(rs)
	defer func() {
		if rss != nil {
			rss.end()
		}
	}()
	for _, r := range rs {
		if err := r.waitReady(ctx, l.c.syncTimeout); err != nil {
			return s, err
		}
	}
	leader, _, gauge, err := waitLeader(ctx, rs, rs[0].started, l.c.syncTimeout)
	if err != nil {
		return s, err
	}
	follower := rs[0]
	if follower == leader {
		follower = rs[1]
	}
	s.SyncFromGauge = gauge
	s.Leader.ReadySeconds, s.Follower.ReadySeconds = leader.ready.Seconds(), follower.ready.Seconds()
	// The leader's own start, though both start within milliseconds of each other.
	s.LeaderSyncSeconds = time.Since(leader.started).Seconds()
	if s.Misplaced, err = checkMisplaced(ctx, l.cs, cl, leader, 2*time.Minute); err != nil {
		return s, err
	}
	for _, m := range []struct {
		r *replica
		f *replicaFigures
	}{{leader, &s.Leader}, {follower, &s.Follower}} {
		heap, err := m.r.liveHeap(ctx)
		if err != nil {
			return s, err
		}
		m.f.HeapMiB = mib(heap)
		if m.f.RSSMiB, m.f.PeakRSSMiB, err = rssOf(m.r); err != nil {
			return s, err
		}
	}
	for _, m := range []struct {
		r *replica
		f *replicaFigures
	}{{leader, &s.Leader}, {follower, &s.Follower}} {
		if m.f.Review, err = reviewLatency(ctx, m.r, l.cp.Webhook.CAData, l.c.warmup, l.c.reviews); err != nil {
			return s, err
		}
	}
	// Failover: the leader dies without releasing its Lease; the follower must take it once it expires
	// and sync its watchers.
	killed := time.Now()
	if err := leader.kill(); err != nil {
		return s, err
	}
	next, took, _, err := waitLeader(ctx, []*replica{follower}, killed, l.c.syncTimeout)
	if err != nil {
		return s, fmt.Errorf("failover: %w", err)
	}
	s.FailoverSeconds = took.Seconds()
	after, err := checkMisplaced(ctx, l.cs, cl, next, 2*time.Minute)
	if err != nil {
		return s, err
	}
	s.MisplacedAfterFailover = after
	if s.Follower.AfterFailoverHeapMiB, err = liveHeapMiB(ctx, next); err != nil {
		return s, err
	}
	peaks := rss.end()
	rss = nil
	s.Leader.SampledMaxRSSMiB, s.Follower.SampledMaxRSSMiB = mib(peaks[leader.name]), mib(peaks[follower.name])
	if err := stopAll(rs); err != nil {
		return s, err
	}
	rs = nil
	if s.Audit, err = runAudit(ctx, l.wincompat, l.kubeconfig); err != nil {
		return s, err
	}
	fmt.Printf("    leader heap %.1f MiB, RSS %.1f (peak %.1f); follower heap %.1f MiB, RSS %.1f; ready %.1f/%.1f s, leader synced %.1f s; review p50 %.2f ms; failover %.1f s; audit %.1f s, %.0f MiB\n",
		s.Leader.HeapMiB, s.Leader.RSSMiB, s.Leader.PeakRSSMiB, s.Follower.HeapMiB, s.Follower.RSSMiB, s.Leader.ReadySeconds, s.Follower.ReadySeconds,
		s.LeaderSyncSeconds, s.Leader.Review.P50, s.FailoverSeconds, s.Audit.Seconds, s.Audit.PeakRSSMiB)
	return s, nil
}

func liveHeapMiB(ctx context.Context, r *replica) (float64, error) {
	b, err := r.liveHeap(ctx)
	return mib(b), err
}

func rssOf(r *replica) (now, peak float64, err error) {
	p, err := load.ReadProc(r.server.Pid)
	if err != nil {
		return 0, 0, err
	}
	return mib(p.RSS), mib(p.PeakRSS), nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// versionOf asks the binary its version, for the report.
func versionOf(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", bin, err)
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]), nil
}

func machineLine() string {
	m := perf.ThisMachine()
	return fmt.Sprintf("%d CPUs, %s, %s, load average at start %s", m.CPUs, m.CPUModel, m.Go, m.LoadAverage)
}
