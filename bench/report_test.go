package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func fakeResult(target, mode string, round int, rate, p99 float64) *Result {
	h := newHist()
	for i := 1; i <= 1000; i++ {
		_ = h.RecordValue(int64(i) * 10)
	}
	r := &Result{Target: target, Workload: "w", Mode: mode, Round: round, PubRate: rate, PubMBps: rate / 1e4, ConsRate: rate,
		PublishLatency: summarize(h, true), E2ELatency: summarize(h, true), Acked: 10, Consumed: 10, CaughtUp: true}
	r.PublishLatency.P99 = p99
	for s := 1; s <= 5; s++ {
		r.Series = append(r.Series, Point{T: float64(s), Phase: PhaseMeasure, PubRate: rate, E2EP99: p99})
	}
	return r
}

// parseHTML checks the page is well-formed and collects, per chart, the
// data-target of each series.
func parseHTML(t *testing.T, page []byte) map[string][]string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	charts := map[string][]string{}
	chart := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("report is not well-formed: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			attr := func(n string) string {
				for _, a := range e.Attr {
					if a.Name.Local == n {
						return a.Value
					}
				}
				return ""
			}
			switch {
			case e.Name.Local == "script" || e.Name.Local == "link" || e.Name.Local == "img":
				t.Errorf("report has external-capable element <%s>", e.Name.Local)
			case e.Name.Local == "svg":
				chart = attr("data-chart")
				charts[chart] = nil
			case e.Name.Local == "polyline" && attr("class") == "series":
				charts[chart] = append(charts[chart], attr("data-target"))
			}
		}
	}
	return charts
}

func TestReportHTML(t *testing.T) {
	rep := &Report{Title: "t <&> \"q\"", Command: "samsa-bench compare", Started: time.Now(), Machine: DescribeMachine(),
		Results: []*Result{fakeResult("samsa", "client", 1, 900000, 3), fakeResult("kfake", "client", 1, 300000, 9),
			{Target: "broken", Mode: "client", Round: 1, Failed: "exit status 2 <oops>"}}}
	rep.Compare = Figures(rep.Results)
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.Bytes()
	charts := parseHTML(t, page)
	for _, c := range []string{"throughput", "latency", "percentile"} {
		got := charts[c]
		if strings.Join(got, ",") != "samsa,kfake" {
			t.Errorf("chart %s series %v, want one per target [samsa kfake]", c, got)
		}
	}
	s := string(page)
	for _, bad := range []string{"<script", "@import", "url(", "https://"} {
		if strings.Contains(s, bad) {
			t.Errorf("report references %q", bad)
		}
	}
	if strings.Count(s, "http://") != strings.Count(s, "xmlns=\"http://www.w3.org/2000/svg\"") {
		t.Error("report has an http reference besides the SVG namespace")
	}
	if !strings.Contains(s, "failed: exit status 2 &lt;oops&gt;") {
		t.Error("failed run not shown escaped")
	}
}

func TestReportJSONAndTable(t *testing.T) {
	rep := &Report{Title: "x", Results: []*Result{fakeResult("a", "client", 1, 100, 1), fakeResult("a", "raw", 1, 500, 2)}}
	rep.Compare = Figures(rep.Results)
	path := t.TempDir() + "/r.json"
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	var back Report
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != 2 || back.Results[1].Mode != "raw" || back.Results[0].PublishLatency.P99 != 1 {
		t.Errorf("round trip: %+v", back.Results)
	}
	var tb bytes.Buffer
	rep.WriteTable(&tb)
	if !strings.Contains(tb.String(), "RAW") || strings.Contains(tb.String(), "side by side") {
		t.Errorf("one target, one round: a results table and no side-by-side:\n%s", tb.String())
	}
	rep.Results = append(rep.Results, fakeResult("b", "client", 1, 200, 3))
	rep.Compare = Figures(rep.Results)
	tb.Reset()
	rep.WriteTable(&tb)
	if !strings.Contains(tb.String(), "side by side") || !strings.Contains(tb.String(), "median") {
		t.Errorf("two targets: a side-by-side table:\n%s", tb.String())
	}
}

