// Command hostile runs the attacks of issue 24 on wincompat's webhook port, and those of issue 40 through
// the API server (issue40.go), one after the other, each for a bounded time, against `wincompat serve` (GOMAXPROCS=1, WINCOMPAT_MEMORY_LIMIT as the chart sets it)
// on 127.0.0.1 next to a real control plane, and measures what each costs the server (peak RSS, CPU) and
// whether legitimate reviews are answered during and after it: reviews POSTed directly, each on a new
// connection, and pods created (dry run) through the API server with wincompat's webhook configuration
// installed. See test/lab/README.md, "hostile".
//
// Usage (from test/, after `make build k8s`; `make hostile` does all of it):
//
//	go run ./lab/cmd/hostile [-duration 20s] [-after 5s] [-memory-limit 128Mi] [-attacks a,b] [-out DIR]
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
	"github.com/wincompat/wincompat/webhook"
)

const namespace = "hostile"

// maxBody is the largest body wincompat's endpoint reads (webhook/endpoint.go maxReviewBytes): an
// attacker declares exactly that, the most the server lets one request hold.
const maxBody = 7 << 20

type config struct {
	root, wincompat, out, workDir string
	duration, after               time.Duration
	memoryLimit                   string
	only                          string
	serveFlags                    []string
}

func main() {
	var c config
	fl := flag.NewFlagSet("hostile", flag.ExitOnError)
	fl.StringVar(&c.root, "root", "", "the wincompat checkout (default: found from the working directory)")
	fl.StringVar(&c.wincompat, "wincompat", "", "the wincompat binary (default ROOT/bin/wincompat, from `make build`)")
	fl.StringVar(&c.out, "out", "", "where to write hostile.json (default ROOT/bin/lab/hostile)")
	fl.StringVar(&c.workDir, "work", "", "keep wincompat's log and the kubeconfig here (default: a temporary directory, removed)")
	fl.DurationVar(&c.duration, "duration", 20*time.Second, "length of each attack")
	fl.DurationVar(&c.after, "after", 5*time.Second, "legitimate reviews after each attack, its connections closed")
	fl.StringVar(&c.memoryLimit, "memory-limit", "256Mi", "the container memory limit the server is told of (WINCOMPAT_MEMORY_LIMIT); peaks are compared with it. 256Mi, tighter than the chart's 384Mi, is the limit the attacks' figures were taken at")
	fl.StringVar(&c.only, "attacks", "", "comma-separated names of the attacks to run (default: all; see the table)")
	fl.Func("serve-flags", "more flags for wincompat serve, space-separated, such as \"--max-review-bytes-in-flight 16Mi\" (default: serve's serving defaults, as the chart ships them)", func(v string) error {
		c.serveFlags = append(c.serveFlags, strings.Fields(v)...)
		return nil
	})
	_ = fl.Parse(os.Args[1:])
	if fl.NArg() > 0 || c.duration < 3*time.Second || c.after < time.Second {
		fl.Usage()
		os.Exit(2)
	}
	perf.Main("hostile", func(ctx context.Context) error { return run(ctx, c) })
}

// Results is what hostile.json holds.
type Results struct {
	Date           string       `json:"date"`
	Machine        perf.Machine `json:"machine"`
	Wincompat      string       `json:"wincompat"`
	MemoryLimit    string       `json:"memoryLimit"`
	MemoryLimitMiB float64      `json:"memoryLimitMiB"`
	ServeFlags     []string     `json:"serveFlags,omitempty"`
	// TimeoutSeconds is the pod webhook's: the direct probes give up after it, as the API server does.
	TimeoutSeconds int32          `json:"timeoutSeconds"`
	Attacks        []AttackResult `json:"attacks"`
	// Alive is whether the server survived every attack.
	Alive bool `json:"alive"`
}

