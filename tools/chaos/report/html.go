package report

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/samsa-broker/samsa/tools/chaos"
)

// The page is well-formed XML (XHTML-compatible): every chart is an <svg
// class="chart" data-chart="..."> with one <polyline class="series" data-series="...">
// per line and one <rect class="fault" data-kind="..."> per fault window.

var faultColor = map[string]string{
	"kill": "#d62728", "kill-leader": "#d62728", "kill-controller": "#d62728", "kill-all": "#a50f15",
	"pause": "#ff7f0e", "pause-leader": "#ff7f0e",
	"power-loss": "#9467bd", "power-loss-all": "#54278f",
	"partition-leader": "#1f77b4", "partition-halves": "#1f77b4", "partition-bridge": "#1f77b4",
	"slow": "#17becf", "disk-full": "#8c564b", "kill-replicas": "#e377c2", "objstore-down": "#bcbd22",
}

func colorOf(kind string) string {
	if c, ok := faultColor[kind]; ok {
		return c
	}
	return "#7f7f7f"
}

// WriteHTML writes the page.
func (r *Report) WriteHTML(b *strings.Builder) {
	esc := html.EscapeString
	cls := "ok"
	if !r.Valid {
		cls = "bad"
	}
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>samsa-chaos report</title>\n<style>\n" +
		"body { font-family: sans-serif; margin: 2em; color: #222; }\n" +
		"table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }\n" +
		"th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }\n" +
		"th { background: #f0f0f0; }\n td.n { text-align: right; }\n" +
		".ok { color: #1a7f37; } .bad { color: #b00; }\n" +
		"svg.chart { border: 1px solid #ddd; margin: 0.5em 0; background: #fff; }\n" +
		"pre { background: #f7f7f7; padding: 0.5em; font-size: 12px; white-space: pre-wrap; }\n" +
		"</style>\n</head>\n<body>\n")
	fmt.Fprintf(b, "<h1>samsa-chaos</h1>\n<p class=\"%s\"><b>%s</b></p>\n", cls, esc(r.Verdict))
	fmt.Fprintf(b, "<p>Replay:</p>\n<pre>%s</pre>\n", esc(r.Command))
	fmt.Fprintf(b, "<p>Started %s, took %.1f s. %s</p>\n", esc(r.Started.Format("2006-01-02 15:04:05 MST")), r.Took, esc(r.Features))
	if len(r.Notes) > 0 {
		b.WriteString("<ul>\n")
		for _, n := range r.Notes {
			fmt.Fprintf(b, "<li>%s</li>\n", esc(n))
		}
		b.WriteString("</ul>\n")
	}
	r.writeCounts(b)
	r.writeAnomalies(b)
	r.writeCharts(b)
	r.writeFaultTables(b)
	if r.Schedule != "" {
		fmt.Fprintf(b, "<h2>Schedule</h2>\n<pre>%s</pre>\n", esc(r.Schedule))
	}
	b.WriteString("</body>\n</html>\n")
}

