package bench

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"os"
)

// The HTML report is one self-contained, well-formed (XML-parsable) page: inline CSS,
// inline SVG, no scripts, no fonts, no external references.
//
// Layout: a header (title, machine, the whole command line), then one
// <section data-section="NAME"> per part that has something to show, in this order:
//
//	verdict        the summary lines (what --summary prints)
//	results        one row per run
//	runtime        the publish tail beside the Go runtime's figures (report_runtime.go)
//	side-by-side   one row per figure, one column per target (several targets or rounds)
//	throughput, latency, broker-cpu, percentile   line charts (when they have points)
//	profiles       top functions of each captured profile
//	limits         the physical limits: a table, bar charts, and the runs' shares
//	regress        the regression gate's verdict
//	history        a figure of the history file across commits (history.go)
//
// A section is written only with content: every table in it has a data row and every
// chart a drawn series or bar (the browser test checks this on the rendered page).

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

type svgSeries struct {
	name, target, color string
	dashed              bool
	pts                 [][2]float64
}

// targetColors gives each target its colour, in the order of the results.
func (rep *Report) targetColors() map[string]string {
	colors := map[string]string{}
	for _, r := range rep.Results {
		if _, ok := colors[r.Target]; !ok {
			colors[r.Target] = palette[len(colors)%len(palette)]
		}
	}
	return colors
}

// historyColor colours the history chart's targets: a target of the results keeps
// its colour, the others take the next ones.
func (rep *Report) historyColor() func(string) string {
	colors := rep.targetColors()
	return func(t string) string {
		if c, ok := colors[t]; ok {
			return c
		}
		colors[t] = palette[len(colors)%len(palette)]
		return colors[t]
	}
}

// fullSeconds leaves out the points that close an interval of less than half a
// second (the last, partial tick of a run): a rate over a few milliseconds is noise on
// a per-second chart. The JSON keeps every point.
func fullSeconds(pts []Point) []Point {
	var out []Point
	prev := 0.0
	for _, p := range pts {
		if p.T-prev >= 0.5 {
			out = append(out, p)
		}
		prev = p.T
	}
	return out
}

// seriesOf makes one series per result, coloured by target and dashed for raw mode.
func (rep *Report) seriesOf(get func(*Result) [][2]float64) []svgSeries {
	colors := rep.targetColors()
	var out []svgSeries
	for _, r := range rep.Results {
		if r.Failed != "" {
			continue
		}
		pts := get(r)
		if len(pts) == 0 {
			continue
		}
		name := r.Target
		if r.Mode == "raw" {
			name += " RAW"
		}
		if r.Round > 0 {
			name += fmt.Sprintf(" r%d", r.Round)
		}
		out = append(out, svgSeries{name: name, target: r.Target, color: colors[r.Target], dashed: r.Mode == "raw", pts: pts})
	}
	return out
}

const reportCSS = `<style>
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1400px; }
h1 { font-size: 1.5em; margin-bottom: 0.3em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: #f0f0f0; }
td.l, th.l { text-align: left; }
tr.mode th { background: #e4ecf7; text-align: left; }
.raw { color: #8a2be2; font-weight: bold; }
.fail { color: #b00; }
td.best { background: #e3f4e1; font-weight: bold; }
.mark { color: #1a7f37; font-size: 11px; font-weight: normal; }
.range { color: #666; font-size: 11px; font-weight: normal; }
.ratio { font-size: 11px; font-weight: normal; }
.ratio.better { color: #1a7f37; }
.ratio.worse { color: #b00; }
.dir { color: #444; white-space: nowrap; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
p.cmd code { display: block; white-space: pre-wrap; overflow-wrap: anywhere; background: #f7f7f7; padding: 0.5em; font-size: 12px; }
p.note { font-size: 12px; color: #444; max-width: 1100px; }
ul.verdict li { font-family: monospace; font-size: 13px; margin: 2px 0; }
ul.verdict li.fail { color: #b00; font-weight: bold; }
ul.verdict li.ok { color: #1a7f37; font-weight: bold; }
ul.notes li { font-size: 12px; }
svg.chart { border: 1px solid #ddd; margin: 0.5em 0; background: #fff; display: block; }
</style>
`

