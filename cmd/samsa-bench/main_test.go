package main

import (
	"bytes"
	"encoding/json"
	"flag"
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
	for _, tc := range []string{"segment.bytes", "=1", "bad key=1"} {
		if code := runCmd([]string{"--spawn", "kfake", "--topic-config", tc}, false); code != 2 {
			t.Errorf("--topic-config %q: exit %d, want 2", tc, code)
		}
	}
	if code := regressCmd([]string{"--workload", "max-throughput-100b"}); code != 2 {
		t.Errorf("regress without --baseline: exit %d", code)
	}
}

// TestTopicConfigFlag: --topic-config sets a topic config of the workload, on
// every target, over the workload's own.
func TestTopicConfigFlag(t *testing.T) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	var c common
	c.register(fs)
	if err := fs.Parse([]string{"--workload", "retention-reached", "--topic-config", "segment.bytes=262144", "--topic-config", "local.retention.bytes=524288"}); err != nil {
		t.Fatal(err)
	}
	w, err := c.load()
	if err != nil {
		t.Fatal(err)
	}
	if w.TopicConfigs["segment.bytes"] != "262144" || w.TopicConfigs["local.retention.bytes"] != "524288" || w.TopicConfigs["retention.bytes"] != "2097152" {
		t.Errorf("topic configs %v", w.TopicConfigs)
	}
}

