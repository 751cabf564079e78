package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// A soak run (samsa-bench soak, make soak-bench) holds one fixed-rate workload for a
// long time (steady-1h: an hour) and asks two questions of its measured window, cut
// into intervals (a minute by default):
//
//   - is the tail steady? The publish p99 of each interval, from that interval's own
//     histogram (not an average of per-second p99s), and the largest over the median:
//     at most P99RatioMax (2);
//   - does the broker's memory stay flat? The broker's RSS of each interval (the mean
//     of its per-second VmRSS), fitted by least squares against time over the
//     intervals after the first SkipFraction of them (a quarter: minutes 15-60 of an
//     hour);
//     the slope per minute as a fraction of the fitted intervals' mean RSS: at most
//     RSSSlopeMax (0.2% a minute, 9% over 45 minutes).
//
//	window  |---- skipped (warming caches, segments) ----|---- fitted for RSS ------------|
//	        0                                       duration/4                      duration
//	p99     every interval

// Interval is one interval of a run's measured window (RunConfig.Interval).
type Interval struct {
	Start float64 `json:"start_s"` // seconds since the measured window began
	End   float64 `json:"end_s"`
	Msgs  int64   `json:"msgs"` // acknowledged in the interval
	// PubP50, PubP99 and PubMax are the publish latency of the interval's records
	// (coordinated omission corrected), in ms.
	PubP50 float64 `json:"pub_p50_ms"`
	PubP99 float64 `json:"pub_p99_ms"`
	PubMax float64 `json:"pub_max_ms"`
	// BrokerRSS is the mean of the broker's per-second RSS over the interval, in
	// bytes; 0 when the broker's RSS was not measured.
	BrokerRSS   int64   `json:"broker_rss_bytes,omitempty"`
	BrokerCores float64 `json:"broker_cores,omitempty"`
}

// intervalMeter cuts a run's measured window into intervals. It is used by the run's
// ticker goroutine only.
type intervalMeter struct {
	start    time.Time
	ticks    int // seconds an interval holds
	pub      *hdr.Histogram
	cur      Interval
	n        int // seconds in cur
	rss      []int64
	cores    float64
	out      []Interval
	progress io.Writer
	label    string
}

func newIntervalMeter(start time.Time, d time.Duration, progress io.Writer, label string) *intervalMeter {
	return &intervalMeter{start: start, ticks: max(1, int(d.Round(time.Second)/time.Second)), pub: newHist(), progress: progress, label: label}
}

// add takes one second (its point, and the messages acknowledged in it; the tick has
// merged its publish latencies into m.pub) and closes the interval when it is full.
func (m *intervalMeter) add(now time.Time, pt Point, acked int64) {
	if m.n == 0 {
		m.cur = Interval{Start: max(0, now.Sub(m.start).Seconds()-1)}
		if len(m.out) > 0 {
			m.cur.Start = m.out[len(m.out)-1].End
		}
	}
	m.n++
	m.cur.End = now.Sub(m.start).Seconds()
	m.cur.Msgs += acked
	m.cores += pt.BrokerCores
	if pt.BrokerRSS > 0 {
		m.rss = append(m.rss, pt.BrokerRSS)
	}
	if m.n >= m.ticks {
		m.close()
	}
}

func (m *intervalMeter) close() {
	iv := m.cur
	iv.PubP50 = usToMs(m.pub.ValueAtQuantile(50))
	iv.PubP99 = usToMs(m.pub.ValueAtQuantile(99))
	iv.PubMax = usToMs(m.pub.Max())
	if len(m.rss) > 0 {
		var sum int64
		for _, v := range m.rss {
			sum += v
		}
		iv.BrokerRSS = sum / int64(len(m.rss))
	}
	iv.BrokerCores = m.cores / float64(m.n)
	m.out = append(m.out, iv)
	if m.progress != nil {
		fmt.Fprintf(m.progress, "[%s] interval %d (%.0f-%.0f s): %s msg/s, pub p50 %.2f p99 %.2f max %.2f ms, broker RSS %s, %.2f cores\n",
			m.label, len(m.out), iv.Start, iv.End, siCount(float64(iv.Msgs)/max(1e-9, iv.End-iv.Start)), iv.PubP50, iv.PubP99, iv.PubMax, fmtMiB(iv.BrokerRSS), iv.BrokerCores)
	}
	m.pub.Reset()
	m.rss = m.rss[:0]
	m.cores, m.n = 0, 0
}

