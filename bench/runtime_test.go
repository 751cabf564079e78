package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// TestSelfRuntimeWindow: two forced GCs between two readings of this process are
// two pauses or more, with a p99 and max within the pause bounds, and a GC share of
// CPU in 0..1.
func TestSelfRuntimeWindow(t *testing.T) {
	a := selfRuntime()
	runtime.GC()
	runtime.GC()
	s := runtimeStats(a, selfRuntime(), "self")
	if s.GCPauses < 2 || s.GCPauseMaxMs <= 0 || s.GCPauseP99Ms <= 0 || s.GCPauseP99Ms > s.GCPauseMaxMs {
		t.Errorf("after two GCs: %+v", s)
	}
	if s.GCPauseMaxMs > 1000 {
		t.Errorf("a forced GC's pause read as %v ms", s.GCPauseMaxMs)
	}
	if s.GCCPUShare < 0 || s.GCCPUShare > 1 {
		t.Errorf("GC share of CPU %v", s.GCCPUShare)
	}
}

// brokerPage is a /metrics page as Samsa's node exports it (cumulative buckets), with
// the counts given per bucket bound (ms) and the CPU classes.
func brokerPage(gc, sched map[float64]uint64, gcCPU, total float64) string {
	bounds := []float64{0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 50, 100}
	var b strings.Builder
	for _, h := range []struct {
		name string
		per  map[float64]uint64
	}{{"go_gc_pauses_seconds", gc}, {"go_sched_latencies_seconds", sched}} {
		fmt.Fprintf(&b, "# TYPE %s histogram\n", h.name)
		var cum uint64
		for _, ms := range bounds {
			cum += h.per[ms]
			fmt.Fprintf(&b, "%s_bucket{le=\"%g\"} %d\n", h.name, ms/1e3, cum)
		}
		cum += h.per[-1] // beyond the last bound
		fmt.Fprintf(&b, "%s_bucket{le=\"+Inf\"} %d\n%s_sum 0\n%s_count %d\n", h.name, cum, h.name, h.name, cum)
	}
	fmt.Fprintf(&b, "go_cpu_classes_gc_total_cpu_seconds_total %g\ngo_cpu_classes_total_cpu_seconds_total %g\n", gcCPU, total)
	return b.String()
}

// TestBrokerRuntimeFromMetrics: the window's figures are the differences of two
// scrapes; p99 and max are the upper bounds of the buckets holding them.
func TestBrokerRuntimeFromMetrics(t *testing.T) {
	pages := []string{
		brokerPage(map[float64]uint64{0.1: 50}, map[float64]uint64{0.01: 1000}, 1, 10),
		// 100 more pauses in the window: 98 ≤ 0.1 ms, 1 ≤ 0.5 ms, 1 ≤ 5 ms; 10,000 more
		// runnable waits, 9,850 ≤ 0.01 ms, 149 ≤ 1 ms, 1 ≤ 50 ms.
		brokerPage(map[float64]uint64{0.1: 148, 0.5: 1, 5: 1}, map[float64]uint64{0.01: 10850, 1: 149, 50: 1}, 1.5, 20),
	}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, pages[min(n, len(pages)-1)])
		n++
	}))
	defer srv.Close()
	m := NewMetricsUsage(srv.URL)
	a, err := m.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	s := runtimeStats(a, b, m.String())
	want := RuntimeStats{GCPauses: 100, GCPauseP99Ms: 0.5, GCPauseMaxMs: 5, SchedP99Ms: 1, SchedMaxMs: 50, GCCPUShare: 0.05, Source: srv.URL + "/metrics"}
	if *s != want {
		t.Errorf("window %+v\nwant   %+v", *s, want)
	}
	// A count beyond the last finite bound is read as that bound.
	c, _ := parseRuntime(strings.NewReader(brokerPage(map[float64]uint64{-1: 1}, nil, 0, 1)))
	if _, _, mx := c.gcPauses.quantiles(0.99); mx != 100 {
		t.Errorf("a pause in +Inf read as %v ms, want the last bound 100", mx)
	}
	// Without the engine's series (a broker that is not Samsa) there are no
	// group-commit figures; with them, the window's fdatasyncs and queue wait.
	if s.Engine || s.Fsyncs != 0 {
		t.Errorf("engine figures from a page without them: %+v", s)
	}
	engine := func(fsyncs50us, fsyncs1ms, fsyncs26ms, waits uint64) string {
		return fmt.Sprintf("samsa_engine_fsync_latency_seconds_bucket{le=\"5e-05\"} %d\nsamsa_engine_fsync_latency_seconds_bucket{le=\"0.0008\"} %d\n"+
			"samsa_engine_fsync_latency_seconds_bucket{le=\"0.0256\"} %d\nsamsa_engine_fsync_latency_seconds_bucket{le=\"+Inf\"} %d\n"+
			"samsa_engine_flush_queue_wait_seconds_bucket{le=\"0.00032\"} %d\nsamsa_engine_flush_queue_wait_seconds_bucket{le=\"+Inf\"} %d\n",
			fsyncs50us, fsyncs50us+fsyncs1ms, fsyncs50us+fsyncs1ms+fsyncs26ms, fsyncs50us+fsyncs1ms+fsyncs26ms, waits, waits)
	}
	e0, err := parseRuntime(strings.NewReader(pages[0] + engine(0, 10, 0, 5)))
	if err != nil {
		t.Fatal(err)
	}
	e1, err := parseRuntime(strings.NewReader(pages[1] + engine(0, 108, 2, 300)))
	if err != nil {
		t.Fatal(err)
	}
	es := runtimeStats(e0, e1, "")
	if !es.Engine || es.Fsyncs != 100 || es.FsyncP99Ms != 25.6 || es.FsyncMaxMs != 25.6 || es.FlushQueueMaxMs != 0.32 {
		t.Errorf("engine figures %+v", es)
	}
	// Two nodes read together: their pauses and CPU classes summed.
	nodes := NodesRuntime{m, m}
	nodesSnap, err := nodes.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := nodesSnap.gcPauses.quantiles(0.99); got != 300 || nodesSnap.totalCPU != 40 {
		t.Errorf("two nodes: %d pauses, total CPU %v; want 300 and 40", got, nodesSnap.totalCPU)
	}
	// A broker without the series (another broker, an old Samsa) says which.
	if _, err := parseRuntime(strings.NewReader("process_cpu_seconds_total 3\n")); err == nil || !strings.Contains(err.Error(), "go_gc_pauses_seconds") {
		t.Errorf("page without the series: %v", err)
	}
}