// WriteHTML writes the report page.
func (rep *Report) WriteHTML(w io.Writer) error {
	var b bytes.Buffer
	esc := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(rep.Title))
	b.WriteString(reportCSS)
	b.WriteString("</head>\n<body>\n<header>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(rep.Title))
	m := rep.Machine
	fmt.Fprintf(&b, "<p>%s · %d CPUs · %s · %s · commit %s · started %s</p>\n", esc(m.CPUModel), m.CPUs, esc(m.Kernel), esc(m.GoVersion), esc(m.Commit), esc(rep.Started.Format("2006-01-02 15:04:05 MST")))
	if rep.Command != "" {
		fmt.Fprintf(&b, "<p class=\"cmd\"><code>%s</code></p>\n", esc(rep.Command))
	}
	b.WriteString("</header>\n")

	rep.htmlVerdict(&b)
	if len(rep.Results) > 0 {
		rep.htmlResults(&b)
	}
	rep.htmlRuntime(&b)
	if rep.showSideBySide() {
		rep.htmlSideBySide(&b)
	}
	rep.htmlCharts(&b)
	rep.htmlProfiles(&b)
	if rep.Limits != nil {
		rep.htmlLimits(&b)
	}
	if rep.Regress != nil {
		rep.htmlRegress(&b)
	}
	rep.History.html(&b, rep.historyColor())
	b.WriteString("</body>\n</html>\n")
	_, err := w.Write(b.Bytes())
	return err
}

func section(b *bytes.Buffer, name, title string) {
	fmt.Fprintf(b, "<section id=\"%s\" data-section=\"%s\">\n<h2>%s</h2>\n", name, name, html.EscapeString(title))
}

func (rep *Report) htmlVerdict(b *bytes.Buffer) {
	lines := rep.verdictLines()
	section(b, "verdict", "Verdict")
	b.WriteString("<ul class=\"verdict\">\n")
	for i, l := range lines {
		class := ""
		if i == len(lines)-1 {
			class = " class=\"fail\""
			if l == "verdict: ok" {
				class = " class=\"ok\""
			}
		}
		fmt.Fprintf(b, "<li%s>%s</li>\n", class, html.EscapeString(l))
	}
	b.WriteString("</ul>\n</section>\n")
}

