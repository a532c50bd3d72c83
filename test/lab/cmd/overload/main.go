// Command overload drives `wincompat serve` (bin/wincompat, GOMAXPROCS=1) at twice its measured maximum
// review rate for a minute over HTTPS keep-alive on 127.0.0.1, and checks what issue 8 asks of it under
// overload: no crash, no OOM, bounded memory, recovery within seconds, and every answered review faster
// than the webhook's timeoutSeconds. See test/lab/README.md, "overload".
//
// Usage (from test/, after `make build k8s`; `make overload` does all of it):
//
//	go run ./lab/cmd/overload [-duration 60s] [-factor 2] [-inflight 200] [-out DIR]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
	"github.com/wincompat/wincompat/webhook"
)

const namespace = "perf"

// stopGrace is how long the server may take to exit on SIGTERM: its --shutdown-delay (5 s by default)
// and --shutdown-timeout (5 s here), with room to spare; the chart gives 30 s.
const stopGrace = 15 * time.Second

type config struct {
	root, wincompat, out, workDir string
	measure, duration, recovery   time.Duration
	recoveryBound                 time.Duration
	connections, inflight         int
	factor, normal                float64
}

func main() {
	var c config
	fl := flag.NewFlagSet("overload", flag.ExitOnError)
	fl.StringVar(&c.root, "root", "", "the wincompat checkout (default: found from the working directory)")
	fl.StringVar(&c.wincompat, "wincompat", "", "the wincompat binary (default ROOT/bin/wincompat, from `make build`)")
	fl.StringVar(&c.out, "out", "", "where to write overload.json (default ROOT/bin/lab/overload)")
	fl.StringVar(&c.workDir, "work", "", "keep wincompat's log and the kubeconfig here (default: a temporary directory, removed)")
	fl.DurationVar(&c.measure, "measure", 10*time.Second, "length of the maximum and normal-load phases before the overload")
	fl.DurationVar(&c.duration, "duration", 60*time.Second, "length of the overload")
	fl.Float64Var(&c.factor, "factor", 2, "the overload's arrival rate as a multiple of the measured maximum")
	fl.IntVar(&c.inflight, "inflight", 200, "the most reviews in flight during the overload: kube-apiserver's --max-mutating-requests-inflight default; arrivals beyond it are shed, as the API server would refuse or queue them")
	fl.IntVar(&c.connections, "connections", 8, "keep-alive connections for the maximum and the normal load (as make perf)")
	fl.Float64Var(&c.normal, "load", 0.7, "the normal load before and after, as a fraction of the maximum")
	fl.DurationVar(&c.recovery, "recovery", 15*time.Second, "length of the normal load after the overload, in one-second windows")
	fl.DurationVar(&c.recoveryBound, "recovery-bound", 5*time.Second, "the latency must be normal again within this long after the overload ends")
	_ = fl.Parse(os.Args[1:])
	if fl.NArg() > 0 || c.connections < 1 || c.inflight < 1 || c.factor <= 0 || c.normal <= 0 || c.normal > 1 || c.recovery < c.recoveryBound+2*time.Second {
		fl.Usage()
		os.Exit(2)
	}
	perf.Main("overload", func(ctx context.Context) error { return run(ctx, c) })
}

