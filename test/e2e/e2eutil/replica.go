package e2eutil

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/lab/perf"
	"github.com/wincompat/wincompat/webhook"
)

// The stream: faultCreators creators, each creating one pod every faultInterval (60 pods/s in all), for
// the whole test. Every phase is bounded by the events it waits for, each with a deadline.
const (
	FaultCreators = 6
	FaultInterval = 100 * time.Millisecond
	FaultNS       = "faults"
	// lbPoll is how often the balancer asks each replica's /readyz, as an endpoints controller learns
	// from the kubelet's readiness probe (the chart probes every 5 s; faster here to keep the test short).
	LBPoll = 200 * time.Millisecond
	// LeaseTolerance is the shortest API server outage a leader may not survive: controller-runtime's
	// renew deadline (10 s) less its retry period (2 s), since the deadline counts from the start of the
	// renewal attempt that the outage interrupts.
	LeaseTolerance = 8 * time.Second
	// AllDownFor is how long every replica stays down in phases e and f.
	AllDownFor = 30 * time.Second
)

// WaitUntil polls cond every 100 ms until it holds or timeout passes (a test failure naming what), and
// returns how long it took.
func WaitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// FaultPod is the stream's pod: Windows, with a Linux-only field the API server rejects unless wincompat
// strips it (so an admitted pod proves wincompat acted), and an image whose tag names no Windows build
// (so the build comes from the cluster's nodes).
func FaultPod(name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: FaultNS},
		Spec: corev1.PodSpec{
			OS:              &corev1.PodOS{Name: corev1.Windows},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(1000))},
			Containers:      []corev1.Container{{Name: "app", Image: "registry.example/web:1.4.2"}},
		},
	}
}

// Replica is one `wincompat serve` process, restarted on the same ports as a container restarted in its
// pod keeps the pod's IP.
type Replica struct {
	Index                     int
	Bin, WorkDir              string
	Args                      []string
	Port, ProbePort, MetricsP int
	starts                    int
	Server                    *perf.Server
}

func (r *Replica) Start(t *testing.T) {
	t.Helper()
	r.starts++
	var err error
	logPath := filepath.Join(r.WorkDir, fmt.Sprintf("wincompat-%d.%d.log", r.Index, r.starts))
	if r.Server, err = perf.StartServer(r.Bin, r.Args, nil, logPath); err != nil {
		t.Fatal(err)
	}
}

func (r *Replica) ReadyURL() string { return fmt.Sprintf("http://127.0.0.1:%d/readyz", r.ProbePort) }

func (r *Replica) WaitReady(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Server.WaitReady(ctx, r.ReadyURL()); err != nil {
		t.Fatalf("replica %d: %v", r.Index, err)
	}
}

// Stop sends SIGTERM and waits for the exit.
func (r *Replica) Stop(grace time.Duration) error { return r.Server.Stop(grace) }

// Kill sends SIGKILL and waits for the exit.
func (r *Replica) Kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(r.Server.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Stop reports the exit it waited for: a process killed by SIGKILL is what is expected.
	if err := r.Server.Stop(10 * time.Second); err != nil && !strings.Contains(err.Error(), "signal: killed") {
		t.Fatalf("replica %d after SIGKILL: %v", r.Index, err)
	}
}

// Exited returns nil while the process runs, and its exit otherwise.
func (r *Replica) Exited() error {
	if err := syscall.Kill(r.Server.Pid, 0); err == nil {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.Server.Pid)); err == nil && !strings.Contains(string(b), ") Z ") {
			return nil
		}
	}
	return fmt.Errorf("wincompat serve (pid %d) is not running", r.Server.Pid)
}

// LastLogLine is the last line of the current process's output that is not JSON (the command's own
// message when it fails), or its last line.
func (r *Replica) LastLogLine() string {
	b, _ := os.ReadFile(r.Server.LogPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "wincompat serve:") {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}

func (r *Replica) LogTail() string {
	b, _ := os.ReadFile(r.Server.LogPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// LogLine returns the first JSON log line of the current process whose msg is msg.
func (r *Replica) LogLine(t *testing.T, msg string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(r.Server.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

// Metric returns the value of a series of wincompat's /metrics (the one whose label is value, or the
// first when label is empty), or -1 when there is none.
func (r *Replica) Metric(t *testing.T, name, label, value string) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", r.MetricsP))
	if err != nil {
		t.Fatalf("replica %d: %v", r.Index, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("replica %d: /metrics: %v", r.Index, err)
	}
	for _, m := range families[name].GetMetric() {
		match := label == ""
		for _, l := range m.GetLabel() {
			match = match || (l.GetName() == label && l.GetValue() == value)
		}
		if !match {
			continue
		}
		if m.GetGauge() != nil {
			return m.GetGauge().GetValue()
		}
		return m.GetCounter().GetValue()
	}
	return -1
}

// Review sends the stream's pod to the replica directly, as the API server would, and returns the build
// and build source of the pod as patched.
func (r *Replica) Review(caPEM []byte) (build, source string, err error) {
	raw, err := json.Marshal(FaultPod("direct"))
	if err != nil {
		return "", "", err
	}
	rv, err := perf.NewReview("direct", "", raw, FaultNS, admissionv1.Create, perf.WithPatch, "mutated")
	if err != nil {
		return "", "", err
	}
	c, err := perf.NewReviewClient(r.Port, webhook.PodPath, caPEM, 1)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	resp, err := c.Answer(context.Background(), rv)
	if err != nil {
		return "", "", fmt.Errorf("replica %d: %w", r.Index, err)
	}
	patched, err := perf.ApplyPatch(raw, resp.Patch)
	if err != nil {
		return "", "", fmt.Errorf("replica %d: its patch does not apply: %w", r.Index, err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(patched, &pod); err != nil {
		return "", "", err
	}
	return pod.Annotations[policy.AnnotationBuild], pod.Annotations[policy.AnnotationBuildSource], nil
}