// AttackResult is one attack, measured.
type AttackResult struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Seconds     float64 `json:"seconds"`
	// RSSPeakMiB is VmHWM over the attack and the time after it (reset at the start); RSSSampledMaxMiB the
	// largest VmRSS read every 100 ms; RSSEndMiB at the end of the time after.
	RSSPeakMiB       float64 `json:"rssPeakMiB"`
	RSSSampledMaxMiB float64 `json:"rssSampledMaxMiB"`
	// AnonPeakMiB is the largest RssAnon read every 100 ms: RSS without the binary's pages, which is
	// what the container's limit ends in an OOM kill for. OverLimit compares it with the limit.
	AnonPeakMiB float64 `json:"anonPeakMiB"`
	RSSEndMiB   float64 `json:"rssEndMiB"`
	OverLimit   bool    `json:"overLimit"`
	// CPUSeconds is wincompat's CPU during the attack, Cores that over its length; AfterCPUSeconds after.
	CPUSeconds      float64 `json:"cpuSeconds"`
	Cores           float64 `json:"cores"`
	AfterCPUSeconds float64 `json:"afterCpuSeconds"`
	// GeneratorCores is this program's CPU (attacker and probes), ControlPlaneCores kube-apiserver's and
	// etcd's, OtherCores the rest of the machine's, all during the attack.
	GeneratorCores    float64 `json:"generatorCores"`
	ControlPlaneCores float64 `json:"controlPlaneCores"`
	OtherCores        float64 `json:"otherCores"`
	// Attacker counts the attacker's connections and what became of its requests or connections.
	AttackerConnections int64            `json:"attackerConnections"`
	AttackerOutcomes    map[string]int64 `json:"attackerOutcomes"`
	// HeldSecondsMean is how long, on average, the server let an attacker's connection stay open.
	HeldSecondsMean float64 `json:"heldSecondsMean,omitempty"`
	// Figures and Notes are what an attack of issue 40 measured of its own: serve's RSS between the
	// phases of a flood, how long a pod survived, the largest Event reason the API server took.
	Figures map[string]float64 `json:"figures,omitempty"`
	Notes   []string           `json:"notes,omitempty"`
	// Direct and API are the legitimate reviews during the attack (from its second second on) and after.
	DirectDuring Counts `json:"directDuring"`
	DirectAfter  Counts `json:"directAfter"`
	APIDuring    Counts `json:"apiDuring"`
	APIAfter     Counts `json:"apiAfter"`
	// RSSTimelineMiB is VmRSS every 500 ms, attack and after.
	RSSTimelineMiB []float64 `json:"rssTimelineMiB"`
	// Alive is whether the server still ran after the attack and the time after it; Stop how it then
	// took SIGTERM; Log is its log.
	Alive bool   `json:"alive"`
	Stop  string `json:"stop"`
	Log   string `json:"log"`
}

// Counts are legitimate reviews: answered correctly, or failed and why.
type Counts struct {
	OK       int64            `json:"ok"`
	Failed   int64            `json:"failed"`
	Failures map[string]int64 `json:"failures,omitempty"`
	// MaxMs is the slowest answered one.
	MaxMs float64 `json:"maxMs"`
}

func (c Counts) String() string { return fmt.Sprintf("%d/%d", c.OK, c.Failed) }

// env is what the attacks and probes share.
type env struct {
	c        config
	cp       *controlplane.ControlPlane
	port     int
	tls      *tls.Config
	cs       kubernetes.Interface
	attacker kubernetes.Interface // without a client-side rate limit, for the attacks through the API server
	server   *perf.Server
	meter    *perf.Meter
	timeout  time.Duration
	direct   load.Op
	api      load.Op
	probeGen int // workers of each prober
}

// attack runs until ctx ends and returns once every connection it opened is closed.
type attack struct {
	name, description string
	run               func(ctx context.Context, e *env, s *stats)
	// serve are flags of this attack's own for wincompat serve, after the lab's (the misplaced watcher's).
	serve []string
}

func attacks() []attack {
	return []attack{
		{"none", "no attack: the legitimate probes alone, for reference", func(ctx context.Context, _ *env, _ *stats) { <-ctx.Done() }, nil},
		{"bodies-24-at-once", "24 connections each declare a 7 MiB body, send all but its last byte at once, then wait; reconnect when cut off", slowBodies(24, false), nil},
		{"bodies-24-trickle", "the same, sending 64 KiB every 100 ms (about 11 s for the body)", slowBodies(24, true), nil},
		{"bodies-300-at-once", "300 connections (past --max-connections 256), all but the last byte at once, then wait", slowBodies(300, false), nil},
		{"bodies-300-trickle", "300 connections, 64 KiB every 100 ms", slowBodies(300, true), nil},
		{"largest-reviews-32", "32 keep-alive connections send reviews of a 4,000-container chart pod (about 3.6 MiB) back to back", largestReviews(32, 4000), nil},
		{"policy-256KiB-32", "32 keep-alive connections send /validate-policy reviews of just-under-256 KiB policies, half of unknown keys, half of one key repeated", policies(32, policy.MaxPolicyBytes-1), nil},
		{"policy-1MiB-32", "the same with 1 MiB policies", policies(32, 1<<20), nil},
		{"idle-tls-1000", "1,000 connections complete the TLS handshake and send nothing; reconnect when closed", idle(1000, idleAfterHandshake), nil},
		{"stalled-handshake-1000", "1,000 TCP connections never start the TLS handshake; reconnect when closed", idle(1000, idleBeforeHandshake), nil},
		{"idle-keepalive-1000", "1,000 connections send one small request each, then keep the connection open and send nothing", idle(1000, idleAfterRequest), nil},
		{"huge-name-pod-api", "a 1.3 MB Windows pod whose Secret volume has a 200 KB name and 20,000 items with a mode, created (dry run) through the API server in a loop; the API server refuses it in validation, after wincompat's answer", hugeNameThroughAPI, nil},
		{"huge-name-pod-direct-8", "8 keep-alive connections send reviews of the same pod back to back", hugeNameDirect(8), nil},
		{"event-flood-240", "Warning Events about pods with a reason of 1 MiB (or the largest the API server takes), in a namespace never opted in, created through the API server: 120, then 120 more; serve elects itself leader and runs the misplaced watcher", eventFlood(120, 120), leaderFlags},
		{"forged-event-remediate", "a forged Warning Event Failed (0xc0370101) about a Running, Ready Windows pod of a ReplicaSet, then one every 2 s; serve is leader with remediation on", forgedEvent, append(slices.Clip(leaderFlags), "--remediate-misplaced")},
	}
}