// Results is what overload.json holds.
type Results struct {
	Date      string       `json:"date"`
	Machine   perf.Machine `json:"machine"`
	Wincompat string       `json:"wincompat"`
	// TimeoutSeconds is the pod webhook's, from deploy/webhook/mutatingwebhookconfiguration.yaml.
	TimeoutSeconds int32 `json:"timeoutSeconds"`
	Inflight       int   `json:"inflight"`
	// Max is the closed loop on Connections connections; Normal the open loop at Load of it, in
	// one-second windows (merged here), NormalWindowP99Ms the median of their p99s.
	Max               perf.Phase `json:"max"`
	Normal            perf.Phase `json:"normal"`
	NormalWindowP99Ms float64    `json:"normalWindowP99Ms"`
	// Overload is at Factor times the maximum, latency from the send (not from the arrival: an arrival
	// that finds Inflight reviews in flight is shed, counted in missed).
	Overload perf.Phase `json:"overload"`
	// OverTimeout counts answered reviews slower than TimeoutSeconds: the API server would have given up
	// on them (failurePolicy Fail: the creation fails).
	OverTimeout int64 `json:"overTimeout"`
	// Timeline is the overload second by second.
	Timeline []Second `json:"timeline"`
	// Recovery is the normal load again, right after the overload, in one-second windows.
	Recovery         []perf.Phase `json:"recovery"`
	NormalP99BoundMs float64      `json:"normalP99BoundMs"`
	// RecoveredAfterSeconds is when the first window began after which every window's p99 is within
	// NormalP99BoundMs; -1 if never. ExcusedWindows are those after it that were not, but in which other
	// processes took more than a core (see disturbed).
	RecoveredAfterSeconds float64     `json:"recoveredAfterSeconds"`
	ExcusedWindows        []int       `json:"excusedWindows,omitempty"`
	RSSBoundMiB           float64     `json:"rssBoundMiB"`
	Goals                 []perf.Goal `json:"goals"`
}

// Second is one second of the overload.
type Second struct {
	Second   int     `json:"second"`
	Answered int64   `json:"answered"`
	Shed     int64   `json:"shed"`
	Errors   int64   `json:"errors"`
	P99Ms    float64 `json:"p99Ms"`
	MaxMs    float64 `json:"maxMs"`
	RSSMiB   float64 `json:"rssMiB"`
	// Cores is wincompat's CPU; GeneratorCores this program's; OtherCores the rest of the machine's.
	Cores          float64 `json:"cores"`
	GeneratorCores float64 `json:"generatorCores"`
	OtherCores     float64 `json:"otherCores"`
}

