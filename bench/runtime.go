package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
)

// The Go runtime's own figures over a measured window, for the loader (this process,
// read from runtime/metrics) and for the broker (its Prometheus /metrics, when it
// has an admin URL and exports them: Samsa does, net/node/metrics_runtime.go):
//
//	figure              runtime/metrics                      Prometheus series
//	GC pauses           /gc/pauses:seconds                   go_gc_pauses_seconds (histogram)
//	scheduling latency  /sched/latencies:seconds             go_sched_latencies_seconds (histogram)
//	GC share of CPU     /cpu/classes/gc/total:cpu-seconds    go_cpu_classes_gc_total_cpu_seconds_total
//	                    over /cpu/classes/total:cpu-seconds  over go_cpu_classes_total_cpu_seconds_total
//
// Both histograms are cumulative since the process began; the window's are the
// differences of two readings, and its p99 and max the upper bounds of the buckets
// that hold them (a bucket beyond the last finite bound is read as that bound). The
// runtime's own buckets are a few per cent wide; Samsa's export has ten a decade, so
// a broker's figure is within 26% above the true one.
//
// A Samsa broker's /metrics also has its engine's group-commit histograms
// (net/node/metrics_engine.go), read the same way: the fdatasync latency
// (samsa_engine_fsync_latency_seconds) and a durability waiter's wait for its
// flusher round (samsa_engine_flush_queue_wait_seconds), both with bounds doubling
// (50 µs and 5 µs up), so within 2× above the true figure. A broker without them (not
// Samsa) has only the runtime's. A samsa-cluster target's nodes are read together:
// their histograms and CPU classes summed (one pause of any node is a pause).
//
// A spike (spikeNote) is a window whose publish max exceeds spikeRatio × its p99;
// the note names the runtime figures that could account for it: a maximum of at
// least spikeShare of the excess (max − p99). The maxima are the window's, not
// aligned in time with the spike: a figure named coincides in size, and one not
// named could not have caused it alone.
const (
	spikeRatio = 10
	spikeShare = 0.25
)

// RuntimeStats is one Go process's runtime figures over a measured window.
type RuntimeStats struct {
	GCPauses     int64   `json:"gc_pauses"`
	GCPauseP99Ms float64 `json:"gc_pause_p99_ms"`
	GCPauseMaxMs float64 `json:"gc_pause_max_ms"`
	// Sched* is the time goroutines waited runnable before they ran.
	SchedP99Ms float64 `json:"sched_latency_p99_ms"`
	SchedMaxMs float64 `json:"sched_latency_max_ms"`
	// GCCPUShare is the runtime's estimate of the share of the process's CPU spent
	// on GC (background marking, assists, pauses), 0..1; -1 when the runtime did not
	// update its estimate in the window (it does at each GC).
	GCCPUShare float64 `json:"gc_cpu_share"`
	// Engine: the broker exported its engine's group-commit figures (Samsa), the
	// fdatasyncs of the window (count, p99, max) and a durability waiter's wait for
	// its flusher round (p99, max).
	Engine          bool    `json:"engine,omitempty"`
	Fsyncs          int64   `json:"fsyncs,omitempty"`
	FsyncP99Ms      float64 `json:"fsync_p99_ms,omitempty"`
	FsyncMaxMs      float64 `json:"fsync_max_ms,omitempty"`
	FlushQueueP99Ms float64 `json:"flush_queue_p99_ms,omitempty"`
	FlushQueueMaxMs float64 `json:"flush_queue_max_ms,omitempty"`
	Source          string  `json:"source"`
	// IncludesBroker: the broker ran in the loader's process (the kfake target).
	IncludesBroker bool `json:"includes_broker,omitempty"`
}

// RuntimeSource reads a broker's runtime figures at one instant (MetricsUsage).
type RuntimeSource interface {
	Runtime() (RuntimeSnap, error)
}

// RuntimeSnap is a Go process's cumulative runtime figures at one instant.
type RuntimeSnap struct {
	gcPauses, sched runtimeHist
	gcCPU, totalCPU float64
	// A Samsa broker's engine: fdatasyncs and the flush queue's wait; engine says
	// they were exported.
	fsync, flushQueue runtimeHist
	engine            bool
}

