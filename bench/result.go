package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Result is one run of one workload against one target.
type Result struct {
	Target   string    `json:"target"`
	Workload string    `json:"workload"`
	Mode     string    `json:"mode"` // client or raw
	Round    int       `json:"round"`
	Started  time.Time `json:"started"`
	Config   *Workload `json:"config,omitempty"`

	DurationSec float64 `json:"duration_s"` // measured window
	// RawRate is the paced raw mode's target (msg/s); 0 for the client mode and the
	// raw mode at capacity. A paced run's PublishLatency is per record, from its due
	// time; the raw mode at capacity records one latency per request.
	RawRate  int     `json:"raw_rate,omitempty"`
	PubRate  float64 `json:"pub_msgs"`
	PubMBps  float64 `json:"pub_mbps"`
	ConsRate float64 `json:"cons_msgs"`
	ConsMBps float64 `json:"cons_mbps"`

	// Totals over the whole run, warm-up and drain included.
	Sent                    int64    `json:"sent"`
	Acked                   int64    `json:"acked"`
	Consumed                int64    `json:"consumed"`
	Subscriptions           int      `json:"subscriptions"`
	ConsumedPerSubscription []int64  `json:"consumed_per_subscription,omitempty"`
	Backlog                 int64    `json:"backlog_end"`
	CaughtUp                bool     `json:"caught_up"`
	Errors                  int64    `json:"errors"`
	ErrorSamples            []string `json:"error_samples,omitempty"`

	// PublishLatency is send to ack, from the intended send time (coordinated
	// omission corrected); Uncorrected is from the actual send.
	PublishLatency            Latency `json:"publish_latency"`
	PublishLatencyUncorrected Latency `json:"publish_latency_uncorrected"`
	E2ELatency                Latency `json:"e2e_latency"`

	Series []Point `json:"series,omitempty"`
	// Intervals cut the measured window into RunConfig.Interval lengths (soak.go),
	// IntervalSec long; none without it.
	Intervals   []Interval  `json:"intervals,omitempty"`
	IntervalSec float64     `json:"interval_s,omitempty"`
	Broker      *BrokerCost `json:"broker,omitempty"`
	// Loader is samsa-bench's own CPU over the same window (loader.go); nil where it
	// could not be read.
	Loader *LoaderCost `json:"loader,omitempty"`
	// LoaderRuntime and BrokerRuntime are the Go runtime's own figures over the same
	// window (GC pauses, scheduling latency, GC's share of CPU: runtime.go), the
	// broker's from its /metrics; nil where they could not be read.
	LoaderRuntime *RuntimeStats    `json:"loader_runtime,omitempty"`
	BrokerRuntime *RuntimeStats    `json:"broker_runtime,omitempty"`
	Profiles      []ProfileSummary `json:"profiles,omitempty"`
	// Tiered is a tiered catch-up's figures (tiered.go): the remote read beside the
	// local drain of the same records; the rates above are the remote read's.
	Tiered *TieredFigures `json:"tiered,omitempty"`
	// Copies are what a samsa@tiered target copied to remote storage over a client
	// run's measured window (tiered_target.go).
	Copies *CopyFigures `json:"tiered_copies,omitempty"`
	Notes  []string     `json:"notes,omitempty"`
	// Failed is why the run did not complete, or "".
	Failed string `json:"failed,omitempty"`
}

// Usage is a broker process's resource use at one instant.
type Usage struct {
	CPUSeconds float64 // user + system, since the process started
	PeakRSS    int64   // bytes (VmHWM)
	// RSS is the resident set now, in bytes (VmRSS; process_resident_memory_bytes
	// from /metrics), 0 where the source has none.
	RSS int64
}

// UsageSource reads a broker process's Usage.
type UsageSource interface {
	Usage() (Usage, error)
}

// BrokerCost is the broker's CPU and memory over a measured window.
type BrokerCost struct {
	CPUSeconds  float64 `json:"cpu_s"`
	CPUUsPerMsg float64 `json:"cpu_us_per_msg"`
	CPUUsPerMB  float64 `json:"cpu_us_per_mb"`
	CPUCores    float64 `json:"cpu_cores,omitempty"` // average cores busy
	PeakRSS     int64   `json:"peak_rss_bytes"`
	PerWhat     string  `json:"per,omitempty"` // produced (default) or consumed
	// Source is where the figures came from: /proc/<pid> (PeakRSS is VmHWM) or
	// <admin>/metrics (PeakRSS is the largest RSS sampled during the run).
	Source string `json:"source,omitempty"`
}

func brokerCost(src UsageSource, a, b Usage, msgs, bytes int64) *BrokerCost {
	c := &BrokerCost{CPUSeconds: b.CPUSeconds - a.CPUSeconds, PeakRSS: b.PeakRSS, PerWhat: "produced", Source: usageSourceName(src)}
	if msgs > 0 {
		c.CPUUsPerMsg = c.CPUSeconds * 1e6 / float64(msgs)
	}
	if bytes > 0 {
		c.CPUUsPerMB = c.CPUSeconds * 1e6 / (float64(bytes) / 1e6)
	}
	return c
}

// Report is everything one samsa-bench invocation measured.
type Report struct {
	Title   string    `json:"title"`
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Machine Machine   `json:"machine"`
	Results []*Result `json:"results"`
	Compare []Figure  `json:"compare,omitempty"`
	Limits  *Limits   `json:"limits,omitempty"`
	Regress *Verdict  `json:"regress,omitempty"`
	// History is a figure of the history file across commits (history.go).
	History *History `json:"history,omitempty"`
	// Soak is the verdict of a soak run over its intervals (soak.go).
	Soak *SoakVerdict `json:"soak,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"go"`
	Commit    string `json:"commit,omitempty"`
}

// DescribeMachine fills what it can find out about this machine.
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	m.CPUModel, m.Kernel = machineDetails()
	return m
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: report json: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	return nil
}
