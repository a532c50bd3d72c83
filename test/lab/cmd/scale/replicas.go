package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/test/lab/perf/load"
)

const (
	wincompatNamespace = "wincompat-system"
	policyConfigMap    = "wincompat-policy"
	// The names the server uses (webhook/server.LastGoodSuffix, misplaced.ReasonMismatch, audit.Misplaced),
	// spelled out: the lab measures the binary, and need not compile the server's packages, which may
	// be mid-change in the working tree while it runs.
	lastGoodSuffix = "-last-good"
	reasonMismatch = "WindowsBuildMismatch"
	auditMisplaced = "misplaced"
	// syncedGauge is 1 on the replica that leads once its watchers' caches have synced.
	syncedGauge = "wincompat_leader_synced"
)

// replica is one `wincompat serve` of the pair, with its own loopback ports.
type replica struct {
	name                        string
	server                      *perf.Server
	started                     time.Time
	port, metrics, probe, pprof int
	ready                       time.Duration // process start to /readyz 200
	killed                      bool
}

func (r *replica) metricsURL() string { return fmt.Sprintf("http://127.0.0.1:%d/metrics", r.metrics) }

// startReplica runs `wincompat serve` with the flags the chart runs it with (deploy/helm/wincompat/
// templates/deployment.yaml, default values), but: ports and addresses on loopback; --cert-dir with
// envtest's certificate for 127.0.0.1 (the chart's cert-manager mode mounts one the same way);
// --resolve-images=false, so that nothing leaves the machine; --engine=webhook, since the lab installs
// no admission policies (the replicas' work is the same: the engine only moves work into the API
// server); a system:masters kubeconfig instead of the chart's RBAC.
func startReplica(cp *controlplane.ControlPlane, l *lab, name string) (*replica, error) {
	r := &replica{name: name}
	for _, p := range []*int{&r.port, &r.metrics, &r.probe, &r.pprof} {
		var err error
		if *p, err = controlplane.FreePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"serve",
		"--port=" + strconv.Itoa(r.port), "--bind-address=127.0.0.1",
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(r.metrics),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(r.probe),
		"--pprof-bind-address=127.0.0.1:" + strconv.Itoa(r.pprof),
		"--tls-min-version=1.3",
		"--policy=" + l.policyFile, "--policy-configmap=" + policyConfigMap,
		"--leader-elect",
		"--manage-runtimeclasses=true", "--watch-misplaced=true",
		"--engine=webhook", "--zap-log-level=info", "--resolve-images=false",
		"--cert-dir=" + cp.Webhook.CertDir,
		"--max-connections=256", "--read-timeout=10s", "--max-review-bytes-in-flight=96Mi",
		"--kubeconfig=" + l.kubeconfig,
	}
	// The chart sets WINCOMPAT_MEMORY_LIMIT from limits.memory (in bytes) and no CPU limit, so Go takes
	// every core: GOMAXPROCS is left alone.
	env := []string{"POD_NAMESPACE=" + wincompatNamespace, "WINCOMPAT_MEMORY_LIMIT=" + strconv.FormatInt(l.memoryLimit, 10)}
	r.started = time.Now()
	s, err := perf.StartServer(l.wincompat, args, env, filepath.Join(l.work, fmt.Sprintf("%s-%s.log", l.stage, name)))
	if err != nil {
		return nil, err
	}
	r.server = s
	return r, nil
}

// waitReady polls /readyz until 200: the time from process start is the replica's time to ready.
func (r *replica) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := r.server.WaitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", r.probe)); err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	r.ready = time.Since(r.started)
	return nil
}