// add sums two readings of processes of one build (the nodes of a cluster):
// histograms of the same shape bucket by bucket.
func (a RuntimeSnap) add(b RuntimeSnap) RuntimeSnap {
	sum := func(x, y runtimeHist) runtimeHist {
		if len(x.counts) == 0 {
			return y
		}
		out := runtimeHist{upper: x.upper, counts: append([]uint64(nil), x.counts...)}
		if len(y.counts) == len(x.counts) {
			for i, c := range y.counts {
				out.counts[i] += c
			}
		}
		return out
	}
	return RuntimeSnap{gcPauses: sum(a.gcPauses, b.gcPauses), sched: sum(a.sched, b.sched),
		gcCPU: a.gcCPU + b.gcCPU, totalCPU: a.totalCPU + b.totalCPU,
		fsync: sum(a.fsync, b.fsync), flushQueue: sum(a.flushQueue, b.flushQueue), engine: a.engine || b.engine}
}

// runtimeHist is a histogram in seconds: counts[i] fell at or below upper[i] and
// above upper[i-1]; upper is ascending and finite.
type runtimeHist struct {
	upper  []float64
	counts []uint64
}

var selfRuntimeSamples = []string{"/gc/pauses:seconds", "/sched/latencies:seconds", "/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/total:cpu-seconds"}

// selfRuntime reads this process's figures from runtime/metrics.
func selfRuntime() RuntimeSnap {
	s := make([]metrics.Sample, len(selfRuntimeSamples))
	for i, n := range selfRuntimeSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	var snap RuntimeSnap
	for i, h := range []*runtimeHist{&snap.gcPauses, &snap.sched} {
		if s[i].Value.Kind() != metrics.KindFloat64Histogram {
			continue
		}
		fh := s[i].Value.Float64Histogram()
		for j, c := range fh.Counts {
			up := fh.Buckets[j+1]
			if math.IsInf(up, 1) {
				up = fh.Buckets[j]
			}
			h.upper = append(h.upper, up)
			h.counts = append(h.counts, c)
		}
	}
	if s[2].Value.Kind() == metrics.KindFloat64 {
		snap.gcCPU = s[2].Value.Float64()
	}
	if s[3].Value.Kind() == metrics.KindFloat64 {
		snap.totalCPU = s[3].Value.Float64()
	}
	return snap
}

// parseRuntime reads a broker's figures from the Prometheus text format; it is an
// error when a series is missing (a broker that does not export them).
func parseRuntime(r io.Reader) (RuntimeSnap, error) {
	type le struct {
		bound float64
		cum   uint64
	}
	names := []string{"go_gc_pauses_seconds_bucket", "go_sched_latencies_seconds_bucket", "samsa_engine_fsync_latency_seconds_bucket", "samsa_engine_flush_queue_wait_seconds_bucket"}
	hists := map[string][]le{}
	for _, n := range names {
		hists[n] = nil
	}
	var snap RuntimeSnap
	var haveGC, haveTotal bool
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		series, labels, _ := strings.Cut(name, "{")
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		switch series {
		case names[0], names[1], names[2], names[3]:
			b, ok := strings.CutPrefix(labels, `le="`)
			b, _, _ = strings.Cut(b, `"`)
			bound, berr := strconv.ParseFloat(b, 64)
			if !ok || berr != nil || err != nil {
				return snap, fmt.Errorf("%s: bad bucket %q", series, line)
			}
			hists[series] = append(hists[series], le{bound, uint64(v)})
		case "go_cpu_classes_gc_total_cpu_seconds_total":
			snap.gcCPU, haveGC = v, err == nil
		case "go_cpu_classes_total_cpu_seconds_total":
			snap.totalCPU, haveTotal = v, err == nil
		}
	}
	if err := sc.Err(); err != nil {
		return snap, err
	}
	var missing []string
	snap.engine = len(hists[names[2]]) > 0 && len(hists[names[3]]) > 0
	for i, n := range names {
		bs := hists[n]
		if len(bs) == 0 {
			if i < 2 { // the engine's are optional: a broker that is not Samsa
				missing = append(missing, strings.TrimSuffix(n, "_bucket"))
			}
			continue
		}
		sort.Slice(bs, func(a, b int) bool { return bs[a].bound < bs[b].bound })
		h := []*runtimeHist{&snap.gcPauses, &snap.sched, &snap.fsync, &snap.flushQueue}[i]
		var prev uint64
		last := 0.0
		for _, b := range bs {
			up := b.bound
			if math.IsInf(up, 1) {
				up = last
			}
			h.upper = append(h.upper, up)
			h.counts = append(h.counts, b.cum-min(prev, b.cum))
			prev, last = b.cum, up
		}
	}
	if !haveGC || !haveTotal {
		missing = append(missing, "go_cpu_classes_*_cpu_seconds_total")
	}
	if len(missing) > 0 {
		return snap, fmt.Errorf("no %s series", strings.Join(missing, ", "))
	}
	return snap, nil
}