func run(ctx context.Context, c config) (err error) {
	cleanup, err := perf.ResolvePaths(&c.root, &c.wincompat, &c.out, &c.workDir, "hostile")
	if err != nil {
		return err
	}
	defer cleanup()
	limit, err := resource.ParseQuantity(c.memoryLimit)
	if err != nil || limit.Value() <= 0 {
		return fmt.Errorf("-memory-limit %q: want a quantity such as 128Mi", c.memoryLimit)
	}
	chosen := attacks()
	if c.only != "" {
		names := strings.Split(c.only, ",")
		chosen = slices.DeleteFunc(chosen, func(a attack) bool { return !slices.Contains(names, a.name) })
		if len(chosen) != len(names) {
			return fmt.Errorf("-attacks %q: some name is none of the attacks", c.only)
		}
	}
	webhookPath := filepath.Join(c.root, "deploy", "webhook")
	timeoutSeconds, err := perf.PodWebhookTimeout(filepath.Join(webhookPath, "mutatingwebhookconfiguration.yaml"))
	if err != nil {
		return err
	}
	r := &Results{Date: time.Now().UTC().Format(time.RFC3339), Machine: perf.ThisMachine(), MemoryLimit: c.memoryLimit,
		MemoryLimitMiB: float64(limit.Value()) / (1 << 20), TimeoutSeconds: timeoutSeconds, ServeFlags: c.serveFlags}

	cp, err := controlplane.Launch(controlplane.Options{WebhookPaths: []string{webhookPath}})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	// The probes' pods draw wincompat's warnings, 20 of them twice a second: they would drown the report.
	quiet := rest.CopyConfig(cp.Config)
	quiet.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(quiet)
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{policy.LabelEnabled: "true"}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// No controller-manager creates ServiceAccounts, and the admission plugin checks the pod's.
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := prepareIssue40(ctx, cs); err != nil {
		return err
	}
	e, err := newEnv(c, cp, cs, time.Duration(timeoutSeconds)*time.Second)
	if err != nil {
		return err
	}
	// Each attack meets a server of its own, started for it: what one attack leaves in the heap or in
	// the kernel's accept queue is not counted against the next.
	r.Alive = true
	for i, a := range chosen {
		started := time.Now()
		if err := e.start(ctx, limit.Value(), fmt.Sprintf("wincompat-%02d-%s.log", i, a.name), a.serve); err != nil {
			return err
		}
		if slices.Contains(a.serve, "--leader-elect") {
			if err := e.waitForLeader(ctx, started); err != nil {
				return errors.Join(err, e.server.Stop(10*time.Second))
			}
		}
		if r.Wincompat == "" {
			if r.Wincompat, err = e.version(ctx); err != nil {
				return errors.Join(err, e.server.Stop(10*time.Second))
			}
			fmt.Printf("wincompat %s serve, GOMAXPROCS=1, WINCOMPAT_MEMORY_LIMIT=%s; legitimate reviews give up after %d s (the pod webhook's timeoutSeconds)\n", r.Wincompat, c.memoryLimit, timeoutSeconds)
		} else if _, err := e.version(ctx); err != nil {
			return errors.Join(err, e.server.Stop(10*time.Second))
		}
		res, err := e.measure(ctx, a, r.MemoryLimitMiB)
		if err != nil {
			return errors.Join(fmt.Errorf("%s: %w", a.name, err), e.server.Stop(10*time.Second))
		}
		res.Log = e.server.LogPath
		res.Stop = "exited on SIGTERM"
		if err := e.server.Stop(15 * time.Second); err != nil {
			res.Stop = err.Error()
		}
		r.Attacks = append(r.Attacks, res)
		fmt.Printf("  %-24s peak %6.1f MiB (anon %6.1f)  CPU %5.1f s  direct %s during, %s after  API %s during, %s after  attacker %v\n",
			a.name, res.RSSPeakMiB, res.AnonPeakMiB, res.CPUSeconds, res.DirectDuring, res.DirectAfter, res.APIDuring, res.APIAfter, res.AttackerOutcomes)
		if !res.Alive {
			r.Alive = false
			fmt.Printf("wincompat serve exited during %s: %s\n", a.name, res.Stop)
		}
	}
	if err := write(c.out, r); err != nil {
		return err
	}
	printSummary(os.Stdout, r)
	if !r.Alive {
		return errors.New("wincompat serve did not survive every attack")
	}
	return nil
}