// writeCounts writes the table of counts: operations, transactions, the
// transaction graph and the replica check.
func (r *Report) writeCounts(b *strings.Builder) {
	st := r.Result.Stats
	b.WriteString("<h2>Counts</h2>\n<table>\n")
	for _, kv := range [][2]any{
		{"operations", st.Ops}, {"sends", st.Sends}, {"acknowledged", st.Acked}, {"unknown outcome", st.Indeterminate}, {"failed", st.Failed},
		{"polls", st.Polls}, {"records read", st.Reads}, {"distinct values read", st.DistinctRead}, {"acknowledged values read", st.AckedRead},
		{"commits", st.Commits}, {"commits ok", st.CommitsOK}, {"faults", st.Faults}, {"events", st.Events},
		{"transactions", r.Result.Txn.Txns}, {"transactions committed", r.Result.Txn.Committed}, {"transactions aborted", r.Result.Txn.Aborted},
		{"transactions unknown", r.Result.Txn.Unknown}, {"records read read_committed", r.Result.Txn.Reads},
		{"transaction graph: committed transactions", r.Result.Txn.Graph.Txns}, {"transaction graph: consume-transform-produce", r.Result.Txn.Graph.Readers},
		{"transaction graph: ww edges", r.Result.Txn.Graph.WW}, {"transaction graph: wr edges", r.Result.Txn.Graph.WR},
		{"G0 (anomalies)", r.Result.Counts[chaos.KG0]}, {"G1c (anomalies)", r.Result.Counts[chaos.KG1c]},
		{"ww cycles of concurrent transactions (allowed)", r.Result.Txn.Graph.WWCycles}, {"ww+wr cycles of concurrent transactions (allowed)", r.Result.Txn.Graph.WWWRCycles},
		{"replica check: rounds", r.Result.Replicas.Rounds}, {"replica check: Metadata answers", r.Result.Replicas.Answers},
		{"replica check: log ends read", r.Result.Replicas.LEOs}, {"replica check: high watermarks read", r.Result.Replicas.HWs},
		{"replica check: answers leaving a replica out of the ISR", r.Result.Replicas.Outs},
		{"replica check: re-admissions to the ISR checked", r.Result.Replicas.Admissions}, {"replica check: log ends checked", r.Result.Replicas.Checked},
		{"isr-behind-hw (anomalies)", r.Result.Counts[chaos.KISRBehindHW]},
	} {
		fmt.Fprintf(b, "<tr><th>%s</th><td class=\"n\">%d</td></tr>\n", kv[0], kv[1])
	}
	b.WriteString("</table>\n")
}

// writeAnomalies writes the anomalies found, and how many of each kind the
// report leaves out.
func (r *Report) writeAnomalies(b *strings.Builder) {
	esc := html.EscapeString
	fmt.Fprintf(b, "<h2>Anomalies: %s</h2>\n", esc(r.Result.Summary()))
	if len(r.Result.Anomalies) > 0 {
		b.WriteString("<table>\n<tr><th>kind</th><th>partition</th><th>offset</th><th>value</th><th>process</th><th>time s</th><th>detail</th><th>ops</th></tr>\n")
		for _, a := range r.Result.Anomalies {
			fmt.Fprintf(b, "<tr><td class=\"bad\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td>%s</td><td>%s</td><td class=\"n\">%.3f</td><td>%s</td><td>%s</td></tr>\n",
				esc(a.Kind), dash32(a.P), dash64(a.O), esc(a.Value), esc(a.Proc), float64(a.Time)/1e9, esc(a.Detail), esc(fmt.Sprint(a.Ops)))
		}
		b.WriteString("</table>\n")
		shown := map[string]int{}
		for _, a := range r.Result.Anomalies {
			shown[a.Kind]++
		}
		for _, k := range chaos.Kinds {
			if n := r.Result.Counts[k]; n > shown[k] {
				fmt.Fprintf(b, "<p>... and %d more %s (see report.json and history.jsonl)</p>\n", n-shown[k], esc(k))
			}
		}
	}
}

// writeCharts writes the charts of throughput and send latency over time.
func (r *Report) writeCharts(b *strings.Builder) {
	b.WriteString("<h2>Throughput over time</h2>\n")
	b.WriteString(r.chart("throughput", "records per second", false, []line{
		{"acknowledged/s", "#2ca02c", r.pts(func(p Point) float64 { return float64(p.Acks) })},
		{"read/s (all readers but the final drain)", "#1f77b4", r.pts(func(p Point) float64 { return float64(p.Reads) })},
		{"unknown outcome/s", "#d62728", r.pts(func(p Point) float64 { return float64(p.Unknown) })},
	}))
	b.WriteString("<h2>Send latency over time (acknowledged sends, by second of acknowledgement)</h2>\n")
	b.WriteString(r.chart("latency", "ms (log scale)", true, []line{
		{"p50", "#2ca02c", r.pts(func(p Point) float64 { return p.P50 })},
		{"p99", "#ff7f0e", r.pts(func(p Point) float64 { return p.P99 })},
		{"max", "#d62728", r.pts(func(p Point) float64 { return p.Max })},
	}))
}