// since is h less an earlier reading a of the same histogram; a reading of another
// shape (a restarted process) counts from zero.
func (h runtimeHist) since(a runtimeHist) runtimeHist {
	d := runtimeHist{upper: h.upper, counts: make([]uint64, len(h.counts))}
	same := len(a.counts) == len(h.counts)
	for i, c := range h.counts {
		if same && a.counts[i] <= c {
			c -= a.counts[i]
		}
		d.counts[i] = c
	}
	return d
}

// quantiles is the count, the q-quantile and the max (in ms) of h.
func (h runtimeHist) quantiles(q float64) (n int64, pq, maxMs float64) {
	for _, c := range h.counts {
		n += int64(c)
	}
	if n == 0 {
		return 0, 0, 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var run int64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		run += int64(c)
		if pq == 0 && run >= rank {
			pq = h.upper[i] * 1e3
		}
		maxMs = h.upper[i] * 1e3
	}
	return n, pq, maxMs
}

// runtimeStats is the window between two readings of one process.
func runtimeStats(a, b RuntimeSnap, source string) *RuntimeStats {
	s := &RuntimeStats{Source: source, GCCPUShare: -1}
	s.GCPauses, s.GCPauseP99Ms, s.GCPauseMaxMs = b.gcPauses.since(a.gcPauses).quantiles(0.99)
	_, s.SchedP99Ms, s.SchedMaxMs = b.sched.since(a.sched).quantiles(0.99)
	if dt := b.totalCPU - a.totalCPU; dt > 0 {
		s.GCCPUShare = (b.gcCPU - a.gcCPU) / dt
	}
	if a.engine && b.engine {
		s.Engine = true
		s.Fsyncs, s.FsyncP99Ms, s.FsyncMaxMs = b.fsync.since(a.fsync).quantiles(0.99)
		_, s.FlushQueueP99Ms, s.FlushQueueMaxMs = b.flushQueue.since(a.flushQueue).quantiles(0.99)
	}
	return s
}

// addSpikeNote adds spikeNote's note, if any, to a finished result.
func addSpikeNote(res *Result) {
	if n := spikeNote(res); n != "" {
		res.Notes = append(res.Notes, n)
	}
}

// runtimeProbe takes the loader's and the broker's readings at the start of a
// window; finish adds the window's figures to a result.
type runtimeProbe struct {
	broker       RuntimeSource
	self0, brok0 RuntimeSnap
	brokErr      error
}

func startRuntimeProbe(broker RuntimeSource) *runtimeProbe {
	p := &runtimeProbe{broker: broker, self0: selfRuntime()}
	if broker != nil {
		p.brok0, p.brokErr = broker.Runtime()
	}
	return p
}