func newEnv(c config, cp *controlplane.ControlPlane, cs kubernetes.Interface, timeout time.Duration) (*env, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.Webhook.CAData) {
		return nil, errors.New("no CA certificate in envtest's webhook CA")
	}
	attacker, err := attackerClient(cp.Config)
	if err != nil {
		return nil, err
	}
	e := &env{c: c, cp: cp, port: cp.Webhook.Port, cs: cs, attacker: attacker, timeout: timeout, probeGen: 16,
		tls: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}}
	review, err := perf.NewReview("chart-pod", "the Windows chart pod of make perf", perf.ChartPod(2, namespace, true), namespace, admissionv1.Create, perf.WithPatch, "mutated")
	if err != nil {
		return nil, err
	}
	rc, err := perf.NewReviewClient(e.port, webhook.PodPath, cp.Webhook.CAData, e.probeGen)
	if err != nil {
		return nil, err
	}
	// A legitimate caller that needs a new connection is what a connection flood hurts; one that keeps
	// its connection is measured through the API server below.
	rc.OneRequestPerConnection(timeout)
	e.direct = rc.Op(review)
	pod, err := perf.TypedPod(perf.ChartPod(2, namespace, true))
	if err != nil {
		return nil, err
	}
	// Dry run: admission runs in full, wincompat's webhook included (failurePolicy Fail), and nothing is
	// stored, so probes never accumulate pods. Without wincompat's patch the API server rejects this pod.
	e.api = func(ctx context.Context, _ int) error {
		got, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return errors.New(shorten(err.Error()))
		}
		if got.Annotations[policy.AnnotationVersion] == "" {
			return errors.New("created without wincompat's patch")
		}
		return nil
	}
	return e, nil
}

// start runs a new `wincompat serve` with serve's serving flags as shipped (the bounds measured are its
// defaults), told of a container memory limit of limit bytes, with the attack's own flags.
func (e *env) start(ctx context.Context, limit int64, log string, attackFlags []string) error {
	flags := append([]string{"--resolve-images=false", "--shutdown-delay", "0s", "--shutdown-timeout", "5s"}, e.c.serveFlags...)
	var err error
	e.server, e.meter, err = perf.StartWincompat(ctx, e.cp, perf.Wincompat{
		Bin: e.c.wincompat, WorkDir: e.c.workDir, Self: "hostile", Log: log,
		Env:   []string{"GOMAXPROCS=1", "WINCOMPAT_MEMORY_LIMIT=" + strconv.FormatInt(limit, 10)},
		Flags: append(flags, attackFlags...),
	})
	return err
}

