package perf

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// Results is everything one run measured; cmd/perf writes it as results.json.
type Results struct {
	Date    string  `json:"date"`
	Machine Machine `json:"machine"`
	// Wincompat is the version wincompat stamps on pods (wincompat.io/version); Kubernetes the version
	// bin/k8s was built from.
	Wincompat  string         `json:"wincompat"`
	Kubernetes string         `json:"kubernetes"`
	Reviews    *ReviewResults `json:"reviews,omitempty"`
	APIServer  *APIResults    `json:"apiServer,omitempty"`
	Engines    *EngineResults `json:"engines,omitempty"`
	Images     *ImageResults  `json:"images,omitempty"`
	Goals      []Goal         `json:"goals,omitempty"`
}

// Goal is one of issue 7's goals as this run measured it.
type Goal struct {
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// Machine is what the figures depend on.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpuModel"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	// LoadAverage is /proc/loadavg's 1, 5 and 15 minute load when the run started: what else the
	// machine was doing.
	LoadAverage string `json:"loadAverageAtStart"`
}

// ThisMachine describes the machine this program runs on.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAverage = strings.Join(f[:3], " ")
		}
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// ReviewResults are the AdmissionReview load runs against `wincompat serve`.
type ReviewResults struct {
	GOMAXPROCS   int     `json:"gomaxprocs"`
	Connections  int     `json:"connections"`
	PhaseSeconds float64 `json:"phaseSeconds"`
	// LoadFraction is the fixed rate as a fraction of the measured maximum.
	LoadFraction float64          `json:"loadFraction"`
	Scenarios    []ReviewScenario `json:"scenarios"`
}

// ReviewScenario is one kind of review: its maximum (closed loop), then a fixed rate (open loop).
type ReviewScenario struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	BodyBytes   int    `json:"bodyBytes"`
	Max         Phase  `json:"max"`
	Fixed       Phase  `json:"fixed"`
}

// ImageResults are reviews of pods whose images wincompat reads from a registry (on loopback, in the
// generator's process), answered by a second `wincompat serve` with image resolution on.
type ImageResults struct {
	GOMAXPROCS   int     `json:"gomaxprocs"`
	Connections  int     `json:"connections"`
	PhaseSeconds float64 `json:"phaseSeconds"`
	// LookupTimeoutMs is the server's per-review lookup deadline (--image-lookup-timeout), and
	// SlowRegistryDelayMs what the registry added to every manifest request in the "slow" phase.
	LookupTimeoutMs     float64      `json:"lookupTimeoutMs"`
	SlowRegistryDelayMs float64      `json:"slowRegistryDelayMs"`
	Phases              []ImagePhase `json:"phases"`
}

// ImagePhase is one kind of review at one load.
type ImagePhase struct {
	Scenario    string `json:"scenario"`
	Description string `json:"description"`
	BodyBytes   int    `json:"bodyBytes"`
	// Load is "max" (closed loop) or the fixed rate as "N/s" (open loop).
	Load string `json:"load"`
	Phase
}

// Phase is one measured stretch of load with what the processes involved spent on it.
type Phase struct {
	load.Summary
	// Connections is how many TCP connections the generator opened during the phase (reviews only).
	Connections int64 `json:"connections,omitempty"`
	// Warnings is how many warnings the API server returned (pod creations only).
	Warnings int64 `json:"warnings,omitempty"`
	// Wincompat is what wincompat counted in its own metrics during the phase.
	Wincompat Admissions `json:"wincompat"`
	// Processes by name: wincompat, kube-apiserver, etcd, the generator (perf), and the whole
	// machine's busy time (machine).
	Processes map[string]Usage `json:"processes"`
	// OtherCores is the CPU, in cores, that went to processes outside the measurement: a phase that
	// shared the machine with other work says so here.
	OtherCores float64 `json:"otherCores"`
}

func (p *Phase) setOtherCores() {
	others := p.Processes[machine].Cores
	for name, u := range p.Processes {
		if name != machine {
			others -= u.Cores
		}
	}
	// The readings are whole clock ticks taken one after the other, so an idle machine can come out a
	// hundredth of a core below nothing.
	p.OtherCores = max(others, 0)
}