// TestSummaryPrintsOnlyVerdicts: --summary prints the verdict lines and nothing
// else on stdout (no progress, no tables, no report paths); the reports are written.
func TestSummaryPrintsOnlyVerdicts(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(wl, []byte("name: cmd-test\npartitionsPerTopic: 2\nproducerRate: 2000\nwarmup: 0s\nduration: 1s\nproducer: {maxBufferedRecords: 10000}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	stdout = &buf
	defer func() { stdout = os.Stdout }()
	out := filepath.Join(dir, "out")
	if code := runCmd([]string{"--spawn", "kfake", "--workload", wl, "--out", out, "--summary"}, false); code != 0 {
		t.Fatalf("exit %d:\n%s", code, buf.String())
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "kfake client r1: publish ") || lines[1] != "verdict: ok" {
		t.Errorf("summary:\n%s", buf.String())
	}
	if _, err := os.Stat(filepath.Join(out, "report.html")); err != nil {
		t.Error(err)
	}
}

// TestReadBackFailExits: a run whose read-back failed (tiered-readback) exits 1, and
// its summary names the reader and the first discrepancy; the same run with every
// read-back passed exits 0.
func TestReadBackFailExits(t *testing.T) {
	var buf bytes.Buffer
	stdout = &buf
	defer func() { stdout = os.Stdout }()
	fig := &bench.TieredFigures{ReadBack: []bench.ReadBackFigures{
		{Reader: "franz-go", Pass: true},
		{Reader: "kcat", Pass: false, Discrepancies: 1, First: "partition 3: offsets 7 to 9 missing (offset 10 read next)"},
	}}
	rep := &bench.Report{Results: []*bench.Result{{Target: "samsa", Mode: "raw", Round: 1, Tiered: fig}}}
	if code := finish(rep, t.TempDir(), nil, true); code != 1 || !strings.Contains(buf.String(), "read-back kcat: FAIL: partition 3: offsets 7 to 9 missing") {
		t.Errorf("exit %d:\n%s", code, buf.String())
	}
	fig.ReadBack[1] = bench.ReadBackFigures{Reader: "kcat", Pass: true}
	buf.Reset()
	if code := finish(rep, t.TempDir(), nil, true); code != 0 || !strings.HasSuffix(buf.String(), "verdict: ok\n") {
		t.Errorf("exit %d:\n%s", code, buf.String())
	}
}

func TestTargetValues(t *testing.T) {
	urls, pids, err := targetValues([]string{"127.0.0.1:9092"}, []string{"http://127.0.0.1:9644/"}, []string{"4242"})
	if err != nil || urls["127.0.0.1:9092"] != "http://127.0.0.1:9644" || pids["127.0.0.1:9092"] != 4242 {
		t.Errorf("one target: %v %v %v", urls, pids, err)
	}
	two := []string{"127.0.0.1:9092", "samsa@sync=none"}
	urls, pids, err = targetValues(two, []string{"127.0.0.1:9092=http://127.0.0.1:9644"}, []string{"samsa@sync=none=77"})
	if err != nil || urls["127.0.0.1:9092"] != "http://127.0.0.1:9644" || pids["samsa@sync=none"] != 77 {
		t.Errorf("TARGET=value: %v %v %v", urls, pids, err)
	}
	for _, bad := range []struct{ admins, pids []string }{
		{admins: []string{"http://127.0.0.1:9644"}},  // which of two?
		{pids: []string{"10.0.0.9:9092=5"}},          // not a target
		{pids: []string{"127.0.0.1:9092=-3"}},        // not a pid
		{admins: []string{"127.0.0.1:9092=ftp://x"}}, // not http
	} {
		if _, _, err := targetValues(two, bad.admins, bad.pids); err == nil {
			t.Errorf("%v %v accepted", bad.admins, bad.pids)
		}
	}
}

// --command-config: FILE for the only target, TARGET=FILE for one of several; a bare
// file with several targets and a file of refused properties are errors.
func TestTargetClientConfigs(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "scram.properties")
	os.WriteFile(good, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=u\nsasl.password=p\n"), 0o600)
	bad := filepath.Join(dir, "bad.properties")
	os.WriteFile(bad, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.username=u\n"), 0o600)
	m, err := targetClientConfigs([]string{"127.0.0.1:1"}, []string{good})
	if err != nil || len(m["127.0.0.1:1"]) != 1 {
		t.Fatalf("one target: %v %v", m, err)
	}
	m, err = targetClientConfigs([]string{"samsa", "127.0.0.1:2"}, []string{"127.0.0.1:2=" + good})
	if err != nil || len(m["127.0.0.1:2"]) != 1 || len(m["samsa"]) != 0 {
		t.Fatalf("TARGET=FILE: %v %v", m, err)
	}
	if _, err := targetClientConfigs([]string{"samsa", "127.0.0.1:2"}, []string{good}); err == nil {
		t.Fatal("a bare file with two targets was accepted")
	}
	if _, err := targetClientConfigs([]string{"127.0.0.1:1"}, []string{bad}); err == nil || !strings.Contains(err.Error(), "GSSAPI") {
		t.Fatalf("GSSAPI: %v", err)
	}
}

// TestCompareAppendsHistory: two compare runs append a line per target and round to
// --history; history prints the figure across them and writes its chart; --no-history
// appends nothing.
func TestCompareAppendsHistory(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(wl, []byte("name: cmd-test\npartitionsPerTopic: 2\nproducerRate: 2000\nwarmup: 0s\nduration: 1s\nproducer: {maxBufferedRecords: 10000}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	stdout = &buf
	defer func() { stdout = os.Stdout }()
	file := filepath.Join(dir, "results", "history.jsonl")
	for i := 0; i < 2; i++ {
		if code := runCmd([]string{"--targets", "kfake", "--rounds", "2", "--workload", wl, "--out", filepath.Join(dir, "out"), "-q", "--history", file}, true); code != 0 {
			t.Fatalf("compare exit %d:\n%s", code, buf.String())
		}
	}
	if code := runCmd([]string{"--targets", "kfake", "--workload", wl, "--out", filepath.Join(dir, "out-none"), "-q", "--history", file, "--no-history"}, true); code != 0 {
		t.Fatalf("compare --no-history exit %d", code)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 4 {
		t.Fatalf("%d history lines, want 4 (2 runs × 2 rounds):\n%s", n, b)
	}
	h, err := os.ReadFile(filepath.Join(dir, "out", "report.html"))
	if err != nil || !strings.Contains(string(h), `data-section="history"`) {
		t.Errorf("compare report without its history section: %v", err)
	}
	buf.Reset()
	out := filepath.Join(dir, "hist")
	if code := historyCmd([]string{"--history", file, "--figure", "p99", "--target", "kfake", "--workload", "cmd-test", "--out", out}); code != 0 {
		t.Fatalf("history exit %d:\n%s", code, buf.String())
	}
	if got := buf.String(); !strings.Contains(got, "publish p99 (ms) across commits") || strings.Count(got, " compare ") != 2 {
		t.Errorf("history table:\n%s", got)
	}
	if h, err := os.ReadFile(filepath.Join(out, "report.html")); err != nil || !strings.Contains(string(h), `data-chart="history"`) {
		t.Errorf("history page without its chart: %v", err)
	}
	if code := historyCmd([]string{"--history", file, "--figure", "p42"}); code != 2 {
		t.Errorf("unknown figure: exit %d, want 2", code)
	}
}
