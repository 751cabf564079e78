package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// scrubTestBatch encodes a v2 record batch of one record holding value.
func scrubTestBatch(value []byte) []byte {
	rec := kmsg.Record{Value: value}
	body := rec.AppendTo(nil)
	rec.Length = int32(len(body) - 1) // the zero length's varint is one byte
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{Magic: 2, FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: rec.AppendTo(nil), PartitionLeaderEpoch: -1}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

var scrubTestTPs = []engine.TopicPartition{{Topic: "scrubbed", Partition: 0}, {Topic: "scrubbed", Partition: 1}}

// fillLogs writes n one-record batches to each partition of scrubTestTPs, in 4 KiB
// segments (so the first segments are sealed), and closes the engine cleanly.
func fillLogs(t *testing.T, dir string, n int) {
	t.Helper()
	m, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: engine.SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultLogConfig()
	cfg.SegmentBytes = 4096
	for _, tp := range scrubTestTPs {
		l, err := m.CreateLog(tp, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if _, err := l.Append(scrubTestBatch(fmt.Appendf(nil, "value-%06d-%s", i, strings.Repeat("x", 100))), engine.AppendOptions{LeaderEpoch: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// flipInBatch flips a byte of the record of the batch holding offset in the first
// segment of tp, and returns that batch's offsets.
func flipInBatch(t *testing.T, dir string, tp engine.TopicPartition, offset int64) (int64, int64) {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition), fmt.Sprintf("%020d.log", 0))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for p := 0; p+61 <= len(data); {
		base := int64(binary.BigEndian.Uint64(data[p:]))
		size := 12 + int(binary.BigEndian.Uint32(data[p+8:]))
		last := base + int64(binary.BigEndian.Uint32(data[p+23:]))
		if base <= offset && offset <= last {
			data[p+size-10] ^= 0x20 // in the record's value
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return base, last
		}
		p += size
	}
	t.Fatalf("no batch holds offset %d in %s (%d bytes)", offset, path, len(data))
	return 0, 0
}

func scrubDirs(t *testing.T, dirs ...string) (int, string, string) {
	t.Helper()
	opts, err := scrubOptions("", strings.Join(dirs, ","))
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := scrub(context.Background(), &out, &errOut, opts)
	return code, out.String(), errOut.String()
}

func TestScrubClean(t *testing.T) {
	dir := t.TempDir()
	fillLogs(t, dir, 100)
	code, out, errOut := scrubDirs(t, dir)
	if code != 0 || !strings.Contains(out, "no damage found") || strings.Contains(out, "DAMAGED") {
		t.Fatalf("exit %d, out:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "2 partition log(s)") {
		t.Errorf("the report does not count both logs:\n%s", out)
	}
}

// A flipped byte in a batch of a sealed segment (which the engine's Open does not
// check: only the active segments' tails) is found, named by partition and offsets,
// and makes the exit status 1; the other partition is not reported.
func TestScrubFindsFlippedByte(t *testing.T) {
	dir := t.TempDir()
	fillLogs(t, dir, 100)
	first, last := flipInBatch(t, dir, scrubTestTPs[1], 7)
	code, out, errOut := scrubDirs(t, dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1; out:\n%s\nstderr:\n%s", code, out, errOut)
	}
	want := fmt.Sprintf("offsets %d..%d: segment 0", first, last)
	if !strings.Contains(out, "DAMAGED scrubbed-1: 1 range(s)") || !strings.Contains(out, want) || !strings.Contains(out, "found by scrub") {
		t.Errorf("the report lacks the damaged range (%q):\n%s", want, out)
	}
	if strings.Contains(out, "scrubbed-0") {
		t.Errorf("the intact partition is reported:\n%s", out)
	}
	if !strings.Contains(out, "damage found: 1 range(s) in 1 partition(s), 0 log(s) cut") {
		t.Errorf("no summary line:\n%s", out)
	}
}

// --config reads log.dirs from the node's properties file.
func TestScrubConfigFile(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	fillLogs(t, logs, 60)
	flipInBatch(t, logs, scrubTestTPs[0], 3)
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte("log.dirs="+logs+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := scrubOptions(props, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Dirs) != 1 || opts.Dirs[0] != logs {
		t.Fatalf("dirs %v, want [%s]", opts.Dirs, logs)
	}
	if code := runScrub([]string{"--config", props}); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
}

// A directory in use (the engine holds its lock, as a running broker does), a
// missing one and bad usage are refused with status 2, and nothing is created.
func TestScrubRefuses(t *testing.T) {
	dir := t.TempDir()
	fillLogs(t, dir, 10)
	m, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: engine.SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := scrubDirs(t, dir)
	m.Close()
	if code != 2 || !strings.Contains(errOut, "is the broker stopped?") {
		t.Errorf("a locked directory: exit %d, out:\n%s\nstderr:\n%s", code, out, errOut)
	}
	missing := filepath.Join(dir, "nope")
	if _, err := scrubOptions("", missing); err == nil {
		t.Error("a missing directory is accepted")
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("the missing directory was created")
	}
	for _, args := range [][]string{nil, {"--config", "a", "--log-dirs", "b"}, {"--log-dirs", dir, "extra"}, {"--log-dirs", missing}, {"--bogus"}} {
		if code := runScrub(args); code != 2 {
			t.Errorf("samsa scrub %q: exit %d, want 2", args, code)
		}
	}
}

// A tail torn after a clean shutdown (half a batch appended to the active segment) is
// cut by the engine's Open, as a broker start would: the scrub says so per partition
// and counts it as damage.
func TestScrubReportsCutTail(t *testing.T) {
	dir := t.TempDir()
	fillLogs(t, dir, 60)
	logDir := filepath.Join(dir, "scrubbed-0")
	segs, err := filepath.Glob(filepath.Join(logDir, "*.log"))
	if err != nil || len(segs) < 2 {
		t.Fatalf("segments %v %v", segs, err)
	}
	active := segs[len(segs)-1] // names sort by base offset
	half := scrubTestBatch([]byte("torn"))
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(half[:len(half)/2]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, out, errOut := scrubDirs(t, dir)
	if code != 1 || !strings.Contains(out, "CUT at open after a clean shutdown") || !strings.Contains(out, "scrubbed-0: ") {
		t.Fatalf("exit %d, out:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if code, out, _ := scrubDirs(t, dir); code != 0 {
		t.Errorf("after the cut, a second scrub: exit %d:\n%s", code, out)
	}
}
