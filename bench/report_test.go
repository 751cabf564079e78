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
	if !strings.Contains(tb.String(), "RAW") || !strings.Contains(tb.String(), "median") {
		t.Errorf("table:\n%s", tb.String())
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
	v := &Verdict{Mode: "client", Threshold: 0.1}
	judge(v, []*Result{fakeResult("baseline", "client", 1, 1, 1), {Target: "current", Mode: "client", Failed: "x"}})
	if v.Pass {
		t.Error("a failed side must fail the gate")
	}
}