// version is the version the server stamps on the pods it patches, from a first review through the API
// server, which also shows the webhook configuration reaches it.
func (e *env) version(ctx context.Context) (string, error) {
	pod, err := perf.TypedPod(perf.ChartPod(2, namespace, true))
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := e.cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && got.Annotations[policy.AnnotationVersion] != "" {
			return got.Annotations[policy.AnnotationVersion], e.direct(ctx, 0)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("a pod created through the API server was not patched by wincompat: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stats is what an attack saw of its own requests and connections, and what it measured besides.
type stats struct {
	conns    atomic.Int64
	mu       sync.Mutex
	outcomes map[string]int64
	held     time.Duration
	heldN    int64
	figures  map[string]float64
	notes    []string
}

// figure records a number an attack measured of its own, such as serve's RSS between two of its phases.
func (s *stats) figure(name string, v float64) {
	s.mu.Lock()
	if s.figures == nil {
		s.figures = map[string]float64{}
	}
	s.figures[name] = v
	s.mu.Unlock()
}

// note records what an attack found that is no number, such as whether its pod survived.
func (s *stats) note(format string, args ...any) {
	s.mu.Lock()
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *stats) add(outcome string) {
	s.mu.Lock()
	s.outcomes[outcome]++
	s.mu.Unlock()
}

func (s *stats) hold(d time.Duration) {
	s.mu.Lock()
	s.held += d
	s.heldN++
	s.mu.Unlock()
}

// reading is the CPU of the processes involved at one moment.
type reading struct {
	wincompat, self, controlPlane, machine time.Duration
}

func (e *env) read() (reading, error) {
	var r reading
	for name, pid := range e.meter.Pids {
		p, err := load.ReadProc(pid)
		if err != nil {
			return r, fmt.Errorf("%s: %w", name, err)
		}
		switch name {
		case "wincompat":
			r.wincompat = p.CPU
		case "hostile":
			r.self = p.CPU
		default:
			r.controlPlane += p.CPU
		}
	}
	var err error
	r.machine, err = load.MachineCPU()
	return r, err
}

func (e *env) measure(ctx context.Context, a attack, limitMiB float64) (AttackResult, error) {
	res := AttackResult{Name: a.name, Description: a.description}
	d := e.c.duration
	if a.name == "none" {
		d = min(d, 5*time.Second)
	}
	pid := e.server.Pid
	if err := load.ResetPeakRSS(pid); err != nil {
		return res, err
	}
	before, err := e.read()
	if err != nil {
		return res, err
	}
	// RSS sampled besides the kernel's high-water mark: the timeline shows whether memory is held.
	var sampledMax, anonMax int64
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
			p, err := load.ReadProc(pid)
			if err != nil {
				continue
			}
			sampledMax, anonMax = max(sampledMax, p.RSS), max(anonMax, p.RSSAnon)
			if i%5 == 4 {
				res.RSSTimelineMiB = append(res.RSSTimelineMiB, mib(p.RSS))
			}
		}
	}()

	s := &stats{outcomes: map[string]int64{}}
	start := time.Now()
	attackCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	attacked := make(chan struct{})
	go func() {
		defer close(attacked)
		a.run(attackCtx, e, s)
	}()
	// The probes start a second in, once the attack holds what it can.
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	res.DirectDuring, res.APIDuring = e.probe(ctx, attackCtx)
	<-attacked
	during, err := e.read()
	if err != nil && e.server.Running() {
		return res, err
	}
	wall := time.Since(start)
	afterCtx, cancelAfter := context.WithTimeout(ctx, e.c.after)
	defer cancelAfter()
	res.DirectAfter, res.APIAfter = e.probe(ctx, afterCtx)
	stopSampling()
	<-sampled
	res.Alive = e.server.Running()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if res.Alive {
		end, err := load.ReadProc(pid)
		if err != nil {
			return res, err
		}
		res.RSSPeakMiB, res.RSSEndMiB = mib(end.PeakRSS), mib(end.RSS)
		if after, err := e.read(); err == nil {
			res.AfterCPUSeconds = (after.wincompat - during.wincompat).Seconds()
		}
	}
	res.RSSSampledMaxMiB = mib(sampledMax)
	res.RSSPeakMiB = max(res.RSSPeakMiB, res.RSSSampledMaxMiB)
	res.AnonPeakMiB = mib(anonMax)
	res.OverLimit = res.AnonPeakMiB > limitMiB
	res.Seconds = wall.Seconds()
	cores := func(x time.Duration) float64 { return x.Seconds() / wall.Seconds() }
	res.CPUSeconds = (during.wincompat - before.wincompat).Seconds()
	res.Cores = cores(during.wincompat - before.wincompat)
	res.GeneratorCores = cores(during.self - before.self)
	res.ControlPlaneCores = cores(during.controlPlane - before.controlPlane)
	res.OtherCores = max(0, cores(during.machine-before.machine)-res.Cores-res.GeneratorCores-res.ControlPlaneCores)
	res.AttackerConnections = s.conns.Load()
	res.AttackerOutcomes = s.outcomes
	res.Figures, res.Notes = s.figures, s.notes
	if s.heldN > 0 {
		res.HeldSecondsMean = s.held.Seconds() / float64(s.heldN)
	}
	return res, nil
}

// probe sends legitimate reviews until window ends: one directly every 200 ms, each on a new connection
// and given up after the webhook's timeoutSeconds, and one pod created through the API server every
// 500 ms. Probes in flight when the window ends are waited for and counted in it.
func (e *env) probe(ctx, window context.Context) (direct, api Counts) {
	var wg sync.WaitGroup
	wg.Go(func() { direct = e.prober(ctx, window, 200*time.Millisecond, e.timeout, e.direct) })
	// The API server's own deadline for the webhook is timeoutSeconds; the rest is its own work.
	wg.Go(func() { api = e.prober(ctx, window, 500*time.Millisecond, e.timeout+10*time.Second, e.api) })
	wg.Wait()
	return direct, api
}

func (e *env) prober(ctx, window context.Context, every, timeout time.Duration, op load.Op) Counts {
	free := make(chan int, e.probeGen)
	for w := range e.probeGen {
		free <- w
	}
	var mu sync.Mutex
	c := Counts{Failures: map[string]int64{}}
	var wg sync.WaitGroup
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-window.Done():
			wg.Wait()
			return c
		case <-tick.C:
		}
		select {
		case w := <-free:
			wg.Go(func() {
				// Not the window's context: a probe sent in time is judged on its own deadline.
				pctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				t := time.Now()
				err := op(pctx, w)
				took := time.Since(t)
				free <- w
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					c.Failed++
					c.Failures[classify(err)]++
					return
				}
				c.OK++
				c.MaxMs = max(c.MaxMs, float64(took.Microseconds())/1000)
			})
		default:
			mu.Lock()
			c.Failed++
			c.Failures["every prober slot waiting"]++
			mu.Unlock()
		}
	}
}

