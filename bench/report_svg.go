package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Charts are inline SVG. A line chart is <svg class="chart" data-chart="..."> with one
// <polyline class="series" data-target="..."> per series (and a <circle class="point">
// per point of a series of 20 points or fewer); a bar chart holds one
// <rect class="bar" data-value="..."> per bar. Empty charts are never drawn: callers
// leave the section out when there is nothing to plot.

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
			padL, padL+plotW, fy(y), fy(y), padL-4, fy(y)+4, esc(tickLabel(y, ystep)))
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
			fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", fx(x), padT+plotH+14, esc(tickLabel(x, xstep)))
		}
	}
	fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n", padL+plotW/2, chartH-6, esc(xLabel))
	fmt.Fprintf(&b, "<text x=\"14\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 %d)\">%s</text>\n", padT+plotH/2, padT+plotH/2, esc(yLabel))
	for i, s := range series {
		var pts strings.Builder
		var marks [][2]float64
		for _, p := range s.pts {
			if math.IsNaN(p[0]) || math.IsNaN(p[1]) || math.IsInf(p[1], 0) {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", fx(p[0]), fy(p[1]))
			marks = append(marks, [2]float64{fx(p[0]), fy(p[1])})
		}
		dash := ""
		if s.dashed {
			dash = " stroke-dasharray=\"6 3\""
		}
		fmt.Fprintf(&b, "<polyline class=\"series\" data-target=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"%s\"><title>%s</title></polyline>\n",
			esc(s.target), s.color, dash, strings.TrimSpace(pts.String()), esc(s.name))
		// A short series gets a mark on each point: one point alone draws no line.
		if len(marks) <= 20 {
			for _, m := range marks {
				fmt.Fprintf(&b, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", m[0], m[1], s.color)
			}
		}
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

// bar is one bar of a bar chart.
type bar struct {
	label string
	value float64
	text  string // the value as printed beside the bar
	color string
}

// barChart draws horizontal bars, labelled on the left, each with its value printed
// at its end, on a linear axis from 0.
func barChart(id, unit string, bars []bar) string {
	const (
		w, labelW, valueW, rowH, top, bottom = 900, 300, 110, 26, 10, 34
	)
	h := top + bottom + rowH*len(bars)
	plot := float64(w - labelW - valueW)
	vmax := 0.0
	for _, b := range bars {
		if !math.IsNaN(b.value) && !math.IsInf(b.value, 0) {
			vmax = math.Max(vmax, b.value)
		}
	}
	step := niceStep(vmax / 5)
	vmax = math.Max(step, math.Ceil(vmax/step)*step)
	fx := func(v float64) float64 { return float64(labelW) + v/vmax*plot }
	esc := html.EscapeString
	var b strings.Builder
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart bars\" data-chart=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", esc(id), w, h, w, h)
	axisY := top + rowH*len(bars)
	for v := 0.0; v <= vmax*1.0001; v += step {
		fmt.Fprintf(&b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/><text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n",
			fx(v), fx(v), top, axisY, fx(v), axisY+14, esc(tickLabel(v, step)))
	}
	fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n", float64(labelW)+plot/2, h-4, esc(unit))
	for i, br := range bars {
		y := top + i*rowH
		v := br.value
		if math.IsNaN(v) || v < 0 {
			v = 0
		}
		color := br.color
		if color == "" {
			color = palette[0]
		}
		fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"end\">%s</text>\n", labelW-8, y+rowH/2+4, esc(br.label))
		fmt.Fprintf(&b, "<rect class=\"bar\" data-value=\"%g\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s: %s</title></rect>\n",
			br.value, labelW, y+4, fx(v)-float64(labelW), rowH-8, color, esc(br.label), esc(br.text))
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\">%s</text>\n", fx(v)+6, y+rowH/2+4, esc(br.text))
	}
	fmt.Fprintf(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n", labelW, labelW, top, axisY)
	b.WriteString("</svg>\n")
	return b.String()
}

// tickLabel prints an axis value with as many decimals as the tick step needs
// (0.05 → "0.15", 0.5 → "2.5") and SI suffixes for large values ("2.00M", "40k").
func tickLabel(v, step float64) string {
	if math.Abs(v) >= 1e4 {
		return siCount(v)
	}
	dec := 0
	for s := step; s < 1 && dec < 6; s *= 10 {
		dec++
	}
	if step >= 1 && step != math.Trunc(step) {
		dec = 1
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}