func run(ctx context.Context, c config) (err error) {
	cleanup, err := perf.ResolvePaths(&c.root, &c.wincompat, &c.out, &c.workDir, "overload")
	if err != nil {
		return err
	}
	defer cleanup()
	webhookPath := filepath.Join(c.root, "deploy", "webhook")
	timeout, err := perf.PodWebhookTimeout(filepath.Join(webhookPath, "mutatingwebhookconfiguration.yaml"))
	if err != nil {
		return err
	}
	r := &Results{Date: time.Now().UTC().Format(time.RFC3339), Machine: perf.ThisMachine(), TimeoutSeconds: timeout, Inflight: c.inflight}

	// The control plane is there for what wincompat reads at admission (the namespace, through its
	// informer); the reviews go to wincompat directly, as the API server would send them.
	cp, err := controlplane.Launch(controlplane.Options{WebhookPaths: []string{webhookPath}})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{policy.LabelEnabled: "true"}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// As make perf runs it (test/lab/cmd/perf), but with serve's own --shutdown-delay: the stop is checked.
	server, meter, err := perf.StartWincompat(ctx, cp, perf.Wincompat{
		Bin: c.wincompat, WorkDir: c.workDir, Env: []string{"GOMAXPROCS=1"}, Self: "overload",
		Flags: []string{"--resolve-images=false", "--shutdown-timeout", "5s"},
	})
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			err = errors.Join(err, server.Stop(10*time.Second))
		}
	}()

	wh := cp.Webhook
	review, err := perf.NewReview("chart-pod", "the Windows chart pod of make perf", perf.ChartPod(2, namespace, true), namespace, admissionv1.Create, perf.WithPatch, "mutated")
	if err != nil {
		return err
	}
	normalClient, err := perf.NewReviewClient(wh.Port, webhook.PodPath, wh.CAData, c.connections)
	if err != nil {
		return err
	}
	defer normalClient.Close()
	resp, err := normalClient.Answer(ctx, review)
	if err != nil {
		return err
	}
	if !resp.Allowed || len(resp.Patch) == 0 {
		return fmt.Errorf("wincompat answered the chart pod without a patch (allowed %v): is namespace %s opted in?", resp.Allowed, namespace)
	}
	if r.Wincompat, err = stampedVersion(perf.ChartPod(2, namespace, true), resp.Patch); err != nil {
		return err
	}
	op := normalClient.Op(review)

	measure := func(run func() *load.Result) (perf.Phase, *load.Result, error) {
		span, err := meter.Start(ctx)
		if err != nil {
			return perf.Phase{}, nil, err
		}
		res := run()
		p, err := span.End(ctx, res)
		return p, res, err
	}

	fmt.Printf("wincompat serve, GOMAXPROCS=1; the pod webhook's timeoutSeconds: %d\n", timeout)
	load.Closed(ctx, c.connections, time.Second, op) // warm-up: connections, caches, the heap
	var maxRes *load.Result
	if r.Max, maxRes, err = measure(func() *load.Result { return load.Closed(ctx, c.connections, c.measure, op) }); err != nil {
		return err
	}
	maximum := maxRes.Throughput()
	printPhase("maximum (closed loop)", r.Max)
	if maximum < 1 {
		return fmt.Errorf("a maximum of %.1f reviews/s leaves no rate to run at", maximum)
	}
	// The normal load in one-second windows, as the recovery is measured: the recovery's windows are
	// compared with the median window here, which one window disturbed by other work does not move.
	normalRate := c.normal * maximum
	windows := func(n int) ([]*load.Result, []perf.Phase, error) {
		var results []*load.Result
		var phases []perf.Phase
		for range n {
			p, res, err := measure(func() *load.Result { return load.Open(ctx, c.connections, normalRate, time.Second, time.Second, op) })
			if err != nil {
				return nil, nil, err
			}
			results, phases = append(results, res), append(phases, p)
		}
		return results, phases, nil
	}
	normalResults, normalWindows, err := windows(int(c.measure / time.Second))
	if err != nil {
		return err
	}
	if r.Normal, err = perf.MergePhases(normalResults, normalWindows); err != nil {
		return err
	}
	r.NormalWindowP99Ms = medianP99(normalWindows)
	printPhase(fmt.Sprintf("normal, %.0f%% (open loop)", 100*c.normal), r.Normal)

	// The overload, on its own connections: the API server opens one per review in flight. They are
	// opened first, one review each, a few at a time: the phase measures the overload itself, not a
	// storm of inflight simultaneous TLS handshakes (what a webhook restarting under load would see).
	overClient, err := perf.NewReviewClient(wh.Port, webhook.PodPath, wh.CAData, c.inflight)
	if err != nil {
		return err
	}
	overOp := overClient.Op(review)
	if err := openConnections(ctx, overOp, c.inflight, c.connections); err != nil {
		return err
	}
	span, err := meter.Start(ctx)
	if err != nil {
		return err
	}
	o := overload(ctx, overOp, c.factor*maximum, c.duration, c.inflight, server.Pid)
	if r.Overload, err = span.End(ctx, o.result); err != nil {
		return err
	}
	// The API server keeps some idle connections, but not hundreds for long.
	overClient.Close()
	r.Timeline = o.timeline
	r.OverTimeout = o.overTimeout(time.Duration(timeout) * time.Second)
	printPhase(fmt.Sprintf("overload, %gx maximum, ≤%d in flight", c.factor, c.inflight), r.Overload)

	// Recovery: the normal load again at once, in one-second windows.
	r.NormalP99BoundMs = max(2*r.NormalWindowP99Ms, r.NormalWindowP99Ms+2)
	if _, r.Recovery, err = windows(int(c.recovery / time.Second)); err != nil {
		return err
	}
	r.RecoveredAfterSeconds = -1
	for i := len(r.Recovery) - 1; i >= 0; i-- {
		p := r.Recovery[i]
		if !normalWindow(p, r.NormalP99BoundMs) && !disturbed(p) {
			break
		}
		if disturbed(p) && !normalWindow(p, r.NormalP99BoundMs) {
			r.ExcusedWindows = append([]int{i}, r.ExcusedWindows...)
		}
		r.RecoveredAfterSeconds = float64(i)
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	// Still alive, and stops as it should.
	alive := server.Running()
	stopped = true
	// As shipped, serve drains for --shutdown-delay (5 s) after SIGTERM, then has up to --shutdown-timeout
	// (5 s here) for what is in flight.
	stopErr := server.Stop(stopGrace)

	// The bound on memory: twice the normal load's peak. Under overload wincompat holds more
	// connections (inflight instead of connections: TLS and HTTP buffers, a goroutine each) and more
	// requests in flight, but nothing that grows with time or with the rate; twice the normal peak
	// leaves room for those and a heap that grows before the collector catches up, and is still far
	// below any container limit a chart would set (the chart's is in its values).
	r.RSSBoundMiB = 2 * r.Normal.Processes["wincompat"].RSSPeakMiB
	r.Goals = goals(r, c, alive, stopErr)
	if err := write(c.out, r); err != nil {
		return err
	}
	printSummary(os.Stdout, r)
	var failed []string
	for _, g := range r.Goals {
		if !g.Met {
			failed = append(failed, g.Goal+": "+g.Measured)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d goals not met:\n  %s\nwincompat's log: %s", len(failed), strings.Join(failed, "\n  "), server.LogPath)
	}
	return nil
}

func normalWindow(p perf.Phase, boundMs float64) bool {
	return p.Errors == 0 && p.Missed == 0 && p.OK > 0 && p.Latency.P99 <= boundMs
}

// disturbed is a window in which processes outside the measurement took more than one of the two cores,
// so that wincompat (one core) and the generator cannot both have had theirs: a slow window then says
// nothing about wincompat. Such windows are excused, and listed, but never when they fail with errors.
func disturbed(p perf.Phase) bool { return p.OtherCores > 1 && p.Errors == 0 }

func goals(r *Results, c config, alive bool, stopErr error) []perf.Goal {
	w := r.Overload.Processes["wincompat"]
	stop := fmt.Sprintf("exited on SIGTERM within %s", stopGrace)
	if stopErr != nil {
		stop = stopErr.Error()
	}
	timeoutMs := float64(r.TimeoutSeconds) * 1000
	return []perf.Goal{
		{
			Goal:     fmt.Sprintf("no crash: wincompat serve still runs after the overload and the recovery, and stops cleanly on SIGTERM within %s", stopGrace),
			Measured: fmt.Sprintf("running: %v; %s", alive, stop),
			Met:      alive && stopErr == nil,
		},
		{
			Goal: fmt.Sprintf("no OOM, bounded memory: RSS peak during the overload ≤ 2× the normal load's peak (%.1f MiB)", r.RSSBoundMiB),
			Measured: fmt.Sprintf("peak %.1f MiB during the overload (normal load %.1f MiB); %.1f MiB at its end; %.1f MiB after the recovery",
				w.RSSPeakMiB, r.Normal.Processes["wincompat"].RSSPeakMiB, w.RSSEndMiB, r.Recovery[len(r.Recovery)-1].Processes["wincompat"].RSSEndMiB),
			Met: w.RSSPeakMiB <= r.RSSBoundMiB,
		},
		{
			Goal: fmt.Sprintf("every answered review below timeoutSeconds (%d s), none failed", r.TimeoutSeconds),
			Measured: fmt.Sprintf("%d answered, max %.1f ms, p99.9 %.1f ms, %d over %d s, %d errors %v; %d arrivals shed at %d in flight",
				r.Overload.OK, r.Overload.Latency.Max, r.Overload.Latency.P999, r.OverTimeout, r.TimeoutSeconds, r.Overload.Errors, r.Overload.ErrorKinds, r.Overload.Missed, r.Inflight),
			Met: r.OverTimeout == 0 && r.Overload.Errors == 0 && r.Overload.Latency.Max < timeoutMs,
		},
		{
			Goal: fmt.Sprintf("recovery: at %.0f%% load after the overload, every one-second window from %s on has p99 ≤ %.2f ms (2× the normal load's median window p99, at least +2 ms), no error and nothing missed, "+
				"unless other processes took more than a core in it; at most a third of those windows excused so",
				100*c.normal, c.recoveryBound, r.NormalP99BoundMs),
			Measured: fmt.Sprintf("normal from second %v on; window p99s %s ms; excused windows %v (other cores %s)",
				r.RecoveredAfterSeconds, windowP99s(r.Recovery), r.ExcusedWindows, excusedOthers(r)),
			Met: r.RecoveredAfterSeconds >= 0 && r.RecoveredAfterSeconds <= c.recoveryBound.Seconds() &&
				3*len(r.ExcusedWindows) <= len(r.Recovery)-int(r.RecoveredAfterSeconds),
		},
	}
}

// overloadRun is what overload measured.
type overloadRun struct {
	result   *load.Result
	timeline []Second
	all      *hdrhistogram.Histogram
}

func (o *overloadRun) overTimeout(timeout time.Duration) int64 {
	limit := timeout.Microseconds()
	var n int64
	for _, b := range o.all.Distribution() {
		if b.From >= limit {
			n += b.Count
		}
	}
	return n
}

// overload schedules reviews at rate for d, the n-th at start + n/rate, and sends each at once on a free
// one of inflight workers (connections); an arrival that finds all of them busy is shed (Missed). This
// is the API server's side of an overloaded webhook: it never has more reviews in flight than its
// inflight limit lets through, and it does not queue reviews for a webhook. Latency counts from the send,
// as the API server's timeoutSeconds does. Every second it reads pid's RSS and CPU.
func overload(ctx context.Context, op load.Op, rate float64, d time.Duration, inflight, pid int) *overloadRun {
	free := make(chan int, inflight)
	for w := range inflight {
		free <- w
	}
	var mu sync.Mutex
	res := &load.Result{Workers: inflight, Rate: rate, Errors: map[string]int64{}, Latency: load.NewHistogram(), SendLag: load.NewHistogram()}
	second := load.NewHistogram()
	var sec Second
	var timeline []Second
	record := func(latency time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			res.Errors[err.Error()]++
			sec.Errors++
			return
		}
		res.OK++
		sec.Answered++
		us := max(latency.Microseconds(), 1)
		_ = res.Latency.RecordValue(us)
		_ = second.RecordValue(us)
	}
	var wg sync.WaitGroup
	total := int64(rate * d.Seconds())
	start := time.Now()
	type reading struct{ server, self, machine time.Duration }
	read := func() reading {
		p, _ := load.ReadProc(pid)
		g, _ := load.ReadProc(os.Getpid())
		m, _ := load.MachineCPU()
		return reading{p.CPU, g.CPU, m}
	}
	last := read()
	lastAt := start
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for n := int64(0); n < total && ctx.Err() == nil; {
		now := <-tick.C
		for due := min(int64(now.Sub(start).Seconds()*rate), total); n < due; n++ {
			select {
			case w := <-free:
				wg.Go(func() {
					t := time.Now()
					err := op(ctx, w)
					record(time.Since(t), err)
					free <- w
				})
			default:
				mu.Lock()
				res.Missed++
				sec.Shed++
				mu.Unlock()
			}
		}
		if now.Sub(lastAt) >= time.Second {
			p, _ := load.ReadProc(pid)
			r := read()
			cores := func(d time.Duration) float64 { return d.Seconds() / now.Sub(lastAt).Seconds() }
			mu.Lock()
			sec.Second = len(timeline) + 1
			sec.P99Ms, sec.MaxMs = float64(second.ValueAtQuantile(99))/1000, float64(second.Max())/1000
			sec.RSSMiB = float64(p.RSS) / (1 << 20)
			sec.Cores, sec.GeneratorCores = cores(r.server-last.server), cores(r.self-last.self)
			sec.OtherCores = max(0, cores(r.machine-last.machine)-sec.Cores-sec.GeneratorCores)
			timeline = append(timeline, sec)
			sec = Second{}
			second.Reset()
			mu.Unlock()
			last, lastAt = r, now
		}
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return &overloadRun{result: res, timeline: timeline, all: res.Latency}
}

// openConnections makes one review on each of workers workers, parallel at a time.
func openConnections(ctx context.Context, op load.Op, workers, parallel int) error {
	next := make(chan int, workers)
	for w := range workers {
		next <- w
	}
	close(next)
	errs := make(chan error, parallel)
	for range parallel {
		go func() {
			var first error
			for w := range next {
				if err := op(ctx, w); err != nil && first == nil {
					first = fmt.Errorf("opening connection %d: %w", w, err)
				}
			}
			errs <- first
		}()
	}
	var all []error
	for range parallel {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// stampedVersion is the version wincompat stamps on the pods it patches (wincompat.io/version).
func stampedVersion(pod, patch []byte) (string, error) {
	patched, err := perf.ApplyPatch(pod, patch)
	if err != nil {
		return "", fmt.Errorf("applying wincompat's patch to the chart pod: %w", err)
	}
	var stamped struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(patched, &stamped); err != nil {
		return "", err
	}
	return stamped.Metadata.Annotations[policy.AnnotationVersion], nil
}

func excusedOthers(r *Results) string {
	var s []string
	for _, i := range r.ExcusedWindows {
		s = append(s, fmt.Sprintf("%.2f", r.Recovery[i].OtherCores))
	}
	return strings.Join(s, " ")
}

func medianP99(ps []perf.Phase) float64 {
	var p99s []float64
	for _, p := range ps {
		p99s = append(p99s, p.Latency.P99)
	}
	slices.Sort(p99s)
	return p99s[len(p99s)/2]
}

func windowP99s(ps []perf.Phase) string {
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%.2f", p.Latency.P99))
	}
	return strings.Join(s, " ")
}

func write(dir string, r *Results) error {
	path := filepath.Join(dir, "overload.json")
	if err := perf.WriteJSON(path, r); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", path)
	return nil
}

func printPhase(name string, p perf.Phase) {
	w := p.Processes["wincompat"]
	fmt.Printf("  %-40s %7.0f/s  p50 %7.3f  p99 %8.3f  max %8.3f ms  errors %d  missed/shed %d  wincompat %.2f cores  RSS peak %.1f MiB  generator %.2f, control plane %.2f, other work %.2f cores\n",
		name, p.Throughput, p.Latency.P50, p.Latency.P99, p.Latency.Max, p.Errors, p.Missed, w.Cores, w.RSSPeakMiB,
		p.Processes["overload"].Cores, p.Processes["kube-apiserver"].Cores+p.Processes["etcd"].Cores, p.OtherCores)
}

func printSummary(out io.Writer, r *Results) {
	fmt.Fprintf(out, "\n%s; %d CPUs, %s; load average at start %s; wincompat %s\n", r.Date, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.LoadAverage, r.Wincompat)
	fmt.Fprintln(out, "\noverload, second by second (latency from the send, ms)")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "second\tanswered\tshed\terrors\tp99\tmax\tRSS MiB\twincompat cores\tgenerator cores\tother cores\t")
	for _, s := range r.Timeline {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.1f\t%.2f\t%.2f\t%.2f\t\n", s.Second, s.Answered, s.Shed, s.Errors, s.P99Ms, s.MaxMs, s.RSSMiB, s.Cores, s.GeneratorCores, s.OtherCores)
	}
	tw.Flush()
	fmt.Fprintln(out, "\nrecovery at the normal rate, one-second windows (latency from the scheduled send, ms)")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "window\treviews/s\tp50\tp99\tmax\terrors\tmissed\tRSS end MiB\twincompat cores\tother cores\t")
	for i, p := range r.Recovery {
		fmt.Fprintf(tw, "%d\t%.0f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%.1f\t%.2f\t%.2f\t\n", i, p.Throughput, p.Latency.P50, p.Latency.P99, p.Latency.Max,
			p.Errors, p.Missed, p.Processes["wincompat"].RSSEndMiB, p.Processes["wincompat"].Cores, p.OtherCores)
	}
	tw.Flush()
	fmt.Fprintln(out, "\ngoals (issue 8, overload)")
	for _, g := range r.Goals {
		verdict := "not met"
		if g.Met {
			verdict = "met"
		}
		fmt.Fprintf(out, "  %-7s %s: %s\n", verdict, g.Goal, g.Measured)
	}
}