// dialTLS opens a TLS connection to the webhook port, closed when ctx ends.
func (e *env) dialTLS(ctx context.Context) (net.Conn, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: e.tls}
	conn, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(e.port))
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { conn.Close() })
	return conn, nil
}

// slowBodies: n connections, each declaring the largest body the endpoint reads and sending all but its
// last byte, at once or 64 KiB every 100 ms, then waiting for whatever the server does; then again.
func slowBodies(n int, trickle bool) func(ctx context.Context, e *env, s *stats) {
	return func(ctx context.Context, e *env, s *stats) {
		head := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", webhook.PodPath, e.port, maxBody)
		// A review whose pod never ends: nothing before the last byte tells it from a real one.
		body := fmt.Appendf(nil, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"metadata":{"name":"`)
		body = append(body, bytes.Repeat([]byte("x"), maxBody-1-len(body))...)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				for ctx.Err() == nil {
					conn, err := e.dialTLS(ctx)
					if err != nil {
						if ctx.Err() == nil {
							s.add("dial: " + classify(err))
							time.Sleep(100 * time.Millisecond)
						}
						continue
					}
					s.conns.Add(1)
					answered := make(chan string, 1)
					go func() { answered <- readAnswer(conn) }()
					t := time.Now()
					if _, err := conn.Write(head); err == nil {
						if !trickle {
							_, _ = conn.Write(body)
						} else {
							for rest := body; len(rest) > 0 && ctx.Err() == nil; {
								k := min(len(rest), 64<<10)
								if _, err := conn.Write(rest[:k]); err != nil {
									break
								}
								rest = rest[k:]
								select {
								case <-ctx.Done():
								case <-time.After(100 * time.Millisecond):
								}
							}
						}
					}
					outcome := <-answered
					conn.Close()
					if ctx.Err() == nil {
						s.add(outcome)
						s.hold(time.Since(t))
					} else {
						s.add("still open when the attack ended")
					}
				}
			})
		}
		wg.Wait()
	}
}

// readAnswer reads one HTTP answer from conn, or says how the connection ended without one.
func readAnswer(conn net.Conn) string {
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "no answer: " + classify(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "HTTP " + strconv.Itoa(resp.StatusCode) + ", then " + classify(err)
	}
	return answerKind(resp.StatusCode, body)
}

// answerKind says what an answer was: wincompat refuses a review it will not read (over the budget,
// too slow, too large) with HTTP 200 and an AdmissionReview whose status carries the code, as
// controller-runtime does.
func answerKind(status int, body []byte) string {
	if status != http.StatusOK {
		return "HTTP " + strconv.Itoa(status)
	}
	var review struct {
		Response *struct {
			Allowed bool `json:"allowed"`
			Status  *struct {
				Code int32 `json:"code"`
			} `json:"status"`
		} `json:"response"`
	}
	if err := json.Unmarshal(body, &review); err != nil || review.Response == nil {
		return "HTTP 200, not a review"
	}
	code := int32(0)
	if review.Response.Status != nil {
		code = review.Response.Status.Code
	}
	switch {
	case review.Response.Allowed:
		return "allowed"
	case code == http.StatusForbidden || code == 0:
		return "denied"
	}
	return fmt.Sprintf("refused, code %d", code)
}