// finish closes a last interval of at least half the length (a shorter one rests on
// too few records to set beside the others) and gives res the intervals.
func (m *intervalMeter) finish(res *Result) {
	if m.n > 0 && 2*m.n >= m.ticks {
		m.close()
	}
	res.Intervals = m.out
	res.IntervalSec = float64(m.ticks)
}

// fmtMiB is mib, or n/a for a figure not measured.
func fmtMiB(b int64) string {
	if b <= 0 {
		return "n/a"
	}
	return mib(b)
}

// SoakCriteria are the bounds of a soak verdict; zero fields take the defaults.
type SoakCriteria struct {
	P99RatioMax  float64 // largest interval p99 over their median (default 2)
	RSSSlopeMax  float64 // RSS slope per minute over its mean (default 0.002)
	SkipFraction float64 // the part of the window left out of the RSS fit (default 0.25)
}

func (c SoakCriteria) withDefaults() SoakCriteria {
	if c.P99RatioMax <= 0 {
		c.P99RatioMax = 2
	}
	if c.RSSSlopeMax <= 0 {
		c.RSSSlopeMax = 0.002
	}
	if c.SkipFraction <= 0 || c.SkipFraction >= 1 {
		c.SkipFraction = 0.25
	}
	return c
}

// SoakVerdict is what JudgeSoak found.
type SoakVerdict struct {
	Criteria  SoakCriteria `json:"criteria"`
	Intervals int          `json:"intervals"`
	// P99Median and P99Max are over the intervals' publish p99 (ms); P99MaxAt is the
	// start (s) of the interval with the largest.
	P99Median float64 `json:"p99_median_ms"`
	P99Max    float64 `json:"p99_max_ms"`
	P99MaxAt  float64 `json:"p99_max_at_s"`
	P99Ratio  float64 `json:"p99_ratio"`
	P99Pass   bool    `json:"p99_pass"`
	// RSSFrom and RSSTo bound the fitted intervals (s since the window began), RSSFit
	// how many there are; RSSMean is their mean (bytes), RSSSlope the fitted slope
	// (bytes a minute) and RSSSlopeFrac that over RSSMean.
	RSSFrom      float64 `json:"rss_from_s"`
	RSSTo        float64 `json:"rss_to_s"`
	RSSFit       int     `json:"rss_fit_intervals"`
	RSSMean      float64 `json:"rss_mean_bytes"`
	RSSSlope     float64 `json:"rss_slope_bytes_per_min"`
	RSSSlopeFrac float64 `json:"rss_slope_frac_per_min"`
	RSSPass      bool    `json:"rss_pass"`
	// Why says why a check could not be made ("" when both were).
	Why []string `json:"why,omitempty"`
}

// Pass says both checks were made and held.
func (v *SoakVerdict) Pass() bool { return v.P99Pass && v.RSSPass }