// TestSideBySide: one row per figure and mode, one column per target, the best
// marked, the direction stated; ratios only against the first target.
func TestSideBySide(t *testing.T) {
	rs := []*Result{
		fakeResult("samsa", "client", 1, 900, 3), fakeResult("kfake", "client", 1, 300, 9),
		fakeResult("samsa", "client", 2, 1100, 5), fakeResult("kfake", "client", 2, 330, 7),
		fakeResult("samsa", "raw", 1, 5000, 3), fakeResult("kfake", "raw", 1, 6000, 2),
	}
	rs[2].Broker = &BrokerCost{CPUUsPerMsg: 0.3, PeakRSS: 100 << 20} // only samsa r2 has a cost
	rep := &Report{Results: rs, Compare: Figures(rs)}
	targets, modes, rows := rep.sideBySide()
	if strings.Join(targets, ",") != "samsa,kfake" || strings.Join(modes, ",") != "client,raw" {
		t.Fatalf("columns %v, modes %v", targets, modes)
	}
	find := func(mode, name string) figureRow {
		for _, r := range rows[mode] {
			if r.name == name {
				return r
			}
		}
		t.Fatalf("no row %s %s", mode, name)
		return figureRow{}
	}
	seen := map[string]bool{}
	for _, r := range rows["client"] {
		if seen[r.name] {
			t.Errorf("figure %s has two rows", r.name)
		}
		seen[r.name] = true
		if len(r.cells) != 2 {
			t.Errorf("%s: %d cells", r.name, len(r.cells))
		}
	}
	rate := find("client", "publish rate")
	if !rate.cells[0].Best || rate.cells[1].Best || rate.cells[0].Median != 1000 || rate.cells[1].Ratio != 315.0/1000 {
		t.Errorf("publish rate: %+v %+v", rate.cells[0], rate.cells[1])
	}
	p99 := find("client", "publish p99")
	if !p99.cells[0].Best || p99.better != "lower" {
		t.Errorf("publish p99: lower is better, samsa's 4 beats 8: %+v %+v", p99.cells[0], p99.cells[1])
	}
	if raw := find("raw", "publish rate"); !raw.cells[1].Best || raw.cells[1].Ratio != 1.2 {
		t.Errorf("raw publish rate: kfake best at 1.2×: %+v", raw.cells[1])
	}
	if e := find("client", "errors"); e.cells[0].Best || e.cells[1].Best {
		t.Error("equal figures: no best")
	}
	if c := find("client", "broker CPU per msg"); c.cells[0] == nil || c.cells[1] != nil || c.cells[0].Best {
		t.Errorf("a figure of one target: one cell, no best: %+v", c.cells)
	}

	var tb bytes.Buffer
	rep.WriteFigures(&tb)
	text := tb.String()
	for _, want := range []string{"higher is better", "lower is better", "* 1000", "0.32×", "divided by samsa's median", "RAW mode"} {
		if !strings.Contains(text, want) {
			t.Errorf("text table lacks %q:\n%s", want, text)
		}
	}
	var hb bytes.Buffer
	if err := rep.WriteHTML(&hb); err != nil {
		t.Fatal(err)
	}
	page := hb.String()
	parseHTML(t, hb.Bytes())
	for _, want := range []string{"data-section=\"side-by-side\"", "✔ best", "↑ higher is better", "↓ lower is better", "ratio worse", "above 1× is better"} {
		if !strings.Contains(page, want) {
			t.Errorf("html lacks %q", want)
		}
	}
}