// TestSpikeNote: a max over 10× p99 is named with the runtime figures that reach a
// quarter of its excess; none reaching, the note says the spike lies elsewhere; a
// max under 10× p99 has no note.
func TestSpikeNote(t *testing.T) {
	r := &Result{PublishLatency: Latency{Count: 1000, P99: 4, P999: 30, Max: 85},
		BrokerRuntime: &RuntimeStats{GCPauses: 12, GCPauseP99Ms: 0.3, GCPauseMaxMs: 0.4, SchedP99Ms: 0.1, SchedMaxMs: 40, GCCPUShare: 0.03},
		LoaderRuntime: &RuntimeStats{GCPauses: 30, GCPauseP99Ms: 0.5, GCPauseMaxMs: 25, SchedP99Ms: 0.2, SchedMaxMs: 2, GCCPUShare: -1}}
	n := spikeNote(r)
	for _, want := range []string{"publish max 85 ms = 21× p99 4 ms (p99.9 30 ms)", "broker: 12 GC pauses (p99 0.3, max 0.4 ms), scheduling latency p99 0.1 max 40 ms, GC 3.0% of CPU",
		"coinciding: a broker scheduling latency of 40 ms, a loader GC pause of 25 ms"} {
		if !strings.Contains(n, want) {
			t.Errorf("note lacks %q:\n%s", want, n)
		}
	}
	r.BrokerRuntime.SchedMaxMs, r.LoaderRuntime.GCPauseMaxMs = 1, 1
	// A Samsa broker's group commit: a 51.2 ms fdatasync is named.
	r.BrokerRuntime.Engine, r.BrokerRuntime.Fsyncs, r.BrokerRuntime.FsyncP99Ms, r.BrokerRuntime.FsyncMaxMs, r.BrokerRuntime.FlushQueueMaxMs = true, 900, 1.6, 51.2, 3.2
	if n := spikeNote(r); !strings.Contains(n, "900 fdatasyncs (p99 1.60, max 51.2 ms), flush queue wait p99 0 max 3.20 ms") || !strings.Contains(n, "coinciding: a broker fdatasync of 51.2 ms") {
		t.Errorf("fdatasync spike: %s", n)
	}
	r.BrokerRuntime.Engine = false
	if n := spikeNote(r); !strings.Contains(n, "no runtime figure reaches 25% of the excess (81 ms)") {
		t.Errorf("no coinciding figure: %s", n)
	}
	r.BrokerRuntime = nil
	if n := spikeNote(r); !strings.Contains(n, "broker runtime n/a") {
		t.Errorf("no broker figures: %s", n)
	}
	r.PublishLatency.Max = 39
	if n := spikeNote(r); n != "" {
		t.Errorf("max < 10× p99 noted: %s", n)
	}
}

// TestRuntimeTable: the text and HTML reports print the runtime figures beside the
// tail, and the spike note.
func TestRuntimeTable(t *testing.T) {
	r := fakeResult("samsa", "client", 1, 20000, 4)
	r.PublishLatency.Max = 85
	r.BrokerRuntime = &RuntimeStats{GCPauses: 12, GCPauseP99Ms: 0.3, GCPauseMaxMs: 0.4, SchedP99Ms: 0.1, SchedMaxMs: 40, GCCPUShare: 0.03}
	r.LoaderRuntime = &RuntimeStats{GCPauses: 30, GCPauseP99Ms: 0.5, GCPauseMaxMs: 0.6, SchedP99Ms: 0.2, SchedMaxMs: 2, GCCPUShare: 0.1}
	addSpikeNote(r)
	rep := &Report{Title: "t", Results: []*Result{r}}
	var b strings.Builder
	rep.WriteTable(&b)
	for _, want := range []string{"Go runtime over the window", "broker GC pauses", "40.000", "3.0%", "10.0%", "spike: publish max 85 ms"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	var h strings.Builder
	if err := rep.WriteHTML(&h); err != nil {
		t.Fatal(err)
	}
	parseHTML(t, []byte(h.String()))
	for _, want := range []string{`data-section="runtime"`, "<td>40.000</td>", "samsa client r1: spike: publish max 85 ms"} {
		if !strings.Contains(h.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestWriteRuntimeMetrics: what a kfake child serves reads back as this process's
// figures: two forced GCs between two pages are two pauses or more.
func TestWriteRuntimeMetrics(t *testing.T) {
	var a, b strings.Builder
	WriteRuntimeMetrics(&a)
	runtime.GC()
	runtime.GC()
	WriteRuntimeMetrics(&b)
	s0, err := parseRuntime(strings.NewReader(a.String()))
	if err != nil {
		t.Fatal(err)
	}
	s1, err := parseRuntime(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if s := runtimeStats(s0, s1, ""); s.GCPauses < 2 || s.GCPauseMaxMs <= 0 || s.Engine {
		t.Errorf("window from the served pages: %+v", s)
	}
}
