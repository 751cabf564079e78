// Package report turns a checked history into what people read: a one-line
// verdict, the anomaly table, counts, the faults with their windows, throughput and
// latency over time, and the command that replays the run; as text, JSON and a
// self-contained HTML page (inline CSS and SVG, no scripts, no external references).
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
)

// Point is one second of the run.
type Point struct {
	T       float64 `json:"t"`       // seconds since the start
	Sends   int     `json:"sends"`   // sends invoked
	Acks    int     `json:"acks"`    // sends acknowledged
	Unknown int     `json:"unknown"` // sends that ended without an acknowledgement
	Reads   int     `json:"reads"`   // records returned by polls (all readers but the final drain)
	P50     float64 `json:"p50_ms"`  // latency of the sends acknowledged in this second
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
}

// Fault is one fault's window.
type Fault struct {
	N      int     `json:"n"`
	Kind   string  `json:"kind"`
	Nodes  []int   `json:"nodes"`
	Start  float64 `json:"start"` // seconds
	Heal   float64 `json:"heal"`  // healing began
	End    float64 `json:"end"`   // healed
	Status string  `json:"status"`
	Detail string  `json:"detail"`
	// NoAck is the longest time within [Start, End] with no send acknowledged (any
	// partition, any producer), counted from the acknowledgement before the fault;
	// Recover is the time from End to the first acknowledgement after it. Both in
	// seconds; they measure availability, not safety.
	NoAck   float64 `json:"no_ack_s"`
	Recover float64 `json:"recover_s"`
}

// KindAvailability sums up NoAck per fault kind.
type KindAvailability struct {
	Kind      string  `json:"kind"`
	Count     int     `json:"count"`
	NoAckMed  float64 `json:"no_ack_median_s"`
	NoAckMax  float64 `json:"no_ack_max_s"`
	MeanLen   float64 `json:"mean_length_s"` // the faults' mean length (End - Start)
	Unhealthy int     `json:"stalled_whole"` // faults with no acknowledgement at all in their window
}

// Event is something the harness saw (a node exiting on its own).
type Event struct {
	T    float64 `json:"t"`
	Text string  `json:"text"`
}

// Extra is what the history does not hold.
type Extra struct {
	Schedule string
	Took     time.Duration
	Features string
}

// Report is everything a run shows.
type Report struct {
	Verdict  string        `json:"verdict"`
	Valid    bool          `json:"valid"`
	Command  string        `json:"command"`
	Seed     int64         `json:"seed"`
	Nodes    int           `json:"nodes"`
	Started  time.Time     `json:"started"`
	Took     float64       `json:"took_s"`
	Notes    []string      `json:"notes"`
	Features string        `json:"features"`
	Schedule string        `json:"schedule"`
	Result   *chaos.Result `json:"result"`
	Faults   []Fault       `json:"faults"`
	Events   []Event       `json:"events"`
	Series   []Point       `json:"series"`
	// Availability per fault kind (from Faults' NoAck).
	Availability []KindAvailability `json:"availability"`
}

// Build makes the report of a checked history.
func Build(h *chaos.History, res *chaos.Result, x Extra) *Report {
	r := &Report{Valid: res.Valid, Command: h.Header.Command, Seed: h.Header.Seed, Nodes: h.Header.Nodes,
		Started: time.Unix(0, h.Header.Started), Took: x.Took.Seconds(), Notes: h.Header.Notes, Features: x.Features,
		Schedule: x.Schedule, Result: res}
	for _, op := range h.Ops {
		switch op.F {
		case chaos.FFault:
			f := Fault{N: int(op.Seq), Start: sec(op.Start), End: sec(op.End), Status: string(op.Status)}
			if op.Fault != nil {
				f.Kind, f.Nodes, f.Detail, f.Heal = op.Fault.Kind, op.Fault.Nodes, op.Fault.Detail, sec(op.Fault.Heal)
			}
			if op.Err != "" {
				f.Detail = strings.TrimPrefix(f.Detail+"; "+op.Err, "; ")
			}
			if f.Heal == 0 {
				f.Heal = f.End
			}
			r.Faults = append(r.Faults, f)
		case chaos.FEvent:
			if op.Err != "" {
				r.Events = append(r.Events, Event{T: sec(op.Start), Text: op.Err})
			}
		}
	}
	sort.Slice(r.Faults, func(i, j int) bool { return r.Faults[i].Start < r.Faults[j].Start })
	availability(h, r)
	r.Series = series(h)
	r.Verdict = verdict(r, res)
	return r
}

