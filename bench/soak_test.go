package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// soakSeries is an hour of one-minute intervals at 20,000 msg/s, publish p99 p99(i)
// and broker RSS rss(i) in minute i.
func soakSeries(p99 func(i int) float64, rss func(i int) int64) []Interval {
	var out []Interval
	for i := range 60 {
		out = append(out, Interval{Start: float64(60 * i), End: float64(60 * (i + 1)), Msgs: 1_200_000,
			PubP50: p99(i) / 2, PubP99: p99(i), PubMax: 2 * p99(i), BrokerRSS: rss(i)})
	}
	return out
}

func TestJudgeSoak(t *testing.T) {
	const mb = 1 << 20
	steady := func(i int) float64 { return 3 + 0.2*float64(i%5) } // 3.0 .. 3.8 ms
	flat := func(i int) int64 { return int64(80*mb + (i%3)*mb) }  // 80-82 MiB, no trend
	cases := []struct {
		name             string
		p99              func(int) float64
		rss              func(int) int64
		wantP99, wantRSS bool
	}{
		{"steady, flat", steady, flat, true, true},
		{"one spike of 3x the median", func(i int) float64 {
			if i == 40 {
				return 10
			}
			return steady(i)
		}, flat, false, true},
		{"tail at 2.5x in the last quarter", func(i int) float64 {
			if i >= 45 {
				return 7.5
			}
			return 3
		}, flat, false, true},
		// 1 MiB a minute on 80 MiB: about 1.1%/min, far above the 0.2%/min bound.
		{"RSS growing 1 MiB a minute", steady, func(i int) int64 { return int64(80*mb + i*mb) }, true, false},
		// Growth during the first 15 minutes only (caches filling), flat afterwards.
		{"RSS growing before minute 15 only", steady, func(i int) int64 { return int64(40*mb + min(i, 15)*4*mb) }, true, true},
		// A slow leak: 120 KiB a minute on about 54 MiB, 0.215%/min: just over 0.2%.
		{"RSS growing 120 KiB a minute", steady, func(i int) int64 { return int64(50*mb + i*120*1024) }, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := JudgeSoak(soakSeries(c.p99, c.rss), SoakCriteria{})
			if v.P99Pass != c.wantP99 || v.RSSPass != c.wantRSS || v.Pass() != (c.wantP99 && c.wantRSS) {
				t.Errorf("p99 pass %v (ratio %.2f), RSS pass %v (slope %.4f/min), want %v, %v", v.P99Pass, v.P99Ratio, v.RSSPass, v.RSSSlopeFrac, c.wantP99, c.wantRSS)
			}
			if v.RSSFrom != 900 || v.RSSTo != 3600 || v.RSSFit != 45 {
				t.Errorf("RSS fit over %.0f-%.0f s, %d intervals; want 900-3600 s, 45", v.RSSFrom, v.RSSTo, v.RSSFit)
			}
			lines := strings.Join(v.Lines(), "\n")
			want := "soak: FAIL"
			if v.Pass() {
				want = "soak: PASS"
			}
			if !strings.HasSuffix(lines, want) {
				t.Errorf("lines end otherwise than %q:\n%s", want, lines)
			}
		})
	}
	// A growth of 1 MiB a minute on 80 MiB is found as such.
	v := JudgeSoak(soakSeries(steady, func(i int) int64 { return int64(80*mb + i*mb) }), SoakCriteria{})
	if v.RSSSlope < 0.99*mb || v.RSSSlope > 1.01*mb {
		t.Errorf("slope %.0f bytes/min, want 1 MiB", v.RSSSlope)
	}
	if math.Abs(v.P99Median-3.4) > 1e-9 || math.Abs(v.P99Max-3.8) > 1e-9 {
		t.Errorf("p99 median %.2f max %.2f, want 3.4 and 3.8", v.P99Median, v.P99Max)
	}
}

// TestJudgeSoakNothing: a check that cannot be made fails and says why.
func TestJudgeSoakNothing(t *testing.T) {
	for name, ivs := range map[string][]Interval{
		"no intervals": nil,
		"no RSS":       soakSeries(func(int) float64 { return 3 }, func(int) int64 { return 0 }),
		"one interval": {{Start: 0, End: 60, Msgs: 100, PubP99: 3, BrokerRSS: 1 << 20}},
	} {
		v := JudgeSoak(ivs, SoakCriteria{})
		if v.Pass() || len(v.Why) == 0 || !strings.Contains(strings.Join(v.Lines(), "\n"), "soak: FAIL") {
			t.Errorf("%s: pass %v, why %q", name, v.Pass(), v.Why)
		}
	}
}

// TestIntervalMeter: seconds are grouped into intervals with the latency of their
// own histogram and the mean RSS; a last interval under half the length is dropped.
func TestIntervalMeter(t *testing.T) {
	t0 := time.Now()
	m := newIntervalMeter(t0, 10*time.Second, nil, "")
	for s := 1; s <= 24; s++ {
		lat := int64(1000) // 1 ms
		if s > 10 && s <= 20 {
			lat = 5000
		}
		for range 100 {
			m.pub.RecordValue(lat)
		}
		m.add(t0.Add(time.Duration(s)*time.Second), Point{BrokerRSS: int64(s) << 20, BrokerCores: 0.5}, 100)
	}
	var res Result
	m.finish(&res)
	if len(res.Intervals) != 2 || res.IntervalSec != 10 {
		t.Fatalf("%d intervals of %v s, want 2 of 10 (the last 4 s dropped)", len(res.Intervals), res.IntervalSec)
	}
	a, b := res.Intervals[0], res.Intervals[1]
	if a.Start != 0 || a.End != 10 || b.Start != 10 || b.End != 20 || a.Msgs != 1000 {
		t.Errorf("intervals %+v %+v", a, b)
	}
	if a.PubP99 < 0.99 || a.PubP99 > 1.01 || b.PubP99 < 4.99 || b.PubP99 > 5.01 {
		t.Errorf("p99 %.3f and %.3f ms, want 1 and 5", a.PubP99, b.PubP99)
	}
	if a.BrokerRSS != 11<<19 || b.BrokerRSS != 31<<19 || a.BrokerCores != 0.5 {
		t.Errorf("RSS %d and %d, cores %.2f; want 5.5 and 15.5 MiB, 0.5", a.BrokerRSS, b.BrokerRSS, a.BrokerCores)
	}
}
