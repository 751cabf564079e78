package audit

import (
	"fmt"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
)

// Latency summarizes one reader's end-to-end latencies (send to first read).
type Latency struct {
	N             int64
	P50, P99, Max time.Duration
}

// NoAck is one partition's longest time without an acknowledgement of either
// producer (from the start to the first one, between two, and from the last one to
// the end of production or now), and the current one while producing.
type NoAck struct {
	P       int32
	Longest time.Duration
	Current time.Duration
}

// Report is the state of an audit at one moment: what was produced and read, the
// anomaly counts, latencies and no-ack windows.
type Report struct {
	Elapsed  time.Duration // since production began
	Final    bool          // after Finish: unseen is what was never returned at all
	Produced [numProducers]int64
	Acked    [numProducers]int64
	Failed   [numProducers]int64
	Read     [numReaders]int64 // records returned, re-reads included
	Txns     [numOutcomes]int64
	// Counts holds every anomaly per kind of Kinds; Unseen the unseen records (the
	// gauge during the run, the final count after Finish).
	Counts  map[string]int64
	Unseen  int64
	Window  int // records held
	Latency [numReaders]Latency
	NoAck   []NoAck
	// Anomalies lists at most Options.MaxListed per kind.
	Anomalies []chaos.Anomaly
}

// Report returns the checker's report at now.
func (c *Checker) Report(now time.Duration) Report {
	r := Report{
		Elapsed: now - c.began, Final: c.finished,
		Produced: c.produced, Acked: c.acked, Failed: c.failed, Read: c.reads, Txns: c.txns,
		Counts: map[string]int64{}, Unseen: c.unseen + c.dropped, Window: c.Window(),
		Anomalies: c.Anomalies(),
	}
	for _, k := range Kinds {
		r.Counts[k] = c.counts[k]
	}
	for i, h := range c.lat {
		if n := h.TotalCount(); n > 0 {
			us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
			r.Latency[i] = Latency{N: n, P50: us(h.ValueAtQuantile(50)), P99: us(h.ValueAtQuantile(99)), Max: us(h.Max())}
		}
	}
	for _, p := range c.order {
		ps := c.parts[p]
		na := NoAck{P: p, Longest: ps.longest}
		if c.producing {
			na.Current = now - ps.lastAck
			na.Longest = max(na.Longest, na.Current)
		}
		r.NoAck = append(r.NoAck, na)
	}
	return r
}

// Total is the number of anomalies, unseen records included.
func (r *Report) Total() int64 {
	n := r.Unseen
	for _, k := range Kinds {
		n += r.Counts[k]
	}
	return n
}

// Valid reports whether the audit found nothing wrong: no anomaly of any kind and no
// unseen record.
func (r *Report) Valid() bool { return r.Total() == 0 }

// LongestNoAck is the partition with the longest no-ack window (the first on a tie).
func (r *Report) LongestNoAck() (NoAck, bool) {
	var best NoAck
	found := false
	for _, na := range r.NoAck {
		if !found || na.Longest > best.Longest {
			best, found = na, true
		}
	}
	return best, found
}

// Verdict is the one-line verdict:
//
//	audit: VALID (no anomalies) over 10s: 60 produced, ... unseen 0; e2e p50 ...; longest no-ack 0.6s (p2)
//
// A report before the end says "in the first 1m0s" instead of "over".
func (r *Report) Verdict() string {
	var b strings.Builder
	b.WriteString("audit: ")
	if r.Valid() {
		b.WriteString("VALID (no anomalies)")
	} else {
		var found []string
		for _, k := range Kinds {
			if n := r.Counts[k]; n > 0 {
				found = append(found, fmt.Sprintf("%s %d", k, n))
			}
		}
		if r.Unseen > 0 {
			found = append(found, fmt.Sprintf("%s %d", KUnseen, r.Unseen))
		}
		fmt.Fprintf(&b, "ANOMALIES (%s)", strings.Join(found, ", "))
	}
	if r.Final {
		fmt.Fprintf(&b, " over %s: ", roundElapsed(r.Elapsed))
	} else {
		fmt.Fprintf(&b, " in the first %s: ", roundElapsed(r.Elapsed))
	}
	sum := func(a [numProducers]int64) int64 { return a[0] + a[1] }
	fmt.Fprintf(&b, "%d produced, %d acknowledged, %d failed, %d read by the group, %d read read_committed; ",
		sum(r.Produced), sum(r.Acked), sum(r.Failed), r.Read[GroupReader], r.Read[CommittedReader])
	fmt.Fprintf(&b, "%d transactions (%d committed, %d aborted, %d unknown); ",
		r.Txns[Committed]+r.Txns[Aborted]+r.Txns[Unknown], r.Txns[Committed], r.Txns[Aborted], r.Txns[Unknown])
	for _, k := range Kinds {
		fmt.Fprintf(&b, "%s %d, ", k, r.Counts[k])
	}
	fmt.Fprintf(&b, "%s %d; ", KUnseen, r.Unseen)
	if l := r.Latency[GroupReader]; l.N > 0 {
		fmt.Fprintf(&b, "e2e p50 %s p99 %s max %s", fmtDur(l.P50), fmtDur(l.P99), fmtDur(l.Max))
	} else {
		b.WriteString("e2e none")
	}
	if l := r.Latency[CommittedReader]; l.N > 0 {
		fmt.Fprintf(&b, " (read_committed p99 %s)", fmtDur(l.P99))
	}
	if na, ok := r.LongestNoAck(); ok {
		fmt.Fprintf(&b, "; longest no-ack %.1fs (p%d)", na.Longest.Seconds(), na.P)
	}
	return b.String()
}

// AnomalyLine renders one anomaly for the audit's output.
func AnomalyLine(a chaos.Anomaly) string {
	at := ""
	if a.O >= 0 {
		at = fmt.Sprintf("@%d", a.O)
	}
	return fmt.Sprintf("audit: %s: p%d%s %s (%s producer) at %s: %s", a.Kind, a.P, at, a.Value, a.Proc, time.Duration(a.Time).Round(time.Millisecond), a.Detail)
}

// roundElapsed rounds a run's length for the verdict: whole seconds from a minute on,
// tenths of a second below.
func roundElapsed(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// fmtDur renders a latency: milliseconds with one decimal below a second, seconds with
// one decimal above.
func fmtDur(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