func sec(ns int64) float64 { return float64(ns) / 1e9 }

// availability fills each fault's NoAck and Recover, and the per-kind summary.
func availability(h *chaos.History, r *Report) {
	var acks []float64
	for _, op := range h.Ops {
		if op.F == chaos.FSend && op.Status == chaos.OK {
			acks = append(acks, sec(op.End))
		}
	}
	sort.Float64s(acks)
	byKind := map[string][]*Fault{}
	for i := range r.Faults {
		f := &r.Faults[i]
		// The acknowledgement at or before Start, then every one up to End, then the
		// first after End.
		i0 := sort.SearchFloat64s(acks, f.Start)
		prev := f.Start
		if i0 > 0 {
			prev = acks[i0-1]
		}
		gap := 0.0
		next := -1.0
		for j := i0; j < len(acks); j++ {
			if acks[j] > f.End {
				next = acks[j]
				break
			}
			gap = max(gap, acks[j]-max(prev, f.Start))
			prev = acks[j]
		}
		gap = max(gap, f.End-max(prev, f.Start))
		f.NoAck = gap
		if next >= 0 {
			f.Recover = next - f.End
		}
		byKind[f.Kind] = append(byKind[f.Kind], f)
	}
	var kinds []string
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fs := byKind[k]
		a := KindAvailability{Kind: k, Count: len(fs)}
		var gaps []float64
		for _, f := range fs {
			gaps = append(gaps, f.NoAck)
			a.MeanLen += f.End - f.Start
			if f.NoAck >= f.End-f.Start-1e-9 {
				a.Unhealthy++
			}
		}
		sort.Float64s(gaps)
		a.NoAckMed, a.NoAckMax, a.MeanLen = gaps[len(gaps)/2], gaps[len(gaps)-1], a.MeanLen/float64(len(fs))
		r.Availability = append(r.Availability, a)
	}
}

func series(h *chaos.History) []Point {
	var last int64
	for _, op := range h.Ops {
		last = max(last, op.End, op.Start)
	}
	n := int(last/int64(time.Second)) + 1
	if n <= 0 || n > 1<<22 {
		return nil
	}
	pts := make([]Point, n)
	lat := make([][]float64, n)
	for i := range pts {
		pts[i].T = float64(i)
	}
	bucket := func(ns int64) int { return int(max(0, min(int64(n-1), ns/int64(time.Second)))) }
	for _, op := range h.Ops {
		switch op.F {
		case chaos.FSend:
			pts[bucket(op.Start)].Sends++
			b := bucket(op.End)
			if op.Status == chaos.OK {
				pts[b].Acks++
				lat[b] = append(lat[b], float64(op.End-op.Start)/1e6)
			} else {
				pts[b].Unknown++
			}
		case chaos.FPoll:
			if op.Proc != chaos.ProcFinal { // the final drain would dwarf the rest
				pts[bucket(op.End)].Reads += len(op.Recs)
			}
		}
	}
	for i, l := range lat {
		if len(l) == 0 {
			continue
		}
		sort.Float64s(l)
		pts[i].P50 = l[len(l)/2]
		pts[i].P99 = l[min(len(l)-1, len(l)*99/100)]
		pts[i].Max = l[len(l)-1]
	}
	return pts
}