// writeFaultTables writes the faults, availability per fault kind, events and the
// linearizability sample.
func (r *Report) writeFaultTables(b *strings.Builder) {
	esc := html.EscapeString
	fmt.Fprintf(b, "<h2>Faults (%d)</h2>\n<p>no-ack: the longest time within the window without an acknowledged send; recover: from healed to the next acknowledgement.</p>\n<table>\n<tr><th>#</th><th>kind</th><th>nodes</th><th>start s</th><th>heal s</th><th>healed s</th><th>no-ack s</th><th>recover s</th><th>status</th><th>detail</th></tr>\n", len(r.Faults))
	for _, f := range r.Faults {
		fmt.Fprintf(b, "<tr><td class=\"n\">%d</td><td style=\"color:%s\">%s</td><td>%s</td><td class=\"n\">%.2f</td><td class=\"n\">%.2f</td><td class=\"n\">%.2f</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td>%s</td><td>%s</td></tr>\n",
			f.N, colorOf(f.Kind), esc(f.Kind), esc(fmt.Sprint(f.Nodes)), f.Start, f.Heal, f.End, f.NoAck, f.Recover, esc(f.Status), esc(f.Detail))
	}
	b.WriteString("</table>\n")
	if len(r.Availability) > 0 {
		b.WriteString("<h2>Availability per fault kind</h2>\n<table>\n<tr><th>kind</th><th>faults</th><th>mean window s</th><th>no-ack median s</th><th>no-ack max s</th><th>windows without any ack</th></tr>\n")
		for _, a := range r.Availability {
			fmt.Fprintf(b, "<tr><td style=\"color:%s\">%s</td><td class=\"n\">%d</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td class=\"n\">%d</td></tr>\n",
				colorOf(a.Kind), esc(a.Kind), a.Count, a.MeanLen, a.NoAckMed, a.NoAckMax, a.Unhealthy)
		}
		b.WriteString("</table>\n")
	}
	if len(r.Events) > 0 {
		b.WriteString("<h2>Events</h2>\n<table>\n<tr><th>time s</th><th>event</th></tr>\n")
		for _, e := range r.Events {
			fmt.Fprintf(b, "<tr><td class=\"n\">%.2f</td><td>%s</td></tr>\n", e.T, esc(e.Text))
		}
		b.WriteString("</table>\n")
	}
	if ws := r.Result.Linear.Windows; len(ws) > 0 {
		b.WriteString("<h2>Linearizability sample (porcupine)</h2>\n<table>\n<tr><th>partition</th><th>offsets</th><th>ops</th><th>result</th></tr>\n")
		for _, x := range ws {
			fmt.Fprintf(b, "<tr><td class=\"n\">%d</td><td>[%d, %d)</td><td class=\"n\">%d</td><td>%s</td></tr>\n", x.P, x.From, x.To, x.Ops, esc(x.Result))
		}
		b.WriteString("</table>\n")
	}
}

type line struct {
	name, color string
	pts         [][2]float64
}

func (r *Report) pts(get func(Point) float64) [][2]float64 {
	var out [][2]float64
	for _, p := range r.Series {
		out = append(out, [2]float64{p.T, get(p)})
	}
	return out
}