// largestReviews: workers keep-alive connections send reviews of a chart pod of n containers back to back.
func largestReviews(workers, n int) func(ctx context.Context, e *env, s *stats) {
	return func(ctx context.Context, e *env, s *stats) {
		review, err := perf.NewReview("largest", "", perf.ChartPod(n, namespace, true), namespace, admissionv1.Create, perf.WithPatch, "mutated")
		if err != nil {
			s.add("preparing: " + err.Error())
			<-ctx.Done()
			return
		}
		bodies := [][]byte{review.Body(0)}
		postLoop(ctx, e, s, workers, webhook.PodPath, bodies)
	}
}

// policies: workers keep-alive connections send /validate-policy reviews of ConfigMaps whose policy.yaml
// is size bytes of unknown keys (even workers) or of one key repeated (odd workers).
func policies(workers, size int) func(ctx context.Context, e *env, s *stats) {
	return func(ctx context.Context, e *env, s *stats) {
		var bodies [][]byte
		for _, repeated := range []bool{false, true} {
			b, err := policyReview(hostilePolicy(size, repeated))
			if err != nil {
				s.add("preparing: " + err.Error())
				<-ctx.Done()
				return
			}
			bodies = append(bodies, b)
		}
		postLoop(ctx, e, s, workers, webhook.PolicyCheckPath, bodies)
	}
}

// hostilePolicy is a valid header and then unknown keys, or the same key again and again, up to size
// bytes (as policy's own TestLoadBoundsHostilePolicies builds them).
func hostilePolicy(size int, repeated bool) string {
	var b strings.Builder
	b.WriteString("apiVersion: wincompat.io/v1alpha1\nkind: Policy\n")
	for i := 0; ; i++ {
		line := fmt.Sprintf("unknownKey%d: true\n", i)
		if repeated {
			line = fmt.Sprintf("builds: [x%d]\n", i)
		}
		if b.Len()+len(line) > size {
			return b.String() + strings.Repeat("#", size-b.Len())
		}
		b.WriteString(line)
	}
}

// policyReview is the AdmissionReview the API server sends /validate-policy for creating the policy
// ConfigMap with data.
func policyReview(data string) ([]byte, error) {
	cm := corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "wincompat-policy", Namespace: "wincompat-system"},
		Data:       map[string]string{webhook.PolicyKey: data},
	}
	raw, err := json.Marshal(&cm)
	if err != nil {
		return nil, err
	}
	gvk := metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvr := metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	return json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "7d3c1f0e-6b5a-4f5e-9d3c-000000000001", Kind: gvk, Resource: gvr, RequestKind: &gvk, RequestResource: &gvr,
			Name: cm.Name, Namespace: cm.Namespace, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	})
}

// postLoop: workers, each on a keep-alive connection of its own, POST bodies (in turn) to path as fast
// as they are answered, and count the answers: allowed, denied, or the HTTP status.
func postLoop(ctx context.Context, e *env, s *stats, workers int, path string, bodies [][]byte) {
	url := fmt.Sprintf("https://127.0.0.1:%d%s", e.port, path)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tr := &http.Transport{
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					s.conns.Add(1)
					return (&net.Dialer{}).DialContext(ctx, network, addr)
				},
				TLSClientConfig: e.tls, MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true,
			}
			defer tr.CloseIdleConnections()
			// The attacker waits as long as the API server would at most.
			hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			var buf bytes.Buffer
			for i := w; ctx.Err() == nil; i++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(bodies[i%len(bodies)]))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						s.add(classify(err))
					}
					continue
				}
				buf.Reset()
				_, err = buf.ReadFrom(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil:
					if ctx.Err() == nil {
						s.add("reading the answer: " + classify(err))
					}
				default:
					s.add(answerKind(resp.StatusCode, buf.Bytes()))
				}
			}
		})
	}
	wg.Wait()
}

type idleMode int

const (
	idleBeforeHandshake idleMode = iota
	idleAfterHandshake
	idleAfterRequest
)