// TestSummaryLines: --summary's verdict lines, ending in a verdict that agrees with
// the exit code.
func TestSummaryLines(t *testing.T) {
	one := &Report{Results: []*Result{fakeResult("kfake", "client", 1, 2000, 3)}}
	lines := one.verdictLines()
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "kfake client r1: publish 2000 msg/s") || lines[1] != "verdict: ok" {
		t.Errorf("one run: %q", lines)
	}
	rs := []*Result{fakeResult("samsa", "client", 1, 900, 3), fakeResult("kfake", "client", 1, 300, 9),
		{Target: "kfake", Mode: "raw", Round: 1, Failed: "connection refused"}}
	two := &Report{Results: rs, Compare: Figures(rs)}
	lines = two.verdictLines()
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"publish rate, client (msg/s, higher is better): samsa best at 900; kfake 300 (0.33× samsa)",
		"publish p99, client (ms, lower is better): samsa best at 3; kfake 9 (3.00× samsa)",
		"errors, client (count, lower is better): all 0",
		"  - kfake RAW r1 failed: connection refused",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "verdict: FAIL") {
		t.Errorf("a failed run: last line %q", last)
	}
	if strings.Contains(got, "publish p50") || strings.Contains(got, "e2e max") {
		t.Errorf("summary holds more than the headline figures:\n%s", got)
	}
	if lines := (&Report{}).verdictLines(); lines[len(lines)-1] != "verdict: FAIL (nothing was measured)" {
		t.Errorf("empty report: %q", lines)
	}
}

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"bin/samsa-bench", "run", "--brokers", "127.0.0.1:9092", "--admin", "http://127.0.0.1:9644"}, "bin/samsa-bench run --brokers 127.0.0.1:9092 --admin http://127.0.0.1:9644"},
		{[]string{"samsa-bench", "--work-dir", "/tmp/a b", "--x", "it's", "--e", ""}, `samsa-bench --work-dir '/tmp/a b' --x 'it'\''s' --e ''`},
		{[]string{"/tmp/go-build123/b001/exe/samsa-bench", "limits"}, "go run ./cmd/samsa-bench limits"},
	} {
		if got := CommandLine(tc.argv); got != tc.want {
			t.Errorf("CommandLine(%q) = %s, want %s", tc.argv, got, tc.want)
		}
	}
}

// TestReportSectionsOnlyWithContent: a limits report has no empty results table or
// charts; its figures are in their own table and bar charts, not in a <pre>.
func TestReportSectionsOnlyWithContent(t *testing.T) {
	rep := &Report{Title: "samsa-bench limits", Command: "samsa-bench limits --dir /tmp/x", Limits: &Limits{Dir: "/tmp/x", FileBytes: 8 << 20,
		WriteMBps: 6000, WriteThenSyncMBps: 2000, WriteSyncMBps: 700, FdatasyncP50Ms: 0.5, FdatasyncP99Ms: 1.1, FdatasyncSamples: 2000, LoopbackMBps: 3500, SendfileMBps: 2000}}
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	charts := parseHTML(t, b.Bytes())
	for _, absent := range []string{"data-section=\"results\"", "data-section=\"throughput\"", "data-section=\"percentile\"", "<pre"} {
		if strings.Contains(page, absent) {
			t.Errorf("limits report has %q", absent)
		}
	}
	if _, ok := charts["limits-bandwidth"]; !ok || strings.Count(page, "class=\"bar\"") != 7 {
		t.Errorf("limits report: want the bandwidth and fdatasync bar charts, 7 bars; charts %v", charts)
	}
	for _, want := range []string{"6000 MB/s", "p50 0.5 ms, p99 1.10 ms", "data-section=\"limits\""} {
		if !strings.Contains(page, want) {
			t.Errorf("limits report lacks %q", want)
		}
	}
}

// TestRenderedSectionsFindsEmpty: the browser test's DOM check flags a section whose
// table has no data row, whose chart draws nothing, or that holds nothing at all.
func TestRenderedSectionsFindsEmpty(t *testing.T) {
	dom := `<html><head><meta charset="utf-8"></head><body>
<section data-section="ok"><table><tbody><tr><th>a</th></tr><tr><td>1</td></tr></tbody></table>
<svg class="chart"><polyline class="series" points="1,2 3,4"></polyline></svg><ul><li>x</li></ul></section>
<section data-section="one-point"><svg class="chart"><polyline class="series" points="1,2"></polyline></svg></section>
<section data-section="marked-point"><svg class="chart"><polyline class="series" points="1,2"></polyline><circle class="point"></circle></svg></section>
<section data-section="empty-table"><table><tbody><tr><th>a</th></tr></tbody></table></section>
<section data-section="blank-cells"><table><tbody><tr><td> </td></tr></tbody></table></section>
<section data-section="empty-chart"><svg class="chart"><polyline class="series" points=""></polyline><rect class="bar" width="0"></rect></svg></section>
<section data-section="bars"><svg class="chart"><rect class="bar" width="12.5"></rect></svg></section>
<section data-section="nothing"><h2>title</h2><pre>figures in a pre</pre></section>
<section data-section="empty-list"><ul></ul></section>
</body></html>`
	secs, _ := renderedSections(t, []byte(dom))
	for name, wantEmpty := range map[string]bool{"ok": false, "bars": false, "one-point": true, "marked-point": false, "empty-table": true, "blank-cells": true, "empty-chart": true, "nothing": true, "empty-list": true} {
		s, ok := secs[name]
		if !ok {
			t.Errorf("section %s not found", name)
			continue
		}
		if got := s.empty() != ""; got != wantEmpty {
			t.Errorf("section %s: empty %q, want empty=%v (%+v)", name, s.empty(), wantEmpty, s)
		}
	}
}