func (rep *Report) htmlResults(b *bytes.Buffer) {
	esc := html.EscapeString
	section(b, "results", "Runs")
	b.WriteString("<table>\n<tr><th class=\"l\" rowspan=\"2\">target</th><th rowspan=\"2\">mode</th><th rowspan=\"2\">round</th>" +
		"<th colspan=\"6\">publish</th><th>consume</th><th colspan=\"5\">end to end (ms)</th><th colspan=\"4\">broker</th><th colspan=\"2\">loader</th><th rowspan=\"2\">errors</th></tr>\n" +
		"<tr><th>msg/s</th><th>MB/s</th><th>p50 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>msg/s</th>" +
		"<th>p50</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th><th>CPU µs/msg</th><th>CPU µs/MB</th><th>cores</th><th>RSS MiB</th><th>CPU µs/msg</th><th>cores</th></tr>\n")
	var notes []string
	for _, r := range rep.Results {
		mode := esc(r.Mode)
		if r.Mode == "raw" {
			mode = "<span class=\"raw\">RAW</span>"
		}
		if r.Failed != "" {
			fmt.Fprintf(b, "<tr><td class=\"l\">%s</td><td>%s</td><td>%d</td><td class=\"l fail\" colspan=\"19\">failed: %s</td></tr>\n", esc(r.Target), mode, r.Round, esc(oneLine(r.Failed, 300)))
			continue
		}
		cpuMsg, cpuMB, cores, rss := "n/a", "n/a", "n/a", "n/a"
		if r.Broker != nil {
			cpuMsg, cpuMB, cores, rss = fmt.Sprintf("%.3f", r.Broker.CPUUsPerMsg), fmt.Sprintf("%.0f", r.Broker.CPUUsPerMB), fmt.Sprintf("%.2f", r.Broker.CPUCores), fmt.Sprintf("%.0f", float64(r.Broker.PeakRSS)/(1<<20))
		}
		lMsg, lCores := loaderCells(r)
		p, e := r.PublishLatency, r.E2ELatency
		fmt.Fprintf(b, "<tr><td class=\"l\">%s</td><td>%s</td><td>%d</td><td>%s</td><td>%.1f</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td></tr>\n",
			esc(r.Target), mode, r.Round, fmtFig(r.PubRate), r.PubMBps,
			ms(p.P50, p.Count), ms(p.P99, p.Count), ms(p.P999, p.Count), ms(p.Max, p.Count), fmtFig(r.ConsRate),
			ms(e.P50, e.Count), ms(e.P99, e.Count), ms(e.P999, e.Count), ms(e.P9999, e.Count), ms(e.Max, e.Count),
			cpuMsg, cpuMB, cores, rss, lMsg, lCores, r.Errors)
		tag := fmt.Sprintf("%s %s r%d", r.Target, modeName(r.Mode), r.Round)
		if r.Broker != nil && r.Broker.Source != "" {
			notes = append(notes, fmt.Sprintf("%s: broker CPU and RSS from %s", tag, r.Broker.Source))
		}
		if n := loaderNote(r); n != "" {
			notes = append(notes, tag+": "+n)
		}
		for _, n := range r.Notes {
			notes = append(notes, tag+": "+n)
		}
		for _, e := range r.ErrorSamples {
			notes = append(notes, tag+": error: "+e)
		}
		if r.Mode == "client" && !r.CaughtUp {
			notes = append(notes, fmt.Sprintf("%s: WARNING: consumers did not catch up: acked %d × %d subscriptions, consumed %d", tag, r.Acked, r.Subscriptions, r.Consumed))
		}
	}
	b.WriteString("</table>\n<p class=\"note\">Publish latency is measured from the intended send time (coordinated omission corrected). <span class=\"raw\">RAW</span> rows: broker capacity with pre-encoded batches over pipelined Produce requests and undecoded Fetch; their publish latency is per request. Broker CPU is the broker process's user+system time over the measured window, per message produced (per message consumed on a backlog drain); n/a where neither its pid nor its admin URL was known. Loader CPU is samsa-bench's own process (getrusage RUSAGE_SELF) over the same window; a note says when the loader, not the broker, may be the ceiling.</p>\n")
	if len(notes) > 0 {
		b.WriteString("<ul class=\"notes\">\n")
		for _, n := range notes {
			fmt.Fprintf(b, "<li>%s</li>\n", esc(n))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</section>\n")
}

func (rep *Report) htmlSideBySide(b *bytes.Buffer) {
	esc := html.EscapeString
	targets, modes, rows := rep.sideBySide()
	colors := rep.targetColors()
	section(b, "side-by-side", "Side by side")
	fmt.Fprintf(b, "<p class=\"note\">Each cell: the median over the rounds, the min – max below it when there was more than one round, and the ratio × to %s. The best median of each row is marked <span class=\"mark\">✔ best</span>. Ratio direction: × is this target's median divided by %s's, so above 1× is better on a <i>higher is better</i> row and below 1× is better on a <i>lower is better</i> row (green: better than %s, red: worse).</p>\n",
		esc(targets[0]), esc(targets[0]), esc(targets[0]))
	b.WriteString("<table class=\"sbs\">\n<tr><th class=\"l\">figure</th><th class=\"l\">unit</th><th class=\"l\">better</th>")
	for _, t := range targets {
		fmt.Fprintf(b, "<th><span class=\"swatch\" style=\"background:%s\"></span>%s</th>", colors[t], esc(t))
	}
	b.WriteString("</tr>\n")
	for _, mode := range modes {
		fmt.Fprintf(b, "<tr class=\"mode\"><th colspan=\"%d\">%s</th></tr>\n", 3+len(targets), esc(rep.modeTitle(mode)))
		for _, r := range rows[mode] {
			arrow := "↑"
			if r.better == "lower" {
				arrow = "↓"
			}
			fmt.Fprintf(b, "<tr><td class=\"l\">%s</td><td class=\"l\">%s</td><td class=\"l dir\">%s %s</td>", esc(r.name), esc(r.unit), arrow, esc(betterText(r.better)))
			for i, c := range r.cells {
				if c == nil {
					b.WriteString("<td>n/a</td>")
					continue
				}
				class, mark := "", ""
				if c.Best {
					class, mark = " class=\"best\"", " <span class=\"mark\">✔ best</span>"
				}
				fmt.Fprintf(b, "<td%s>%s%s", class, esc(fmtFig(c.Median)), mark)
				if i > 0 && c.Ratio != 0 {
					dir := ""
					switch {
					case math.Abs(c.Ratio-1) < 0.005: // prints as 1.00×: neither
					case c.Ratio > 1 && r.better == "higher", c.Ratio < 1 && r.better == "lower":
						dir = " better"
					default:
						dir = " worse"
					}
					fmt.Fprintf(b, " <span class=\"ratio%s\">%.2f×</span>", dir, c.Ratio)
				}
				if c.N > 1 && c.Min != c.Max {
					fmt.Fprintf(b, "<div class=\"range\">%s – %s (n=%d)</div>", esc(fmtFig(c.Min)), esc(fmtFig(c.Max)), c.N)
				}
				b.WriteString("</td>")
			}
			b.WriteString("</tr>\n")
		}
	}
	b.WriteString("</table>\n</section>\n")
}

func (rep *Report) htmlCharts(b *bytes.Buffer) {
	chart := func(name, title, xLabel, yLabel string, percentile bool, series []svgSeries) {
		if len(series) == 0 {
			return
		}
		section(b, name, title)
		b.WriteString(lineChart(name, xLabel, yLabel, percentile, series))
		b.WriteString("</section>\n")
	}
	// Throughput: one chart per mode, as RAW rates can be a hundred times the client's.
	rate := func(mode string) []svgSeries {
		return rep.seriesOf(func(r *Result) [][2]float64 {
			if r.Mode != mode {
				return nil
			}
			var pts [][2]float64
			for _, p := range fullSeconds(r.Series) {
				pts = append(pts, [2]float64{p.T, p.PubRate})
			}
			return pts
		})
	}
	client, raw := rate("client"), rate("raw")
	if len(client)+len(raw) > 0 {
		section(b, "throughput", "Throughput over time")
		if len(client) > 0 {
			b.WriteString("<h3>client mode</h3>\n")
			b.WriteString(lineChart("throughput", "seconds", "published msg/s", false, client))
		}
		if len(raw) > 0 {
			b.WriteString("<h3>RAW mode</h3>\n")
			b.WriteString(lineChart("throughput-raw", "seconds", "produced msg/s", false, raw))
		}
		b.WriteString("</section>\n")
	}
	chart("latency", "Latency over time (p99 per second, client mode)", "seconds", "p99 ms (e2e; publish when no consumer)", false, rep.seriesOf(func(r *Result) [][2]float64 {
		if r.Mode == "raw" {
			return nil // per-request latency: not the same quantity
		}
		var pts [][2]float64
		for _, p := range fullSeconds(r.Series) {
			v := p.E2EP99
			if r.E2ELatency.Count == 0 {
				v = p.PubP99
			}
			if v <= 0 {
				continue // no sample in that second
			}
			pts = append(pts, [2]float64{p.T, v})
		}
		return pts
	}))
	chart("broker-cpu", "Broker CPU over time", "seconds", "broker cores busy", false, rep.seriesOf(func(r *Result) [][2]float64 {
		var pts [][2]float64
		for _, p := range fullSeconds(r.Series) {
			if p.BrokerCores > 0 {
				pts = append(pts, [2]float64{p.T, p.BrokerCores})
			}
		}
		return pts
	}))
	chart("percentile", "Latency by percentile (client mode)", "percentile", "ms (e2e; publish when no consumer)", true, rep.seriesOf(func(r *Result) [][2]float64 {
		if r.Mode == "raw" {
			return nil
		}
		l := r.E2ELatency
		if l.Count == 0 {
			l = r.PublishLatency
		}
		var pts [][2]float64
		for _, c := range l.Curve {
			pts = append(pts, [2]float64{nines(c.Percentile), c.Ms})
		}
		return pts
	}))
}

func (rep *Report) htmlProfiles(b *bytes.Buffer) {
	esc := html.EscapeString
	started := false
	for _, r := range rep.Results {
		for _, p := range r.Profiles {
			if len(p.Top) == 0 {
				continue
			}
			if !started {
				section(b, "profiles", "Broker profiles")
				started = true
			}
			fmt.Fprintf(b, "<h3>%s round %d: %s profile (%s)</h3>\n<table>\n<tr><th>flat%%</th><th>cum%%</th><th class=\"l\">function</th></tr>\n", esc(r.Target), r.Round, esc(p.Kind), esc(p.Total))
			for _, t := range p.Top {
				fmt.Fprintf(b, "<tr><td>%.2f</td><td>%.2f</td><td class=\"l\">%s</td></tr>\n", t.FlatPct, t.CumPct, esc(t.Name))
			}
			b.WriteString("</table>\n")
		}
	}
	if started {
		b.WriteString("</section>\n")
	}
}

func (rep *Report) htmlLimits(b *bytes.Buffer) {
	esc := html.EscapeString
	l := rep.Limits
	section(b, "limits", "Physical limits of this machine")
	fmt.Fprintf(b, "<p class=\"note\">Measured in %s with %d MiB files: the ceilings a broker on this machine cannot pass.</p>\n", esc(l.Dir), l.FileBytes>>20)
	b.WriteString("<table>\n<tr><th class=\"l\">limit</th><th>figure</th><th class=\"l\">how</th></tr>\n")
	row := func(name, fig, how string) {
		fmt.Fprintf(b, "<tr><td class=\"l\">%s</td><td>%s</td><td class=\"l\">%s</td></tr>\n", esc(name), esc(fig), esc(how))
	}
	row("sequential write (page cache)", fmtFig(l.WriteMBps)+" MB/s", "1 MiB writes, no sync")
	row("sequential write, then one fdatasync", fmtFig(l.WriteThenSyncMBps)+" MB/s", fmt.Sprintf("the same, timed through a final fdatasync of %s ms", fmtFig(l.FinalSyncMs)))
	row("1 MiB write + fdatasync", fmtFig(l.WriteSyncMBps)+" MB/s", "each 1 MiB write followed by fdatasync")
	row("4 KiB write + fdatasync latency", fmt.Sprintf("p50 %s ms, p99 %s ms", fmtFig(l.FdatasyncP50Ms), fmtFig(l.FdatasyncP99Ms)), fmt.Sprintf("%d samples", l.FdatasyncSamples))
	row("loopback TCP", fmtFig(l.LoopbackMBps)+" MB/s", "one connection, 1 MiB writes")
	row("sendfile file → loopback TCP", fmtFig(l.SendfileMBps)+" MB/s", "page-cached file")
	b.WriteString("</table>\n")
	mb := func(label string, v float64, color string) bar {
		return bar{label: label, value: v, text: fmtFig(v) + " MB/s", color: color}
	}
	bars := []bar{
		mb("sequential write (page cache)", l.WriteMBps, palette[0]),
		mb("write, then one fdatasync", l.WriteThenSyncMBps, palette[0]),
		mb("1 MiB write + fdatasync", l.WriteSyncMBps, palette[0]),
		mb("loopback TCP", l.LoopbackMBps, palette[2]),
		mb("sendfile → loopback TCP", l.SendfileMBps, palette[2]),
	}
	colors := rep.targetColors()
	var shares []*Result
	for _, r := range rep.Results {
		if r.Failed == "" && (r.PubMBps > 0 || r.ConsMBps > 0) {
			shares = append(shares, r)
			tag := fmt.Sprintf("%s %s r%d", r.Target, modeName(r.Mode), r.Round)
			if r.PubMBps > 0 {
				bars = append(bars, mb(tag+" publish", r.PubMBps, colors[r.Target]))
			}
			if r.ConsMBps > 0 {
				bars = append(bars, mb(tag+" consume", r.ConsMBps, colors[r.Target]))
			}
		}
	}
	b.WriteString("<h3>Bandwidth</h3>\n")
	b.WriteString(barChart("limits-bandwidth", "MB/s", bars))
	b.WriteString("<h3>fdatasync latency (4 KiB append + fdatasync)</h3>\n")
	b.WriteString(barChart("limits-fdatasync", "ms", []bar{
		{label: "p50", value: l.FdatasyncP50Ms, text: fmtFig(l.FdatasyncP50Ms) + " ms", color: palette[3]},
		{label: "p99", value: l.FdatasyncP99Ms, text: fmtFig(l.FdatasyncP99Ms) + " ms", color: palette[1]},
	}))
	if len(shares) > 0 && l.LoopbackMBps > 0 {
		b.WriteString("<h3>The runs against these limits</h3>\n<table>\n<tr><th class=\"l\">run</th><th>publish MB/s</th><th>of loopback TCP</th><th>of 1 MiB write+fdatasync</th><th>consume MB/s</th><th>of sendfile</th></tr>\n")
		pct := func(v, of float64) string {
			if of <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f%%", 100*v/of)
		}
		for _, r := range shares {
			fmt.Fprintf(b, "<tr><td class=\"l\">%s %s r%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				esc(r.Target), esc(modeName(r.Mode)), r.Round, fmtFig(r.PubMBps), pct(r.PubMBps, l.LoopbackMBps), pct(r.PubMBps, l.WriteSyncMBps),
				fmtFig(r.ConsMBps), pct(r.ConsMBps, l.SendfileMBps))
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("</section>\n")
}

func (rep *Report) htmlRegress(b *bytes.Buffer) {
	esc := html.EscapeString
	v := rep.Regress
	section(b, "regress", "Regression gate")
	state, class := "PASS", "ok"
	if !v.Pass {
		state, class = "FAIL", "fail"
	}
	fmt.Fprintf(b, "<ul class=\"verdict\"><li class=\"%s\">regress %s</li></ul>\n", class, state)
	b.WriteString("<table>\n<tr><th class=\"l\">check</th><th>current ÷ baseline (median)</th><th>allowed</th><th class=\"l\">better</th></tr>\n")
	fmt.Fprintf(b, "<tr><td class=\"l\">publish throughput</td><td>%.3f</td><td>≥ %.3f</td><td class=\"l dir\">↑ higher is better</td></tr>\n", v.ThroughputRatio, 1-v.Threshold)
	fmt.Fprintf(b, "<tr><td class=\"l\">publish p99</td><td>%.3f</td><td>≤ %.3f</td><td class=\"l dir\">↓ lower is better</td></tr>\n", v.P99Ratio, 1+v.Threshold)
	p999Allowed := "not gated"
	if v.P999Threshold > 0 {
		p999Allowed = fmt.Sprintf("≤ %.3f", 1+v.P999Threshold)
	}
	fmt.Fprintf(b, "<tr><td class=\"l\">publish p99.9</td><td>%.3f</td><td>%s</td><td class=\"l dir\">↓ lower is better</td></tr>\n", v.P999Ratio, p999Allowed)
	fmt.Fprintf(b, "<tr><td class=\"l\">broker CPU per msg</td><td>%s</td><td>≤ %.3f</td><td class=\"l dir\">↓ lower is better</td></tr>\n", v.cpuRatioText(), 1+v.Threshold)
	b.WriteString("</table>\n")
	if v.TargetRate > 0 {
		fmt.Fprintf(b, "<p class=\"note\">Fixed-rate workload (%s msg/s): throughput equals the target whenever the broker keeps up, so its check catches a shortfall only; the gate is on publish p99 (and p99.9 when its threshold is set) and CPU per message.</p>\n", esc(fmtFig(v.TargetRate)))
	}
	fmt.Fprintf(b, "<p class=\"note\">baseline %s (%s) against current %s, %s mode, %d rounds A B A B.</p>\n", esc(v.Baseline), esc(short(v.BaselineCommit)), esc(short(v.CurrentCommit)), esc(v.Mode), v.Rounds)
	if len(v.Reasons) > 0 {
		b.WriteString("<ul class=\"notes\">\n")
		for _, r := range v.Reasons {
			fmt.Fprintf(b, "<li class=\"fail\">%s</li>\n", esc(r))
		}
		b.WriteString("</ul>\n")
	}
	if len(v.Notes) > 0 {
		b.WriteString("<ul class=\"notes\">\n")
		for _, n := range v.Notes {
			fmt.Fprintf(b, "<li>%s</li>\n", esc(n))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</section>\n")
}

// WriteHTMLFile writes the report page to path.
func (rep *Report) WriteHTMLFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: report html: %w", err)
	}
	if err := rep.WriteHTML(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: report html: %w", err)
	}
	return f.Close()
}
