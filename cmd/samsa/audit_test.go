package main

// Tests of `samsa audit`: the binary run as a child process against one real node
// (`samsa serve`), against franz-go's kfake as the control, and against a node where
// the test writes a duplicate canary record itself.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/tools/audit"
)

// TestAuditUsage: bad flags and a bad --command-config exit 2 before any connection.
func TestAuditUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--topic", "__samsa_audit"},
		{"--topic", ""},
		{"--rate", "0"},
		{"--partitions", "0"},
		{"--horizon", "0s"},
		{"--duration", "-1s"},
		{"--no-such-flag"},
		{"extra-argument"},
		{"--command-config", "/nonexistent/client.properties"},
		{"--metrics-listen", "127.0.0.1:not-a-port"},
	} {
		var out, errOut bytes.Buffer
		code := auditMain(context.Background(), append(args, "--bootstrap-server", "127.0.0.1:1"), &out, &errOut, nil)
		if code != 2 || !strings.HasPrefix(errOut.String(), "samsa audit: ") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut.String())
		}
	}
	var out bytes.Buffer
	if code := auditMain(context.Background(), []string{"-h"}, &out, io.Discard, nil); code != 0 || !strings.Contains(out.String(), "--metrics-listen") {
		t.Errorf("-h: exit %d, %q", code, out.String())
	}
}

// auditProc is a `samsa audit` child process.
type auditProc struct {
	cmd         *exec.Cmd
	out, errOut syncBuffer
	done        chan struct{}
	err         error
}

func startAudit(t *testing.T, args ...string) *auditProc {
	t.Helper()
	p := &auditProc{cmd: exec.Command(samsaBin(t), append([]string{"audit"}, args...)...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errOut
	p.cmd.SysProcAttr = childSysProcAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("samsa audit %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), p.out.String(), p.errOut.String())
		}
	})
	return p
}

// wait returns the exit status and stdout once the process ends (d at most).
func (p *auditProc) wait(t *testing.T, d time.Duration) (int, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("samsa audit still running after %v", d)
	}
	if p.err != nil {
		if ee, ok := p.err.(*exec.ExitError); ok {
			return ee.ExitCode(), p.out.String()
		}
		t.Fatal(p.err)
	}
	return 0, p.out.String()
}

// finalVerdict matches the final verdict line; its groups are the counts.
var finalVerdict = regexp.MustCompile(`(?m)^audit: (VALID \(no anomalies\)|ANOMALIES \(([^)]*)\)) over [0-9.hms]+: ` +
	`(\d+) produced, (\d+) acknowledged, (\d+) failed, (\d+) read by the group, (\d+) read read_committed; ` +
	`(\d+) transactions \((\d+) committed, (\d+) aborted, (\d+) unknown\); ` +
	`lost (\d+), duplicated (\d+), reordered (\d+), aborted-read (\d+), phantom (\d+), unseen (\d+); ` +
	`e2e p50 [0-9.]+m?s p99 [0-9.]+m?s max [0-9.]+m?s \(read_committed p99 [0-9.]+m?s\); longest no-ack [0-9.]+s \(p\d+\)$`)

type verdictCounts struct {
	valid                                          bool
	produced, acked, failed, readGroup, readRC     int
	txns, committed, aborted, unknown              int
	lost, duplicated, reordered, abortedRead, phan int
	unseen                                         int
}

func parseVerdict(t *testing.T, out string) verdictCounts {
	t.Helper()
	m := finalVerdict.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no final verdict line in:\n%s", out)
	}
	n := make([]int, 0, 16)
	for _, s := range m[3:] {
		v, _ := strconv.Atoi(s)
		n = append(n, v)
	}
	return verdictCounts{valid: strings.HasPrefix(m[1], "VALID"),
		produced: n[0], acked: n[1], failed: n[2], readGroup: n[3], readRC: n[4],
		txns: n[5], committed: n[6], aborted: n[7], unknown: n[8],
		lost: n[9], duplicated: n[10], reordered: n[11], abortedRead: n[12], phan: n[13], unseen: n[14]}
}

// checkClean checks a VALID run's counts: every record acknowledged and read by the
// group; read_committed read all but the aborted transactions' records.
func checkClean(t *testing.T, v verdictCounts, partitions int) {
	t.Helper()
	if !v.valid || v.produced == 0 || v.acked != v.produced || v.failed != 0 || v.readGroup < v.acked ||
		v.committed == 0 || v.aborted == 0 || v.unknown != 0 || v.readRC != v.acked-partitions*v.aborted {
		t.Fatalf("counts %+v", v)
	}
}

