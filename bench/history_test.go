package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHistoryRoundTrip: a run's lines are appended, read back (a torn line skipped),
// and grouped per run and target into the median of its rounds, oldest run first.
func TestHistoryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results", "history.jsonl")
	runAt := func(start time.Time, p999 ...float64) *Report {
		rep := &Report{Started: start, Machine: Machine{CPUs: 2, CPUModel: "cpu", Kernel: "Linux 6"}}
		for i, v := range p999 {
			r := fakeResult("samsa", "client", i+1, 20000, 4)
			r.PublishLatency.P999 = v
			r.Broker = &BrokerCost{CPUUsPerMsg: 10 + float64(i)}
			rep.Results = append(rep.Results, r, fakeResult("kfake-proc", "client", i+1, 20000, 3))
		}
		rep.Results = append(rep.Results, &Result{Target: "samsa", Workload: "w", Mode: "client", Round: 9, Failed: "broker exited"})
		return rep
	}
	t0 := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	first := HistoryEntries(runAt(t0, 6, 9, 7), "compare", "aaaaaaaaaaaaaaaa", nil)
	if len(first) != 7 || first[0].Commit != "aaaaaaaaaaaaaaaa" || first[0].P999 != 6 || first[0].CPUUsPerMsg != 10 || first[0].Machine.CPUs != 2 || first[6].Failed == "" {
		t.Fatalf("entries %+v", first)
	}
	if err := AppendHistory(path, first); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026-12-07T18:00:00Z","run":` + "\n") // a torn line
	f.Close()
	second := HistoryEntries(runAt(t0.Add(time.Hour), 5, 4, 3), "regress", "", func(target string) string { return "b" + target })
	if err := AppendHistory(path, second); err != nil {
		t.Fatal(err)
	}
	entries, skipped, err := ReadHistory(path)
	if err != nil || skipped != 1 || len(entries) != 14 {
		t.Fatalf("read %d entries, %d skipped, %v", len(entries), skipped, err)
	}
	h, err := BuildHistory(entries, "p99.9", HistoryFilter{Targets: []string{"samsa"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Points) != 2 || h.Points[0].Median != 7 || h.Points[0].Min != 6 || h.Points[0].Max != 9 || h.Points[0].Rounds != 3 ||
		h.Points[1].Median != 4 || h.Points[1].Commit != "bsamsa" || h.Points[1].Command != "regress" {
		t.Fatalf("points %+v", h.Points)
	}
	if h, _ := BuildHistory(entries, "cpu", HistoryFilter{Targets: []string{"kfake-proc"}}); len(h.Points) != 0 {
		t.Errorf("kfake-proc has no CPU figure, yet points %+v", h.Points)
	}
	if h, _ := BuildHistory(entries, "p99", HistoryFilter{LastRuns: 1}); len(h.Points) != 2 || h.Points[0].Command != "regress" {
		t.Errorf("last run: %+v", h.Points)
	}
	if _, err := BuildHistory(entries, "p42", HistoryFilter{}); err == nil || !strings.Contains(err.Error(), "p99.9") {
		t.Errorf("unknown figure: %v", err)
	}
	h.File = path
	var b strings.Builder
	h.WriteTable(&b)
	for _, want := range []string{"publish p99.9 (ms) across commits", "aaaaaaaaaaaa", "regress", "bsamsa"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	rep := &Report{Title: "history", History: h}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	charts := parseHTML(t, page.Bytes())
	if got := charts["history"]; len(got) != 1 || got[0] != "samsa" {
		t.Errorf("history chart series %v, want one for samsa", got)
	}
	if !strings.Contains(page.String(), `data-section="history"`) {
		t.Error("no history section")
	}
}
