package node

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRuntimeTailCollector: after a forced GC the pause histogram counts it, its
// buckets are cumulative and ten a decade, and the GC's CPU is a part of the total.
func TestRuntimeTailCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newRuntimeTailCollector())
	runtime.GC()
	runtime.GC()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	var gcCPU, total float64
	for _, mf := range mfs {
		got[mf.GetName()] = true
		m := mf.GetMetric()[0]
		switch mf.GetName() {
		case "go_gc_pauses_seconds", "go_sched_latencies_seconds":
			h := m.GetHistogram()
			if len(h.GetBucket()) != 71 {
				t.Errorf("%s: %d buckets, want 71 (1 µs to 10 s, ten a decade)", mf.GetName(), len(h.GetBucket()))
			}
			var last uint64
			for _, b := range h.GetBucket() {
				if b.GetCumulativeCount() < last {
					t.Errorf("%s: bucket le=%g count %d below the previous %d", mf.GetName(), b.GetUpperBound(), b.GetCumulativeCount(), last)
				}
				last = b.GetCumulativeCount()
			}
			if last > h.GetSampleCount() {
				t.Errorf("%s: last bucket %d > count %d", mf.GetName(), last, h.GetSampleCount())
			}
			if mf.GetName() == "go_gc_pauses_seconds" && h.GetSampleCount() < 2 {
				t.Errorf("go_gc_pauses_seconds count %d after two forced GCs", h.GetSampleCount())
			}
		case "go_cpu_classes_gc_total_cpu_seconds_total":
			gcCPU = m.GetCounter().GetValue()
		case "go_cpu_classes_total_cpu_seconds_total":
			total = m.GetCounter().GetValue()
		}
	}
	for _, n := range []string{"go_gc_pauses_seconds", "go_sched_latencies_seconds", "go_cpu_classes_gc_total_cpu_seconds_total", "go_cpu_classes_total_cpu_seconds_total"} {
		if !got[n] {
			t.Errorf("no %s series", n)
		}
	}
	if !(gcCPU > 0 && gcCPU < total) {
		t.Errorf("GC CPU %g s of a total %g s: want 0 < gc < total", gcCPU, total)
	}
}
