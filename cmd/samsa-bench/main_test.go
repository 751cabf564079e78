package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samsa-broker/samsa/bench"
)

// TestRunCommandKfake runs the command's run path against in-process kfake with a
// short workload and checks the report files.
func TestRunCommandKfake(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(wl, []byte("name: cmd-test\npartitionsPerTopic: 2\nproducerRate: 2000\nwarmup: 0s\nduration: 2s\nproducer: {maxBufferedRecords: 10000}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if code := runCmd([]string{"--spawn", "kfake", "--workload", wl, "--out", out, "-q"}, false); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || rep.Results[0].Target != "kfake" || rep.Results[0].Acked == 0 || rep.Results[0].Errors != 0 {
		t.Fatalf("results %+v", rep.Results)
	}
	h, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil || !strings.Contains(string(h), "data-chart=\"throughput\"") {
		t.Fatalf("html: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--spawn", "kfake", "--brokers", "127.0.0.1:1"},
		{},
		{"--workload", "no-such-workload", "--spawn", "kfake"},
		{"--bogus-flag"},
	} {
		if code := runCmd(args, false); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code := regressCmd([]string{"--workload", "max-throughput-100b"}); code != 2 {
		t.Errorf("regress without --baseline: exit %d", code)
	}
}