// Usage is what one process spent during a phase.
type Usage struct {
	CPUSeconds float64 `json:"cpuSeconds"`
	// Cores is CPU time over wall time: 1 is one core kept busy.
	Cores float64 `json:"cores"`
	// CPUMicrosPerOp is CPU time per successful operation.
	CPUMicrosPerOp float64 `json:"cpuMicrosPerOp"`
	RSSPeakMiB     float64 `json:"rssPeakMiB"`
	RSSEndMiB      float64 `json:"rssEndMiB"`
}

// APIResults compare pod creation through kube-apiserver with wincompat's webhook installed and with no
// webhook at all.
type APIResults struct {
	Creators     int     `json:"creators"`
	PhaseSeconds float64 `json:"phaseSeconds"`
	Rounds       int     `json:"rounds"`
	// Rate is the fixed rate of the open-loop phases in pods per second; 0 when there were none.
	Rate  float64   `json:"rate,omitempty"`
	Kinds []APIKind `json:"kinds"`
}

// APIKind is one kind of pod, created with and without the webhook in alternating phases.
type APIKind struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Max is as fast as the creators can (closed loop): the throughput, and latencies that are mostly
	// queueing, since with a fixed number of creators latency is that number over the throughput.
	Max Comparison `json:"max"`
	// Fixed is at APIResults.Rate (open loop), where neither side queues much: the latency one
	// creation sees.
	Fixed *Comparison `json:"fixed,omitempty"`
}

// Comparison is one measurement with and without the webhook, each merging the rounds.
type Comparison struct {
	With    Phase `json:"with"`
	Without Phase `json:"without"`
	// ThroughputRatio is creations per second with the webhook over those without.
	ThroughputRatio float64 `json:"throughputRatio"`
	P50AddedMs      float64 `json:"p50AddedMs"`
	P99AddedMs      float64 `json:"p99AddedMs"`
}

// Compare fills the ratios from With and Without.
func (c *Comparison) Compare() {
	if c.Without.Throughput > 0 {
		c.ThroughputRatio = c.With.Throughput / c.Without.Throughput
	}
	c.P50AddedMs = c.With.Latency.P50 - c.Without.Latency.P50
	c.P99AddedMs = c.With.Latency.P99 - c.Without.Latency.P99
}

// Usage returns what a process spent between two readings, over ops successful operations.
func UsageBetween(before, after load.Proc, wall time.Duration, ops int64) Usage {
	u := Usage{
		CPUSeconds: (after.CPU - before.CPU).Seconds(),
		RSSPeakMiB: float64(after.PeakRSS) / (1 << 20), RSSEndMiB: float64(after.RSS) / (1 << 20),
	}
	if wall > 0 {
		u.Cores = u.CPUSeconds / wall.Seconds()
	}
	if ops > 0 {
		u.CPUMicrosPerOp = u.CPUSeconds * 1e6 / float64(ops)
	}
	return u
}

// EngineResults compare the engines that can make the Windows chart pod admissible, each through the
// same kube-apiserver in the same run: every round runs every engine, in an order that rotates from
// round to round, so that drift over the run weighs on all of them alike.
type EngineResults struct {
	Creators     int     `json:"creators"`
	PhaseSeconds float64 `json:"phaseSeconds"`
	Rounds       int     `json:"rounds"`
	// Rate is the fixed rate of the open-loop phases in pods per second.
	Rate    float64  `json:"rate"`
	Engines []Engine `json:"engines"`
}

// Engine is one engine's phases, one per round in round order: Max with the creators back to back,
// Fixed at EngineResults.Rate.
type Engine struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Max         []Phase `json:"max"`
	Fixed       []Phase `json:"fixed"`
	// Order is the engine's place in each round (0 first).
	Order []int `json:"order"`
	// FixedMerged is the rounds of Fixed merged: the distribution the plot draws.
	FixedMerged Phase `json:"fixedMerged"`
}
