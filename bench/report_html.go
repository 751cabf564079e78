package bench

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"strings"
)

// The HTML report is one self-contained, well-formed (XML-parsable) page: inline CSS,
// inline SVG, no scripts, no fonts, no external references. Each chart is an <svg
// class="chart" data-chart="..."> holding one <polyline class="series"
// data-target="..."> per series.

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

type svgSeries struct {
	name, target, color string
	dashed              bool
	pts                 [][2]float64
}

// seriesOf makes one series per result, coloured by target and dashed for raw mode.
func (rep *Report) seriesOf(get func(*Result) [][2]float64) []svgSeries {
	colors := map[string]string{}
	var out []svgSeries
	for _, r := range rep.Results {
		if r.Failed != "" {
			continue
		}
		c, ok := colors[r.Target]
		if !ok {
			c = palette[len(colors)%len(palette)]
			colors[r.Target] = c
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
		out = append(out, svgSeries{name: name, target: r.Target, color: c, dashed: r.Mode == "raw", pts: pts})
	}
	return out
}

// WriteHTML writes the report page.
func (rep *Report) WriteHTML(w io.Writer) error {
	var b bytes.Buffer
	esc := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(rep.Title))
	b.WriteString(`<style>
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; }
th { background: #f0f0f0; }
td.l, th.l { text-align: left; }
.raw { color: #8a2be2; font-weight: bold; }
.fail { color: #b00; }
svg.chart { border: 1px solid #ddd; margin: 0.5em 0; background: #fff; }
pre { background: #f7f7f7; padding: 0.5em; font-size: 12px; }
</style>
</head>
<body>
`)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(rep.Title))
	m := rep.Machine
	fmt.Fprintf(&b, "<p>%s · %d CPUs · %s · %s · commit %s · started %s</p>\n", esc(m.CPUModel), m.CPUs, esc(m.Kernel), esc(m.GoVersion), esc(m.Commit), esc(rep.Started.Format("2006-01-02 15:04:05 MST")))
	fmt.Fprintf(&b, "<pre>%s</pre>\n", esc(rep.Command))

	b.WriteString("<h2>Results</h2>\n<table>\n<tr><th class=\"l\">target</th><th>mode</th><th>round</th><th>pub msg/s</th><th>pub MB/s</th><th>cons msg/s</th><th>pub p50</th><th>pub p99</th><th>pub p99.9</th><th>pub max</th><th>e2e p50</th><th>e2e p99</th><th>e2e p99.9</th><th>e2e p99.99</th><th>e2e max</th><th>CPU µs/msg</th><th>CPU µs/MB</th><th>broker cores</th><th>RSS MiB</th><th>errors</th></tr>\n")
	for _, r := range rep.Results {
		mode := esc(r.Mode)
		if r.Mode == "raw" {
			mode = "<span class=\"raw\">RAW</span>"
		}
		if r.Failed != "" {
			fmt.Fprintf(&b, "<tr><td class=\"l\">%s</td><td>%s</td><td>%d</td><td class=\"l fail\" colspan=\"17\">failed: %s</td></tr>\n", esc(r.Target), mode, r.Round, esc(oneLine(r.Failed, 300)))
			continue
		}
		cpuMsg, cpuMB, cores, rss := "n/a", "n/a", "n/a", "n/a"
		if r.Broker != nil {
			cpuMsg, cpuMB, cores, rss = fmt.Sprintf("%.3f", r.Broker.CPUUsPerMsg), fmt.Sprintf("%.0f", r.Broker.CPUUsPerMB), fmt.Sprintf("%.2f", r.Broker.CPUCores), fmt.Sprintf("%.0f", float64(r.Broker.PeakRSS)/(1<<20))
		}
		p, e := r.PublishLatency, r.E2ELatency
		fmt.Fprintf(&b, "<tr><td class=\"l\">%s</td><td>%s</td><td>%d</td><td>%.0f</td><td>%.1f</td><td>%.0f</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td></tr>\n",
			esc(r.Target), mode, r.Round, r.PubRate, r.PubMBps, r.ConsRate,
			ms(p.P50, p.Count), ms(p.P99, p.Count), ms(p.P999, p.Count), ms(p.Max, p.Count),
			ms(e.P50, e.Count), ms(e.P99, e.Count), ms(e.P999, e.Count), ms(e.P9999, e.Count), ms(e.Max, e.Count),
			cpuMsg, cpuMB, cores, rss, r.Errors)
	}
	b.WriteString("</table>\n<p>Latencies in ms. Publish latency is measured from the intended send time (coordinated omission corrected). <span class=\"raw\">RAW</span> rows: broker capacity with pre-encoded batches over pipelined Produce requests and undecoded Fetch; their publish latency is per request. CPU is the broker process's, from /proc, per message produced.</p>\n")

	if len(rep.Compare) > 0 {
		b.WriteString("<h2>Side by side (min / median / max over rounds)</h2>\n<table>\n<tr><th class=\"l\">figure</th><th>unit</th><th class=\"l\">target</th><th>mode</th><th>n</th><th>min</th><th>median</th><th>max</th><th>ratio</th></tr>\n")
		for _, f := range rep.Compare {
			for _, s := range f.Stats {
				fmt.Fprintf(&b, "<tr><td class=\"l\">%s</td><td>%s</td><td class=\"l\">%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%.3f×</td></tr>\n",
					esc(f.Name), esc(f.Unit), esc(s.Target), esc(s.Mode), s.N, num(s.Min), num(s.Median), num(s.Max), s.Ratio)
			}
		}
		b.WriteString("</table>\n")
	}

	b.WriteString("<h2>Throughput over time</h2>\n")
	b.WriteString(lineChart("throughput", "seconds", "published msg/s", false, rep.seriesOf(func(r *Result) [][2]float64 {
		var pts [][2]float64
		for _, p := range r.Series {
			pts = append(pts, [2]float64{p.T, p.PubRate})
		}
		return pts
	})))
	b.WriteString("<h2>Latency over time (p99 per second, client mode)</h2>\n")
	b.WriteString(lineChart("latency", "seconds", "p99 ms (e2e; publish when no consumer)", false, rep.seriesOf(func(r *Result) [][2]float64 {
		if r.Mode == "raw" {
			return nil // per-request latency: not the same quantity
		}
		var pts [][2]float64
		for _, p := range r.Series {
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
	})))
	cpu := rep.seriesOf(func(r *Result) [][2]float64 {
		var pts [][2]float64
		for _, p := range r.Series {
			if p.BrokerCores > 0 {
				pts = append(pts, [2]float64{p.T, p.BrokerCores})
			}
		}
		return pts
	})
	if len(cpu) > 0 {
		b.WriteString("<h2>Broker CPU over time</h2>\n")
		b.WriteString(lineChart("broker-cpu", "seconds", "broker cores busy", false, cpu))
	}
	b.WriteString("<h2>Latency by percentile (client mode)</h2>\n")
	b.WriteString(lineChart("percentile", "percentile", "ms (e2e; publish when no consumer)", true, rep.seriesOf(func(r *Result) [][2]float64 {
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
	})))

	for _, r := range rep.Results {
		for _, p := range r.Profiles {
			fmt.Fprintf(&b, "<h3>%s round %d: %s profile</h3>\n<table>\n<tr><th>flat%%</th><th>cum%%</th><th class=\"l\">function</th></tr>\n", esc(r.Target), r.Round, esc(p.Kind))
			for _, t := range p.Top {
				fmt.Fprintf(&b, "<tr><td>%.2f</td><td>%.2f</td><td class=\"l\">%s</td></tr>\n", t.FlatPct, t.CumPct, esc(t.Name))
			}
			b.WriteString("</table>\n")
		}
	}
	if rep.Limits != nil {
		var t bytes.Buffer
		rep.Limits.WriteTable(&t)
		rep.writeLimitRatios(&t)
		fmt.Fprintf(&b, "<h2>Physical limits</h2>\n<pre>%s</pre>\n", esc(t.String()))
	}
	if rep.Regress != nil {
		var t bytes.Buffer
		rep.Regress.WriteVerdict(&t)
		fmt.Fprintf(&b, "<h2>Regression gate</h2>\n<pre>%s</pre>\n", esc(t.String()))
	}
	b.WriteString("</body>\n</html>\n")
	_, err := w.Write(b.Bytes())
	return err
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

// nines maps a percentile to log10(1/(1-p)): 90% → 1, 99% → 2, 99.9% → 3.
func nines(p float64) float64 {
	if p >= 100 {
		return 7
	}
	return math.Min(7, -math.Log10(1-p/100))
}

const (
	chartW, chartH         = 900, 320
	padL, padR, padT, padB = 70, 180, 20, 40
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
)

// lineChart draws series as polylines with axes, ticks and a legend. With percentile
// set, x is in nines (see nines) and ticked 0%, 90%, 99%, ...
func lineChart(id, xLabel, yLabel string, percentile bool, series []svgSeries) string {
	var b strings.Builder
	esc := html.EscapeString
	xmax, ymax := 0.0, 0.0
	for _, s := range series {
		for _, p := range s.pts {
			if !math.IsNaN(p[0]) && !math.IsInf(p[0], 0) {
				xmax = math.Max(xmax, p[0])
			}
			if !math.IsNaN(p[1]) && !math.IsInf(p[1], 0) {
				ymax = math.Max(ymax, p[1])
			}
		}
	}
	if percentile {
		xmax = math.Max(1, math.Ceil(xmax))
	}
	if xmax <= 0 {
		xmax = 1
	}
	ystep := niceStep(ymax / 5)
	ymax = math.Max(ystep, math.Ceil(ymax/ystep)*ystep)
	fx := func(x float64) float64 { return padL + x/xmax*plotW }
	fy := func(y float64) float64 { return padT + plotH - y/ymax*plotH }
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", esc(id), chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", padL, padT, plotW, plotH)
	for y := 0.0; y <= ymax*1.0001; y += ystep {
		fmt.Fprintf(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
			padL, padL+plotW, fy(y), fy(y), padL-4, fy(y)+4, esc(siCount(y)))
	}
	if percentile {
		for k := 0.0; k <= xmax; k++ {
			label := "0%"
			if k > 0 {
				label = strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.7f", 100*(1-math.Pow(10, -k))), "0"), ".") + "%"
			}
			fmt.Fprintf(&b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/><text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n",
				fx(k), fx(k), padT, padT+plotH, fx(k), padT+plotH+14, esc(label))
		}
	} else {
		xstep := niceStep(xmax / 8)
		for x := 0.0; x <= xmax*1.0001; x += xstep {
			fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", fx(x), padT+plotH+14, esc(siCount(x)))
		}
	}
	fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n", padL+plotW/2, chartH-6, esc(xLabel))
	fmt.Fprintf(&b, "<text x=\"14\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 %d)\">%s</text>\n", padT+plotH/2, padT+plotH/2, esc(yLabel))
	for i, s := range series {
		var pts strings.Builder
		for _, p := range s.pts {
			if math.IsNaN(p[0]) || math.IsNaN(p[1]) || math.IsInf(p[1], 0) {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", fx(p[0]), fy(p[1]))
		}
		dash := ""
		if s.dashed {
			dash = " stroke-dasharray=\"6 3\""
		}
		fmt.Fprintf(&b, "<polyline class=\"series\" data-target=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"%s\"><title>%s</title></polyline>\n",
			esc(s.target), s.color, dash, strings.TrimSpace(pts.String()), esc(s.name))
		ly := padT + 14 + i*16
		fmt.Fprintf(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/><text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n",
			padL+plotW+10, padL+plotW+30, ly-4, ly-4, s.color, dash, padL+plotW+34, ly, esc(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