// finish sets res.LoaderRuntime and res.BrokerRuntime (when the broker exports its
// figures; a note says why not otherwise), read at the end of the window.
func (p *runtimeProbe) finish(res *Result, inProcess bool) {
	if p == nil {
		return
	}
	res.LoaderRuntime = runtimeStats(p.self0, selfRuntime(), "runtime/metrics of samsa-bench")
	res.LoaderRuntime.IncludesBroker = inProcess
	if p.broker != nil {
		b1, err := p.broker.Runtime()
		if err == nil && p.brokErr == nil {
			src := ""
			if st, ok := p.broker.(fmt.Stringer); ok {
				src = st.String()
			}
			res.BrokerRuntime = runtimeStats(p.brok0, b1, src)
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("broker runtime figures not measured: %v", firstErr(p.brokErr, err)))
		}
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// spikeNote names a window whose publish max exceeds spikeRatio × p99, with the
// runtime figures that could account for it (see above), or "".
func spikeNote(r *Result) string {
	p := r.PublishLatency
	if p.Count == 0 || p.P99 <= 0 || p.Max <= spikeRatio*p.P99 {
		return ""
	}
	excess := p.Max - p.P99
	var b strings.Builder
	fmt.Fprintf(&b, "spike: publish max %s ms = %.0f× p99 %s ms (p99.9 %s ms)", fmtFig(p.Max), p.Max/p.P99, fmtFig(p.P99), fmtFig(p.P999))
	var named []string
	add := func(who string, s *RuntimeStats) {
		if s == nil {
			fmt.Fprintf(&b, "; %s runtime n/a", who)
			return
		}
		fmt.Fprintf(&b, "; %s: %d GC pauses (p99 %s, max %s ms), scheduling latency p99 %s max %s ms%s",
			who, s.GCPauses, fmtFig(s.GCPauseP99Ms), fmtFig(s.GCPauseMaxMs), fmtFig(s.SchedP99Ms), fmtFig(s.SchedMaxMs), gcShareText(s))
		if s.GCPauseMaxMs >= spikeShare*excess {
			named = append(named, fmt.Sprintf("a %s GC pause of %s ms", who, fmtFig(s.GCPauseMaxMs)))
		}
		if s.SchedMaxMs >= spikeShare*excess {
			named = append(named, fmt.Sprintf("a %s scheduling latency of %s ms", who, fmtFig(s.SchedMaxMs)))
		}
		if !s.Engine {
			return
		}
		fmt.Fprintf(&b, ", %d fdatasyncs (p99 %s, max %s ms), flush queue wait p99 %s max %s ms",
			s.Fsyncs, fmtFig(s.FsyncP99Ms), fmtFig(s.FsyncMaxMs), fmtFig(s.FlushQueueP99Ms), fmtFig(s.FlushQueueMaxMs))
		if s.FsyncMaxMs >= spikeShare*excess {
			named = append(named, fmt.Sprintf("a %s fdatasync of %s ms", who, fmtFig(s.FsyncMaxMs)))
		}
		if s.FlushQueueMaxMs >= spikeShare*excess {
			named = append(named, fmt.Sprintf("a %s flush queue wait of %s ms", who, fmtFig(s.FlushQueueMaxMs)))
		}
	}
	broker := "broker"
	if r.LoaderRuntime != nil && r.LoaderRuntime.IncludesBroker {
		broker = "broker (in the loader)"
	} else {
		add(broker, r.BrokerRuntime)
	}
	loader := "loader"
	if r.LoaderRuntime != nil && r.LoaderRuntime.IncludesBroker {
		loader = "loader and broker"
	}
	add(loader, r.LoaderRuntime)
	if len(named) > 0 {
		fmt.Fprintf(&b, "; coinciding: %s", strings.Join(named, ", "))
	} else {
		fmt.Fprintf(&b, "; no runtime figure reaches %.0f%% of the excess (%s ms): the spike lies outside the figures measured (the network, a lock, the kernel's scheduling, a follower's fetch)", 100*spikeShare, fmtFig(excess))
	}
	return b.String()
}

func gcShareText(s *RuntimeStats) string {
	if s.GCCPUShare < 0 {
		return ""
	}
	return fmt.Sprintf(", GC %.1f%% of CPU", 100*s.GCCPUShare)
}

// Runtime implements RuntimeSource: the broker's runtime figures from its /metrics.
func (m *MetricsUsage) Runtime() (RuntimeSnap, error) {
	body, err := m.scrape()
	if err != nil {
		return RuntimeSnap{}, err
	}
	snap, err := parseRuntime(bytes.NewReader(body))
	if err != nil {
		return snap, fmt.Errorf("%w: broker runtime from %s/metrics: %w", ErrTarget, m.URL, err)
	}
	return snap, nil
}

// NodesRuntime reads the runtime figures of several brokers of one build (the nodes
// of a samsa-cluster target) and sums them.
type NodesRuntime []*MetricsUsage

// Runtime implements RuntimeSource.
func (n NodesRuntime) Runtime() (RuntimeSnap, error) {
	var sum RuntimeSnap
	for _, m := range n {
		s, err := m.Runtime()
		if err != nil {
			return RuntimeSnap{}, err
		}
		sum = sum.add(s)
	}
	return sum, nil
}

// String names the source in reports.
func (n NodesRuntime) String() string {
	return fmt.Sprintf("/metrics of %d nodes, summed", len(n))
}

// WriteRuntimeMetrics writes this process's runtime figures in the Prometheus text
// format, under the names parseRuntime reads (the runtime's own buckets): what a
// kfake child serves on its /metrics.
func WriteRuntimeMetrics(w io.Writer) {
	snap := selfRuntime()
	for _, h := range []struct {
		name string
		h    runtimeHist
	}{{"go_gc_pauses_seconds", snap.gcPauses}, {"go_sched_latencies_seconds", snap.sched}} {
		fmt.Fprintf(w, "# TYPE %s histogram\n", h.name)
		var cum uint64
		last := math.Inf(-1)
		for i, c := range h.h.counts {
			cum += c
			if up := h.h.upper[i]; up > last && !math.IsInf(up, 0) {
				fmt.Fprintf(w, "%s_bucket{le=\"%g\"} %d\n", h.name, up, cum)
				last = up
			}
		}
		fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_count %d\n", h.name, cum, h.name, cum)
	}
	fmt.Fprintf(w, "# TYPE go_cpu_classes_gc_total_cpu_seconds_total counter\ngo_cpu_classes_gc_total_cpu_seconds_total %g\n", snap.gcCPU)
	fmt.Fprintf(w, "# TYPE go_cpu_classes_total_cpu_seconds_total counter\ngo_cpu_classes_total_cpu_seconds_total %g\n", snap.totalCPU)
}