// leaderSynced says whether r leads with its watchers synced: wincompat_leader_synced when r serves it;
// otherwise (a server from before the gauge) from its log, where client-go's leader election says it
// acquired the Lease and each of the leader's controllers says it starts its workers, which
// controller-runtime does only once every source of the controller (the pod cache, the Event
// informer) has synced. fromGauge says which was read.
func (r *replica) leaderSynced(ctx context.Context) (synced, fromGauge bool, err error) {
	families, err := perf.ScrapeFamilies(ctx, r.metricsURL())
	if err != nil {
		return false, false, err
	}
	if f, ok := families[syncedGauge]; ok {
		for _, m := range f.GetMetric() {
			if m.GetGauge().GetValue() == 1 {
				return true, true, nil
			}
		}
		return false, true, nil
	}
	b, err := os.ReadFile(r.server.LogPath)
	if err != nil {
		return false, false, err
	}
	log := string(b)
	if !strings.Contains(strings.ToLower(log), "successfully acquired lease") {
		return false, false, nil
	}
	for _, controller := range []string{`"controller":"misplaced-pods"`, `"controller":"runtimeclasses"`} {
		if !logHas(log, "Starting workers", controller) {
			return false, false, nil
		}
	}
	return true, false, nil
}

// logHas: one line of log holds all of words.
func logHas(log string, words ...string) bool {
	for line := range strings.SplitSeq(log, "\n") {
		all := true
		for _, w := range words {
			if !strings.Contains(line, w) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// waitLeader polls the replicas every 100 ms until one leads with its watchers synced, and returns it
// with the time since since.
func waitLeader(ctx context.Context, rs []*replica, since time.Time, timeout time.Duration) (*replica, time.Duration, bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, r := range rs {
			if r.killed {
				continue
			}
			if !r.server.Running() {
				return nil, 0, false, fmt.Errorf("%s exited: %v; the end of its log:\n%s", r.name, r.server.ExitError(), controlplane.TailLines(r.server.LogPath, 20))
			}
			synced, gauge, err := r.leaderSynced(ctx)
			if err == nil && synced {
				return r, time.Since(since), gauge, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, 0, false, fmt.Errorf("no replica led with synced watchers within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return nil, 0, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// liveHeap forces a collection through the pprof endpoint (the heap profile with gc=1 collects first)
// and reads go_memstats_heap_alloc_bytes right after: the live heap, without the garbage a scrape
// at a random moment would include.
func (r *replica) liveHeap(ctx context.Context) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", r.pprof), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: pprof heap: HTTP %d", r.name, resp.StatusCode)
	}
	families, err := perf.ScrapeFamilies(ctx, r.metricsURL())
	if err != nil {
		return 0, err
	}
	f, ok := families["go_memstats_heap_alloc_bytes"]
	if !ok || len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("%s: no go_memstats_heap_alloc_bytes on /metrics", r.name)
	}
	return int64(f.GetMetric()[0].GetGauge().GetValue()), nil
}

// gauge sums the values of a gauge family on r's /metrics; ok is false when r does not serve it.
func (r *replica) gauge(ctx context.Context, name string) (float64, bool, error) {
	families, err := perf.ScrapeFamilies(ctx, r.metricsURL())
	if err != nil {
		return 0, false, err
	}
	f, ok := families[name]
	if !ok {
		return 0, false, nil
	}
	var sum float64
	for _, m := range f.GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	return sum, true, nil
}

// sampler reads both replicas' VmRSS every 100 ms for as long as they run: the largest seen per
// replica, to hold against the chart's memory limit at every moment, not only at the end.
type sampler struct {
	mu   sync.Mutex
	max  map[string]int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func sample(rs []*replica) *sampler {
	s := &sampler{max: map[string]int64{}, stop: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			for _, r := range rs {
				if p, err := load.ReadProc(r.server.Pid); err == nil {
					s.mu.Lock()
					s.max[r.name] = max(s.max[r.name], p.RSS, p.PeakRSS)
					s.mu.Unlock()
				}
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	})
	return s
}

// end stops the sampling and returns the largest resident set of each replica.
func (s *sampler) end() map[string]int64 {
	close(s.stop)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// kill sends SIGKILL, as a node's failure or the OOM killer would: no Lease released.
func (r *replica) kill() error {
	r.killed = true
	if err := r.server.Kill(); err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	return nil
}

// stop ends a replica still running with SIGTERM.
func (r *replica) stop() error {
	if r.killed {
		return nil
	}
	return r.server.Stop(30 * time.Second)
}

func stopAll(rs []*replica) error {
	var errs []error
	for _, r := range rs {
		if r != nil {
			errs = append(errs, r.stop())
		}
	}
	return errors.Join(errs...)
}
