package bench

import (
	"math"
	"sync"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram values are microseconds, from 1 µs to 10 minutes, 3 significant digits.
const (
	histMinUS = 1
	histMaxUS = 600_000_000
	histSig   = 3
)

func newHist() *hdr.Histogram { return hdr.New(histMinUS, histMaxUS, histSig) }

// recorder is one goroutine's latency histogram. Exactly one goroutine records into it
// (a producer's promise goroutine, a consumer's poll loop); the collector swaps it out
// once per interval. The mutex is only contended at that swap.
type recorder struct {
	mu struct {
		sync.Mutex
		cur *hdr.Histogram
	}
	spare *hdr.Histogram // owned by the collector
}

func newRecorder() *recorder {
	r := &recorder{spare: newHist()}
	r.mu.cur = newHist()
	return r
}

// record adds one latency in nanoseconds. Values outside the range are clamped, so a
// clock step never loses a sample.
func (r *recorder) record(ns int64) {
	us := ns / 1000
	if us < histMinUS {
		us = histMinUS
	} else if us > histMaxUS {
		us = histMaxUS
	}
	r.mu.Lock()
	_ = r.mu.cur.RecordValue(us)
	r.mu.Unlock()
}

// recordN adds n samples of one latency.
func (r *recorder) recordN(ns int64, n int64) {
	us := ns / 1000
	if us < histMinUS {
		us = histMinUS
	} else if us > histMaxUS {
		us = histMaxUS
	}
	r.mu.Lock()
	_ = r.mu.cur.RecordValues(us, n)
	r.mu.Unlock()
}

// drainInto merges what was recorded since the last call into dst and clears it.
// Only the collector goroutine calls it.
func (r *recorder) drainInto(dst *hdr.Histogram) {
	r.spare.Reset()
	r.mu.Lock()
	r.mu.cur, r.spare = r.spare, r.mu.cur
	r.mu.Unlock()
	dst.Merge(r.spare)
}

// Latency summarises a histogram in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P75   float64 `json:"p75_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	P9999 float64 `json:"p99_99_ms"`
	Max   float64 `json:"max_ms"`
	// Curve is the percentile distribution, HdrHistogram style: points at
	// percentiles 0, 50, 75, 87.5, ... approaching 100, then the max.
	Curve []CurvePoint `json:"curve,omitempty"`
}

// CurvePoint is one point of a percentile curve.
type CurvePoint struct {
	Percentile float64 `json:"p"`
	Ms         float64 `json:"ms"`
}

func usToMs(v int64) float64 { return float64(v) / 1000 }

// summarize returns the percentiles of h; withCurve adds the percentile curve.
func summarize(h *hdr.Histogram, withCurve bool) Latency {
	n := h.TotalCount()
	if n == 0 {
		return Latency{}
	}
	l := Latency{
		Count: n,
		Mean:  h.Mean() / 1000,
		P50:   usToMs(h.ValueAtQuantile(50)),
		P75:   usToMs(h.ValueAtQuantile(75)),
		P95:   usToMs(h.ValueAtQuantile(95)),
		P99:   usToMs(h.ValueAtQuantile(99)),
		P999:  usToMs(h.ValueAtQuantile(99.9)),
		P9999: usToMs(h.ValueAtQuantile(99.99)),
		Max:   usToMs(h.Max()),
	}
	if withCurve {
		l.Curve = percentileCurve(h)
	}
	return l
}

// percentileCurve samples h at 1-2^-(k/4) for k = 0, 1, ... until the tail holds fewer
// than one sample, then adds the max at the last percentile reached plus a step.
func percentileCurve(h *hdr.Histogram) []CurvePoint {
	n := float64(h.TotalCount())
	var pts []CurvePoint
	for k := 0; k <= 160; k++ {
		tail := math.Pow(2, -float64(k)/4)
		if tail*n < 1 {
			break
		}
		p := 100 * (1 - tail)
		pts = append(pts, CurvePoint{Percentile: p, Ms: usToMs(h.ValueAtQuantile(p))})
	}
	last := 0.0
	if len(pts) > 0 {
		last = pts[len(pts)-1].Percentile
	}
	maxP := 100 * (1 - (1-last/100)/2)
	if n > 0 {
		maxP = math.Max(maxP, 100*(1-1/n))
	}
	return append(pts, CurvePoint{Percentile: maxP, Ms: usToMs(h.Max())})
}

// mergeAll merges histograms into a new one.
func mergeAll(hs ...*hdr.Histogram) *hdr.Histogram {
	out := newHist()
	for _, h := range hs {
		if h != nil {
			out.Merge(h)
		}
	}
	return out
}