func TestFigures(t *testing.T) {
	rs := []*Result{
		fakeResult("samsa", "client", 1, 900, 3), fakeResult("kfake", "client", 1, 300, 9),
		fakeResult("samsa", "client", 2, 1000, 2), fakeResult("kfake", "client", 2, 330, 8),
		fakeResult("samsa", "client", 3, 1100, 4), fakeResult("kfake", "client", 3, 310, 7),
		{Target: "samsa", Mode: "client", Round: 4, Failed: "boom"},
	}
	figs := Figures(rs)
	var rate, p99 *Figure
	for i := range figs {
		switch figs[i].Name {
		case "publish rate":
			rate = &figs[i]
		case "publish p99":
			p99 = &figs[i]
		}
	}
	if rate == nil || p99 == nil {
		t.Fatal("missing figures")
	}
	s, k := rate.Stats[0], rate.Stats[1]
	if s.Target != "samsa" || s.N != 3 || s.Min != 900 || s.Median != 1000 || s.Max != 1100 || s.Ratio != 1 {
		t.Errorf("samsa rate %+v", s)
	}
	if k.Median != 310 || k.Ratio != 0.31 {
		t.Errorf("kfake rate %+v", k)
	}
	if p99.Stats[1].Median != 8 || p99.Stats[1].Ratio != 8.0/3 {
		t.Errorf("kfake p99 %+v", p99.Stats[1])
	}
}

func TestJudge(t *testing.T) {
	mk := func(cur float64, curP99 float64) *Verdict {
		v := &Verdict{Mode: "client", Threshold: 0.1}
		var rs []*Result
		for i := 1; i <= 3; i++ {
			rs = append(rs, fakeResult("baseline", "client", i, 1000, 10), fakeResult("current", "client", i, cur, curP99))
		}
		judge(v, rs)
		return v
	}
	if v := mk(950, 10.5); !v.Pass {
		t.Errorf("5%% slower should pass: %+v", v)
	}
	if v := mk(850, 10); v.Pass || v.ThroughputRatio != 0.85 {
		t.Errorf("15%% slower should fail: %+v", v)
	}
	if v := mk(1000, 12); v.Pass {
		t.Errorf("p99 +20%% should fail: %+v", v)
	}
	// p99.9: its ratio is always given; it fails the gate only with its threshold.
	mkTail := func(curP999, threshold float64) *Verdict {
		v := &Verdict{Mode: "client", Threshold: 0.1, P999Threshold: threshold}
		var rs []*Result
		for i := 1; i <= 3; i++ {
			b, c := fakeResult("baseline", "client", i, 1000, 10), fakeResult("current", "client", i, 1000, 10)
			b.PublishLatency.P999, c.PublishLatency.P999 = 20, curP999
			rs = append(rs, b, c)
		}
		judge(v, rs)
		return v
	}
	if v := mkTail(40, 0); !v.Pass || v.P999Ratio != 2 {
		t.Errorf("p99.9 ×2 without its threshold should pass with ratio 2: %+v", v)
	}
	if v := mkTail(29, 0.5); !v.Pass {
		t.Errorf("p99.9 +45%% under a 50%% threshold should pass: %+v", v)
	}
	if v := mkTail(31, 0.5); v.Pass || !strings.Contains(strings.Join(v.Reasons, ";"), "publish p99.9 ratio 1.550 > 1.500") {
		t.Errorf("p99.9 +55%% over a 50%% threshold should fail: %+v", v)
	}
	v := &Verdict{Mode: "client", Threshold: 0.1}
	judge(v, []*Result{fakeResult("baseline", "client", 1, 1, 1), {Target: "current", Mode: "client", Failed: "x"}})
	if v.Pass {
		t.Error("a failed side must fail the gate")
	}
}