// chart draws lines over the run's seconds with the fault windows shaded behind them.
func (r *Report) chart(name, ylabel string, logY bool, lines []line) string {
	const w, h, left, right, top, bottom = 960.0, 300.0, 60.0, 20.0, 30.0, 40.0
	var b strings.Builder
	xmax := 1.0
	if n := len(r.Series); n > 0 {
		xmax = r.Series[n-1].T + 1
	}
	for _, f := range r.Faults {
		xmax = math.Max(xmax, f.End)
	}
	ymin, ymax := 0.0, 1.0
	if logY {
		ymin, ymax = 0.1, 1.0
	}
	for _, l := range lines {
		for _, p := range l.pts {
			ymax = math.Max(ymax, p[1])
		}
	}
	ymax *= 1.05
	X := func(x float64) float64 { return left + (w-left-right)*x/xmax }
	Y := func(y float64) float64 {
		if logY {
			y = math.Max(y, ymin)
			return top + (h-top-bottom)*(1-(math.Log10(y)-math.Log10(ymin))/(math.Log10(ymax)-math.Log10(ymin)))
		}
		return top + (h-top-bottom)*(1-(y-ymin)/(ymax-ymin))
	}
	fmt.Fprintf(&b, "<svg class=\"chart\" data-chart=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n", name, w, h, w, h)
	for _, f := range r.Faults {
		x0, x1 := X(f.Start), X(math.Max(f.End, f.Start+0.2))
		fmt.Fprintf(&b, "<rect class=\"fault\" data-kind=\"%s\" x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\" fill-opacity=\"0.15\"><title>%s</title></rect>\n",
			html.EscapeString(f.Kind), x0, top, x1-x0, h-top-bottom, colorOf(f.Kind), html.EscapeString(fmt.Sprintf("%d %s %v %.1f-%.1fs: %s", f.N, f.Kind, f.Nodes, f.Start, f.End, f.Detail)))
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"9\" fill=\"%s\">%d</text>\n", x0+1, top-3, colorOf(f.Kind), f.N)
	}
	// Axes and ticks.
	fmt.Fprintf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#444\"/>\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#444\"/>\n", left, top, left, h-bottom)
	step := niceStep(xmax / 10)
	for x := 0.0; x <= xmax; x += step {
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"middle\">%g</text>\n", X(x), h-bottom+14, x)
	}
	if logY {
		for y := 0.1; y <= ymax; y *= 10 {
			fmt.Fprintf(&b, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%g</text>\n<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", left-4, Y(y)+3, y, left, Y(y), w-right, Y(y))
		}
	} else {
		ys := niceStep(ymax / 5)
		for y := 0.0; y <= ymax; y += ys {
			fmt.Fprintf(&b, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%g</text>\n<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", left-4, Y(y)+3, y, left, Y(y), w-right, Y(y))
		}
	}
	fmt.Fprintf(&b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"middle\">seconds since start (shaded: faults, numbered as in the table)</text>\n", (left+w-right)/2, h-6)
	fmt.Fprintf(&b, "<text x=\"12\" y=\"%.0f\" font-size=\"11\" transform=\"rotate(-90 12 %.0f)\" text-anchor=\"middle\">%s</text>\n", (top+h-bottom)/2, (top+h-bottom)/2, html.EscapeString(ylabel))
	for i, l := range lines {
		// A second without a value (no acknowledgement in it) breaks the line.
		var segs [][]string
		var cur []string
		lastX := math.Inf(-1)
		for _, p := range l.pts {
			if (logY && p[1] <= 0) || p[0]-lastX > 1.5 {
				if len(cur) > 0 {
					segs = append(segs, cur)
				}
				cur = nil
			}
			if logY && p[1] <= 0 {
				continue
			}
			cur = append(cur, fmt.Sprintf("%.1f,%.1f", X(p[0]), Y(p[1])))
			lastX = p[0]
		}
		if len(cur) > 0 {
			segs = append(segs, cur)
		}
		for _, seg := range segs {
			if len(seg) == 1 {
				seg = append(seg, seg[0])
			}
			fmt.Fprintf(&b, "<polyline class=\"series\" data-series=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.3\" points=\"%s\"/>\n", html.EscapeString(l.name), l.color, strings.Join(seg, " "))
		}
		fmt.Fprintf(&b, "<rect x=\"%.0f\" y=\"%d\" width=\"10\" height=\"3\" fill=\"%s\"/><text x=\"%.0f\" y=\"%d\" font-size=\"10\">%s</text>\n", left+10+float64(i)*220, 12, l.color, left+24+float64(i)*220, 16, html.EscapeString(l.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}