// idle: n connections that do as mode says and then send nothing, each reopened when the server closes it.
func idle(n int, mode idleMode) func(ctx context.Context, e *env, s *stats) {
	return func(ctx context.Context, e *env, s *stats) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				for ctx.Err() == nil {
					var conn net.Conn
					var err error
					if mode == idleBeforeHandshake {
						var c net.Conn
						if c, err = (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(e.port)); err == nil {
							conn = c
							context.AfterFunc(ctx, func() { c.Close() })
						}
					} else {
						conn, err = e.dialTLS(ctx)
					}
					if err != nil {
						if ctx.Err() == nil {
							s.add("dial: " + classify(err))
							time.Sleep(100 * time.Millisecond)
						}
						continue
					}
					s.conns.Add(1)
					t := time.Now()
					r := bufio.NewReader(conn)
					if mode == idleAfterRequest {
						fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", e.port)
						if resp, err := http.ReadResponse(r, nil); err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					}
					// Wait for the server to close it.
					_, err = r.ReadByte()
					conn.Close()
					if ctx.Err() == nil {
						s.add("closed by the server: " + classify(err))
						s.hold(time.Since(t))
					} else {
						s.add("still open when the attack ended")
					}
				}
			})
		}
		wg.Wait()
	}
}

// classify turns an error into a short, bounded kind: no addresses, ports or names that vary.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed"
	case errors.Is(err, net.ErrClosed):
		return "closed"
	}
	return shorten(err.Error())
}

// shorten keeps an error's message bounded and free of what varies from one to the next.
func shorten(s string) string {
	for _, cut := range []string{`Post "`, "dial tcp "} {
		if i := strings.Index(s, cut); i >= 0 {
			if j := strings.Index(s[i:], ": "); j >= 0 {
				s = s[:i] + s[i+j+2:]
			}
		}
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func write(dir string, r *Results) error {
	path := filepath.Join(dir, "hostile.json")
	if err := perf.WriteJSON(path, r); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", path)
	return nil
}

func printSummary(out io.Writer, r *Results) {
	fmt.Fprintf(out, "\n%s; %d CPUs, %s; load average at start %s; wincompat %s, WINCOMPAT_MEMORY_LIMIT=%s, GOMAXPROCS=1\n",
		r.Date, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.LoadAverage, r.Wincompat, r.MemoryLimit)
	fmt.Fprintln(out, "legitimate reviews ok/failed: direct (new connection each, 5/s, timeout = the webhook's) and pods created through the API server (dry run, 2/s)")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "attack\tpeak RSS MiB\tsampled max\tanon max\tend\tCPU s\tcores\tdirect during\tafter\tAPI during\tafter\tattacker conns\tgenerator cores\tother cores\t")
	for _, a := range r.Attacks {
		over := ""
		if a.OverLimit {
			over = " (over)"
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f%s\t%.1f\t%.1f\t%.2f\t%s\t%s\t%s\t%s\t%d\t%.2f\t%.2f\t\n", a.Name, a.RSSPeakMiB, a.RSSSampledMaxMiB, a.AnonPeakMiB, over, a.RSSEndMiB,
			a.CPUSeconds, a.Cores, a.DirectDuring, a.DirectAfter, a.APIDuring, a.APIAfter, a.AttackerConnections, a.GeneratorCores, a.OtherCores)
	}
	tw.Flush()
	fmt.Fprintln(out, "\nwhat became of the attacker's requests, and of the failed legitimate ones")
	for _, a := range r.Attacks {
		fmt.Fprintf(out, "  %s: %s\n", a.Name, a.Description)
		fmt.Fprintf(out, "    attacker: %s", counts(a.AttackerOutcomes))
		if a.HeldSecondsMean > 0 {
			fmt.Fprintf(out, "; a connection held %.1f s on average", a.HeldSecondsMean)
		}
		fmt.Fprintln(out)
		for _, k := range slices.Sorted(maps.Keys(a.Figures)) {
			fmt.Fprintf(out, "    %s: %.1f\n", k, a.Figures[k])
		}
		for _, n := range a.Notes {
			fmt.Fprintf(out, "    %s\n", n)
		}
		for _, p := range []struct {
			name string
			c    Counts
		}{{"direct during", a.DirectDuring}, {"direct after", a.DirectAfter}, {"API during", a.APIDuring}, {"API after", a.APIAfter}} {
			if p.c.Failed > 0 {
				fmt.Fprintf(out, "    %s: %d failed: %s\n", p.name, p.c.Failed, counts(p.c.Failures))
			}
		}
	}
	fmt.Fprintln(out)
	for _, a := range r.Attacks {
		fmt.Fprintf(out, "%s: wincompat serve running after it: %v; %s; log %s\n", a.Name, a.Alive, a.Stop, a.Log)
	}
}

func counts(m map[string]int64) string {
	var s []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s = append(s, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(s, ", ")
}