func verdict(r *Report, res *chaos.Result) string {
	st := res.Stats
	lin := "porcupine off"
	if w := len(res.Linear.Windows); w > 0 {
		lin = fmt.Sprintf("porcupine: %d/%d windows linearizable", res.Linear.Ok, w)
		if res.Linear.Unknown > 0 {
			lin += fmt.Sprintf(", %d undecided", res.Linear.Unknown)
		}
	}
	nodes := "1 node"
	if r.Nodes != 1 {
		nodes = fmt.Sprintf("%d nodes", r.Nodes)
	}
	what := fmt.Sprintf("seed %d, %s, %d faults, %.0fs; %d sends: %d acknowledged, %d unknown; %d records read (%d acknowledged values); %s",
		r.Seed, nodes, st.Faults, r.Took, st.Sends, st.Acked, st.Indeterminate+st.Failed, st.Reads, st.AckedRead, lin)
	if tx := res.Txn; tx.Txns > 0 {
		what += fmt.Sprintf("; %d transactions: %d committed, %d aborted, %d unknown; G0 %d, G1c %d over %d committed (%d ww, %d wr edges)",
			tx.Txns, tx.Committed, tx.Aborted, tx.Unknown, res.Counts[chaos.KG0], res.Counts[chaos.KG1c], tx.Graph.Txns, tx.Graph.WW, tx.Graph.WR)
	}
	if secured(r.Notes) {
		a := res.Auth
		what += fmt.Sprintf("; secured (SASL_SSL, SCRAM-SHA-512, ACLs): %d authentication failures outside the faults' windows, %d during them (%d of all: late re-authentications refused)",
			a.Outside, a.DuringFaults, a.LateReauth)
	}
	if rs := res.Replicas; rs.Rounds > 0 {
		what += fmt.Sprintf("; replica check: %d rounds, %d re-admissions to the ISR, %d log ends checked, %d isr-behind-hw",
			rs.Rounds, rs.Admissions, rs.Checked, res.Counts[chaos.KISRBehindHW])
	} else if rs.Note != "" {
		what += "; replica check off"
	}
	if res.Valid {
		return "chaos: VALID (no anomalies): " + what
	}
	return "chaos: INVALID (" + res.Summary() + "): " + what
}