// TestProcAuditSingleNode: a few seconds of audit against one real node: exit 0, a
// VALID verdict, the periodic lines, and the metrics while it runs.
func TestProcAuditSingleNode(t *testing.T) {
	c := startProcCluster(t, specWith(combined(1), map[string]string{"group.initial.rebalance.delay.ms": "0"}))
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p := startAudit(t, "--bootstrap-server", c.Bootstrap(), "--duration", "5s", "--report-interval", "2s", "--metrics-listen", metricsAddr)
	eventually(t, 30*time.Second, "acknowledged records in the metrics", func() error {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		for _, name := range []string{
			`samsa_audit_records_produced_total{producer="idempotent"}`,
			`samsa_audit_records_read_total{reader="read_committed"}`,
			`samsa_audit_anomalies_total{kind="duplicated"} 0`,
			`samsa_audit_anomalies_total{kind="lost"} 0`,
			`samsa_audit_unseen_records 0`,
			`samsa_audit_longest_no_ack_seconds{partition="2"}`,
			`samsa_audit_e2e_latency_seconds_bucket{reader="group",le=`,
			`samsa_audit_produce_latency_seconds_count{producer="transactional"}`,
			`samsa_audit_valid 1`,
		} {
			if !bytes.Contains(body, []byte(name)) {
				return fmt.Errorf("no %s in:\n%s", name, body)
			}
		}
		if regexp.MustCompile(`(?m)^samsa_audit_records_acknowledged_total\{producer="idempotent"\} [1-9]`).Find(body) == nil {
			return fmt.Errorf("nothing acknowledged yet")
		}
		return nil
	})
	code, out := p.wait(t, 90*time.Second)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "partitions, replication factor 1 (created)") || !strings.Contains(out, "audit: VALID (no anomalies) in the first 2s: ") {
		t.Fatalf("no set-up or periodic line:\n%s", out)
	}
	checkClean(t, parseVerdict(t, out), 3)
}

// TestProcAuditKfake: the control, against franz-go's kfake (three brokers, so
// replication factor 3), stopped by SIGTERM instead of --duration: exit 0, VALID.
func TestProcAuditKfake(t *testing.T) {
	kc, err := kfake.NewCluster()
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	p := startAudit(t, "--bootstrap-server", strings.Join(kc.ListenAddrs(), ","), "--report-interval", "1s", "--rate", "5")
	// A few seconds of audit with records read, then SIGTERM.
	read := regexp.MustCompile(`(?m)^audit: VALID \(no anomalies\) in the first [4-9]s: \d+ produced, [1-9]\d* acknowledged, 0 failed, [1-9]\d* read by the group`)
	eventually(t, 40*time.Second, "a periodic verdict after 4 s with records read", func() error {
		if read.FindString(p.out.String()) == "" {
			return fmt.Errorf("not yet:\n%s", p.out.String())
		}
		return nil
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, out := p.wait(t, 60*time.Second)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "partitions, replication factor 3 (created)") {
		t.Fatalf("no set-up line:\n%s", out)
	}
	checkClean(t, parseVerdict(t, out), 3)
}

// TestProcAuditCatchesDuplicate: while the audit runs, the test reads one of its
// idempotent producer's records and writes it again to the same partition (the same
// producer and sequence at a new offset): exit 1, duplicated 1, nothing else.
func TestProcAuditCatchesDuplicate(t *testing.T) {
	c := startProcCluster(t, specWith(combined(1), map[string]string{"group.initial.rebalance.delay.ms": "0"}))
	const topic = "dup-canary"
	p := startAudit(t, "--bootstrap-server", c.Bootstrap(), "--duration", "8s", "--topic", topic)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := client(t, c.Bootstrap(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var orig *kgo.Record
	var v audit.Value
	for orig == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no record of the idempotent producer read: %v", ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if d, err := audit.DecodeValue(r.Value); err == nil && d.Producer == audit.Idempotent && orig == nil {
				orig, v = r, d
			}
		})
	}
	prod := client(t, c.Bootstrap(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	res := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: orig.Partition, Value: orig.Value})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	copyAt := res[0].Record.Offset
	t.Logf("%q at p%d offset %d written again at offset %d", orig.Value, orig.Partition, orig.Offset, copyAt)

	code, out := p.wait(t, 90*time.Second)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	got := parseVerdict(t, out)
	if got.valid || got.duplicated != 1 || got.lost != 0 || got.reordered != 0 || got.abortedRead != 0 || got.phan != 0 || got.unseen != 0 {
		t.Fatalf("counts %+v, want duplicated 1 and nothing else", got)
	}
	if !strings.Contains(out, "audit: ANOMALIES (duplicated 1) over ") {
		t.Fatalf("verdict:\n%s", out)
	}
	line := fmt.Sprintf("audit: duplicated: p%d@%d i/%d (idempotent producer) at ", orig.Partition, copyAt, v.Seq)
	if !strings.Contains(out, line) {
		t.Fatalf("no line %q in:\n%s", line, out)
	}
}
