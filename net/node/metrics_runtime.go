package node

import (
	"math"
	"runtime/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// runtimeTailCollector exports the Go runtime's own tail figures, under the names
// client_golang gives runtime/metrics series, at a resolution a latency spike can be
// judged by:
//
//	go_gc_pauses_seconds                       histogram of stop-the-world GC pauses (/gc/pauses:seconds)
//	go_sched_latencies_seconds                 histogram of the time goroutines waited runnable before they ran (/sched/latencies:seconds)
//	go_cpu_classes_gc_total_cpu_seconds_total  the runtime's estimate of CPU spent on GC, assists and pauses included (/cpu/classes/gc/total:cpu-seconds)
//	go_cpu_classes_total_cpu_seconds_total     the runtime's estimate of all CPU available to the process (/cpu/classes/total:cpu-seconds)
//
// The Go collector of client_golang exports neither histogram by default, and with
// its runtime-metrics option it merges their buckets to powers of 10 (1 µs, 10 µs,
// 100 µs, ...), too coarse to tell a 2 ms pause from a 9 ms one. Here the runtime's
// buckets are merged to ten a decade (bounds 1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5, 6.3, 8
// × 10^k s, from 1 µs to 10 s): a quantile read from them is within 26% of the
// runtime's. samsa-bench reads them at the ends of its measured window (bench
// runtime.go). The histograms' sums are estimates (each pause at its bucket's lower
// bound), as the runtime keeps no sum.
type runtimeTailCollector struct {
	gcPauses, schedLat, gcCPU, totalCPU *prometheus.Desc
	bounds                              []float64
	samples                             []metrics.Sample
}

func newRuntimeTailCollector() *runtimeTailCollector {
	c := &runtimeTailCollector{
		gcPauses: prometheus.NewDesc("go_gc_pauses_seconds", "Distribution of individual GC-related stop-the-world pause latencies (runtime/metrics /gc/pauses:seconds).", nil, nil),
		schedLat: prometheus.NewDesc("go_sched_latencies_seconds", "Distribution of the time goroutines have spent in the scheduler in a runnable state before actually running (runtime/metrics /sched/latencies:seconds).", nil, nil),
		gcCPU:    prometheus.NewDesc("go_cpu_classes_gc_total_cpu_seconds_total", "Estimated total CPU time spent performing GC tasks, assists and pauses included (runtime/metrics /cpu/classes/gc/total:cpu-seconds).", nil, nil),
		totalCPU: prometheus.NewDesc("go_cpu_classes_total_cpu_seconds_total", "Estimated total available CPU time for user Go code or the Go runtime (runtime/metrics /cpu/classes/total:cpu-seconds).", nil, nil),
		samples: []metrics.Sample{
			{Name: "/gc/pauses:seconds"}, {Name: "/sched/latencies:seconds"},
			{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"},
		},
	}
	for e := -6; e < 1; e++ {
		for _, m := range []float64{1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5, 6.3, 8} {
			c.bounds = append(c.bounds, m*math.Pow10(e))
		}
	}
	c.bounds = append(c.bounds, 10)
	return c
}

// Describe implements prometheus.Collector.
func (c *runtimeTailCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.gcPauses
	ch <- c.schedLat
	ch <- c.gcCPU
	ch <- c.totalCPU
}

// Collect implements prometheus.Collector. A series the runtime does not know (a
// future Go that drops one) is left out.
func (c *runtimeTailCollector) Collect(ch chan<- prometheus.Metric) {
	s := make([]metrics.Sample, len(c.samples))
	copy(s, c.samples)
	metrics.Read(s)
	for i, d := range []*prometheus.Desc{c.gcPauses, c.schedLat} {
		if s[i].Value.Kind() != metrics.KindFloat64Histogram {
			continue
		}
		n, sum, cum := c.rebucket(s[i].Value.Float64Histogram())
		ch <- prometheus.MustNewConstHistogram(d, n, sum, cum)
	}
	for i, d := range []*prometheus.Desc{c.gcCPU, c.totalCPU} {
		if v := s[2+i].Value; v.Kind() == metrics.KindFloat64 {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v.Float64())
		}
	}
}

// rebucket merges a runtime histogram (counts between bounds h.Buckets[i] and
// h.Buckets[i+1]) into c.bounds: the count, an estimated sum and the cumulative
// count at each bound (a runtime bucket counts towards the first bound at or above
// its upper end; beyond the last bound it is in +Inf only).
func (c *runtimeTailCollector) rebucket(h *metrics.Float64Histogram) (n uint64, sum float64, cum map[float64]uint64) {
	per := make([]uint64, len(c.bounds))
	j := 0
	for i, k := range h.Counts {
		n += k
		if k == 0 {
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		if !math.IsInf(lo, -1) {
			sum += lo * float64(k)
		}
		for j < len(c.bounds) && c.bounds[j] < hi {
			j++
		}
		if j < len(c.bounds) {
			per[j] += k
		}
	}
	cum = make(map[float64]uint64, len(c.bounds))
	var run uint64
	for i, b := range c.bounds {
		run += per[i]
		cum[b] = run
	}
	return n, sum, cum
}