// WriteFiles writes report.txt, report.json and report.html into dir.
func (r *Report) WriteFiles(dir string) error {
	var t strings.Builder
	r.WriteText(&t)
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(t.String()), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	var hb strings.Builder
	r.WriteHTML(&hb)
	if err := os.WriteFile(filepath.Join(dir, "report.html"), []byte(hb.String()), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// WriteText writes the plain-text report.
func (r *Report) WriteText(w *strings.Builder) {
	fmt.Fprintf(w, "%s\n\nreplay: %s\nstarted %s, took %.1fs\n", r.Verdict, r.Command, r.Started.Format(time.RFC3339), r.Took)
	if r.Features != "" {
		fmt.Fprintf(w, "binary: %s\n", r.Features)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	st := r.Result.Stats
	fmt.Fprintf(w, "\ncounts: %d ops, %d sends (%d acknowledged, %d unknown, %d failed), %d polls returning %d records (%d distinct values, %d acknowledged ones), %d commits (%d ok), %d faults, %d events\n",
		st.Ops, st.Sends, st.Acked, st.Indeterminate, st.Failed, st.Polls, st.Reads, st.DistinctRead, st.AckedRead, st.Commits, st.CommitsOK, st.Faults, st.Events)
	if tx := r.Result.Txn; tx.Txns > 0 {
		fmt.Fprintf(w, "transactions: %d (%d committed, %d aborted, %d unknown) of %d records; %d records read by read_committed consumers; final drain complete: %v\n",
			tx.Txns, tx.Committed, tx.Aborted, tx.Unknown, tx.Records, tx.Reads, tx.Drained)
		g := tx.Graph
		fmt.Fprintf(w, "transaction graph: %d committed transactions (%d consume-transform-produce), %d ww and %d wr edges; G0 %d, G1c %d; cycles of concurrent transactions Kafka allows (counted, not anomalies): %d of ww edges, %d of ww and wr edges\n",
			g.Txns, g.Readers, g.WW, g.WR, r.Result.Counts[chaos.KG0], r.Result.Counts[chaos.KG1c], g.WWCycles, g.WWWRCycles)
	}
	if rs := r.Result.Replicas; rs.Rounds > 0 || rs.Note != "" {
		fmt.Fprintf(w, "%s\n", rs.Summary())
	}
	if a := r.Result.Auth; a != (chaos.AuthStats{}) || secured(r.Notes) {
		fmt.Fprintf(w, "authentication and authorization failures: %d outside the faults' windows (auth-failure), %d during them; of all, %d late re-authentications refused (session expired)\n",
			a.Outside, a.DuringFaults, a.LateReauth)
	}
	fmt.Fprintf(w, "liveness bound %.1fs from the last heal at %.3fs\n", float64(r.Result.Liveness)/1e9, float64(r.Result.LastHeal)/1e9)
	fmt.Fprintf(w, "\nanomalies (%s):\n", r.Result.Summary())
	if len(r.Result.Anomalies) == 0 {
		fmt.Fprintln(w, "  none")
	}
	shown := map[string]int{}
	for _, a := range r.Result.Anomalies {
		shown[a.Kind]++
		fmt.Fprintf(w, "  %-20s p%-3s off %-8s %-14s %-8s t=%9.3fs  %s  (ops %v)\n", a.Kind, dash32(a.P), dash64(a.O), a.Value, a.Proc, float64(a.Time)/1e9, a.Detail, a.Ops)
	}
	for _, k := range chaos.Kinds {
		if n := r.Result.Counts[k]; n > shown[k] {
			fmt.Fprintf(w, "  ... %d more %s\n", n-shown[k], k)
		}
	}
	fmt.Fprintf(w, "\nfaults (%d; no-ack: the longest time in the window without an acknowledged send; then the time from healed to the next one):\n", len(r.Faults))
	for _, f := range r.Faults {
		fmt.Fprintf(w, "  %3d %-17s nodes %-8s %8.2fs .. heal %8.2fs .. %8.2fs  no-ack %5.1fs +%4.1fs  %-4s %s\n", f.N, f.Kind, fmt.Sprint(f.Nodes), f.Start, f.Heal, f.End, f.NoAck, f.Recover, f.Status, f.Detail)
	}
	if len(r.Availability) > 0 {
		fmt.Fprintf(w, "\navailability per fault kind: count, mean window s, no-ack median s, no-ack max s, windows without any acknowledgement\n")
		for _, a := range r.Availability {
			fmt.Fprintf(w, "  %-17s %4d %7.1f %7.1f %7.1f %4d\n", a.Kind, a.Count, a.MeanLen, a.NoAckMed, a.NoAckMax, a.Unhealthy)
		}
	}
	if len(r.Events) > 0 {
		fmt.Fprintf(w, "\nevents:\n")
		for _, e := range r.Events {
			fmt.Fprintf(w, "  %8.2fs %s\n", e.T, e.Text)
		}
	}
	if ws := r.Result.Linear.Windows; len(ws) > 0 {
		fmt.Fprintf(w, "\nporcupine windows:\n")
		for _, x := range ws {
			fmt.Fprintf(w, "  p%d [%d, %d) %d ops: %s %s\n", x.P, x.From, x.To, x.Ops, x.Result, x.File)
		}
	}
	fmt.Fprintf(w, "\nper 5 s: t, sends, acks, unknown, reads, ack p99 ms, ack max ms\n")
	for i := 0; i < len(r.Series); i += 5 {
		var s, a, u, rd int
		var p99, mx float64
		for _, p := range r.Series[i:min(i+5, len(r.Series))] {
			s, a, u, rd = s+p.Sends, a+p.Acks, u+p.Unknown, rd+p.Reads
			p99, mx = max(p99, p.P99), max(mx, p.Max)
		}
		fmt.Fprintf(w, "  %5.0fs %6d %6d %5d %7d %9.1f %9.1f%s\n", r.Series[i].T, s, a, u, rd, p99, mx, r.faultsAt(r.Series[i].T, 5))
	}
	if r.Schedule != "" {
		fmt.Fprintf(w, "\n%s", r.Schedule)
	}
}

// faultsAt names the faults active in [t, t+d).
func (r *Report) faultsAt(t, d float64) string {
	var ks []string
	for _, f := range r.Faults {
		if f.Start < t+d && f.End >= t {
			ks = append(ks, f.Kind)
		}
	}
	if len(ks) == 0 {
		return ""
	}
	return "  [" + strings.Join(ks, ",") + "]"
}

func dash32(p int32) string {
	if p < 0 {
		return "-"
	}
	return fmt.Sprint(p)
}

func dash64(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}

// secured reports whether the run's notes say its cluster was secured.
func secured(notes []string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n, "secured:") {
			return true
		}
	}
	return false
}

// Figures is the run's figures on one line: sends acknowledged, the safety anomalies
// a fault schedule is judged by (lost, duplicate, unsafe-election,
// eligible-after-crash), and the longest
// time a fault's window went without an acknowledged send.
func (r *Report) Figures() string {
	st, c := r.Result.Stats, r.Result.Counts
	gap, which := 0.0, "no fault"
	for _, f := range r.Faults {
		if f.NoAck > gap {
			gap, which = f.NoAck, fmt.Sprintf("fault %d, %s", f.N, f.Kind)
		}
	}
	return fmt.Sprintf("figures: %d sends, %d acknowledged, %d lost, %d duplicated, %d unsafe elections, %d eligible after a crash; longest gap without an acknowledgement %.1fs (%s)",
		st.Sends, st.Acked, c[chaos.KLost], c[chaos.KDuplicate], c[chaos.KUnsafeElection], c[chaos.KEligibleCrash], gap, which)
}