// JudgeSoak checks a soak run's intervals against c. A check that cannot be made
// (no intervals, fewer than two intervals with an RSS in the fitted part) fails, with
// the reason in Why: a soak that measured nothing has not shown anything.
func JudgeSoak(ivs []Interval, c SoakCriteria) *SoakVerdict {
	c = c.withDefaults()
	v := &SoakVerdict{Criteria: c, Intervals: len(ivs)}
	var p99s []float64
	for _, iv := range ivs {
		if iv.Msgs == 0 {
			continue // nothing acknowledged: no latency to compare
		}
		p99s = append(p99s, iv.PubP99)
		if iv.PubP99 > v.P99Max {
			v.P99Max, v.P99MaxAt = iv.PubP99, iv.Start
		}
	}
	if len(p99s) == 0 {
		v.Why = append(v.Why, "no interval acknowledged a record")
	} else {
		v.P99Median = medianF(p99s)
		if v.P99Median > 0 {
			v.P99Ratio = v.P99Max / v.P99Median
		}
		v.P99Pass = v.P99Median > 0 && v.P99Ratio <= c.P99RatioMax
	}

	// The fit leaves out the first SkipFraction of the intervals (15 of 60), counted
	// rather than timed: the ticks that bound them drift by milliseconds.
	skip := int(math.Ceil(float64(len(ivs))*c.SkipFraction - 1e-9))
	if skip < len(ivs) {
		v.RSSFrom, v.RSSTo = ivs[skip].Start, ivs[len(ivs)-1].End
	}
	var xs, ys []float64
	for i, iv := range ivs {
		if i < skip || iv.BrokerRSS <= 0 {
			continue
		}
		xs = append(xs, (iv.Start+iv.End)/2/60)
		ys = append(ys, float64(iv.BrokerRSS))
	}
	v.RSSFit = len(xs)
	if len(xs) < 2 {
		v.Why = append(v.Why, fmt.Sprintf("the RSS fit needs at least 2 intervals with the broker's RSS after the first %.0f%% of the window, not %d", 100*c.SkipFraction, len(xs)))
		return v
	}
	slope, mean := linearFit(xs, ys)
	v.RSSMean, v.RSSSlope = mean, slope
	if mean > 0 {
		v.RSSSlopeFrac = slope / mean
	}
	v.RSSPass = mean > 0 && v.RSSSlopeFrac <= c.RSSSlopeMax
	return v
}

// linearFit is the least-squares slope of ys against xs, and the mean of ys.
func linearFit(xs, ys []float64) (slope, meanY float64) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0, my
	}
	return sxy / sxx, my
}

// Lines are the verdict as printed: one line per check with its figures and PASS or
// FAIL, then the overall line.
func (v *SoakVerdict) Lines() []string {
	word := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	var out []string
	if v.P99Median > 0 {
		out = append(out, fmt.Sprintf("soak p99: %s: publish p99 per interval over %d intervals: median %.2f ms, max %.2f ms (interval from %.0f s): max/median %.2f (bound %.2f)",
			word(v.P99Pass), v.Intervals, v.P99Median, v.P99Max, v.P99MaxAt, v.P99Ratio, v.Criteria.P99RatioMax))
	} else {
		out = append(out, fmt.Sprintf("soak p99: FAIL: no publish p99 to compare over %d intervals", v.Intervals))
	}
	if v.RSSFit >= 2 {
		out = append(out, fmt.Sprintf("soak RSS: %s: broker RSS over %.0f-%.0f s (%d intervals): mean %.1f MiB, slope %+.1f KiB/min = %+.3f%%/min of the mean (bound %.3f%%/min; %+.1f%% over the fitted span)",
			word(v.RSSPass), v.RSSFrom, v.RSSTo, v.RSSFit, v.RSSMean/(1<<20), v.RSSSlope/1024, 100*v.RSSSlopeFrac, 100*v.Criteria.RSSSlopeMax,
			100*v.RSSSlopeFrac*(v.RSSTo-v.RSSFrom)/60))
	} else {
		out = append(out, fmt.Sprintf("soak RSS: FAIL: %d intervals with the broker's RSS after %.0f s, need 2", v.RSSFit, v.RSSFrom))
	}
	if len(v.Why) > 0 {
		out = append(out, "soak: "+strings.Join(v.Why, "; "))
	}
	out = append(out, "soak: "+word(v.Pass()))
	return out
}

// WriteIntervals prints one row per interval.
func WriteIntervals(w io.Writer, ivs []Interval) {
	fmt.Fprintf(w, "%8s %8s %10s %9s %9s %9s %11s %7s\n", "from s", "to s", "msg/s", "p50 ms", "p99 ms", "max ms", "RSS MiB", "cores")
	for _, iv := range ivs {
		rss := "n/a"
		if iv.BrokerRSS > 0 {
			rss = fmt.Sprintf("%.1f", float64(iv.BrokerRSS)/(1<<20))
		}
		fmt.Fprintf(w, "%8.0f %8.0f %10.0f %9.2f %9.2f %9.2f %11s %7.2f\n", iv.Start, iv.End,
			float64(iv.Msgs)/math.Max(1e-9, iv.End-iv.Start), iv.PubP50, iv.PubP99, iv.PubMax, rss, iv.BrokerCores)
	}
}
