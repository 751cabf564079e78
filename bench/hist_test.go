package bench

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestRecorderMergeEqualsSingle(t *testing.T) {
	single := newHist()
	recs := []*recorder{newRecorder(), newRecorder(), newRecorder()}
	var wg sync.WaitGroup
	for g, r := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= 10000; i++ {
				r.record(int64(i*(g+1)) * 1000)
			}
		}()
	}
	wg.Wait()
	for g := range recs {
		for i := 1; i <= 10000; i++ {
			_ = single.RecordValue(int64(i * (g + 1)))
		}
	}
	merged := newHist()
	for _, r := range recs {
		r.drainInto(merged)
	}
	if merged.TotalCount() != single.TotalCount() {
		t.Fatalf("count %d want %d", merged.TotalCount(), single.TotalCount())
	}
	for _, q := range []float64{50, 90, 99, 99.9, 100} {
		if a, b := merged.ValueAtQuantile(q), single.ValueAtQuantile(q); a != b {
			t.Errorf("q%v: merged %d single %d", q, a, b)
		}
	}
	// A second drain finds nothing new: the interval was cleared.
	again := newHist()
	for _, r := range recs {
		r.drainInto(again)
	}
	if again.TotalCount() != 0 {
		t.Errorf("second drain got %d", again.TotalCount())
	}
}

func TestRecorderClamps(t *testing.T) {
	r := newRecorder()
	r.record(-5)                     // clock step backwards
	r.record(int64(time.Hour * 100)) // beyond the range
	r.recordN(2000, 3)
	h := newHist()
	r.drainInto(h)
	if h.TotalCount() != 5 {
		t.Fatalf("count %d", h.TotalCount())
	}
}

func TestSummarize(t *testing.T) {
	h := newHist()
	for i := 1; i <= 100000; i++ {
		_ = h.RecordValue(int64(i)) // 1 µs .. 100 ms, uniform
	}
	l := summarize(h, true)
	near := func(name string, got, want float64) {
		if math.Abs(got-want)/want > 0.002 {
			t.Errorf("%s = %v want ≈%v", name, got, want)
		}
	}
	near("p50", l.P50, 50)
	near("p99", l.P99, 99)
	near("p99.9", l.P999, 99.9)
	near("p99.99", l.P9999, 99.99)
	near("max", l.Max, 100)
	if l.Count != 100000 {
		t.Errorf("count %d", l.Count)
	}
	if len(l.Curve) < 10 {
		t.Fatalf("curve has %d points", len(l.Curve))
	}
	for i := 1; i < len(l.Curve); i++ {
		if l.Curve[i].Percentile <= l.Curve[i-1].Percentile || l.Curve[i].Ms < l.Curve[i-1].Ms {
			t.Fatalf("curve not increasing at %d: %+v %+v", i, l.Curve[i-1], l.Curve[i])
		}
	}
	if last := l.Curve[len(l.Curve)-1]; last.Ms != l.Max {
		t.Errorf("curve ends at %v, max %v", last.Ms, l.Max)
	}
	if e := summarize(newHist(), true); e.Count != 0 || e.Curve != nil || e.Max != 0 {
		t.Error("empty histogram should summarise to zero")
	}
}

// TestCoordinatedOmission stalls the "broker" (the send function) for 100 ms at
// record 20 of a 1,000 msg/s schedule. Records due during the stall keep their
// intended times, so latency from the intended time shows the stall for all of
// them; latency from the actual send would hide it.
func TestCoordinatedOmission(t *testing.T) {
	const rate = 1000
	start := time.Now()
	stop := make(chan struct{})
	var intended, actual []int64
	p := &producer{rate: rate}
	p.sendFn = func(in int64) {
		intended = append(intended, in)
		if len(intended) == 20 {
			time.Sleep(100 * time.Millisecond) // the simulated stall
		}
		actual = append(actual, time.Now().UnixNano())
		if len(intended) == 200 {
			close(stop)
		}
	}
	p.loop(start, stop, 0)
	if len(intended) < 200 {
		t.Fatalf("sent %d", len(intended))
	}
	base := start.UnixNano()
	for i, in := range intended {
		if want := base + int64(i)*int64(time.Millisecond); in != want {
			t.Fatalf("record %d intended at +%v, want +%v", i, time.Duration(in-base), time.Duration(want-base))
		}
	}
	corrected := newRecorder()
	for i := range intended {
		corrected.record(actual[i] - intended[i])
	}
	hc := newHist()
	corrected.drainInto(hc)
	// Records 20..~119 were due during or before the end of the stall: about 100 of
	// 200 wait ≥ tens of ms. The p75 must show it.
	if p75 := hc.ValueAtQuantile(75); p75 < 20_000 {
		t.Errorf("corrected p75 = %d µs; the stall is hidden", p75)
	}
	if mx := hc.Max(); mx < 90_000 {
		t.Errorf("corrected max = %d µs, want ≥ 90 ms", mx)
	}
	// Once caught up, records go out on time again.
	if late := actual[199] - intended[199]; late > int64(50*time.Millisecond) {
		t.Errorf("record 199 still %v late", time.Duration(late))
	}
}
