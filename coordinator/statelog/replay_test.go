package statelog

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"

	"github.com/samsa-broker/samsa/engine"
)

// replayLog is an engine log of n batches of one record each, value "v<i>".
func replayLog(tb testing.TB, n int) *engine.Log {
	tb.Helper()
	eng, err := engine.Open(engine.Options{Dirs: []string{tb.TempDir()}, Sync: engine.SyncNone,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { eng.Close() })
	l, err := eng.CreateLog(engine.TopicPartition{Topic: "__state", Partition: 0}, engine.DefaultLogConfig())
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		b, err := engine.AppendRecords(nil, []engine.Record{{Timestamp: 1, Value: fmt.Appendf(nil, "v%d", i)}})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := l.Append(b, engine.AppendOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	return l
}

// TestReplayRangeReadsEveryRecordOnce: a replay in steps (as a replica that
// keeps up does) hands every record of the range to decode once, in order,
// and returns where it stopped.
func TestReplayRangeReadsEveryRecordOnce(t *testing.T) {
	l := replayLog(t, 50)
	var got []string
	decode := func(b []byte, from int64) error {
		return engine.ForEachBatch(b, func(_ engine.BatchHeader, batch []byte) error {
			return engine.ForEachRecord(batch, func(r engine.Record) error {
				if r.Offset >= from {
					got = append(got, string(r.Value))
				}
				return nil
			})
		})
	}
	next := int64(0)
	for _, to := range []int64{0, 7, 7, 30, 50} {
		n, err := ReplayRange(l, next, to, decode)
		if err != nil || n != to {
			t.Fatalf("ReplayRange(%d, %d) = %d, %v; want %d", next, to, n, err, to)
		}
		next = n
	}
	if len(got) != 50 {
		t.Fatalf("decoded %d records, want 50", len(got))
	}
	for i, v := range got {
		if v != fmt.Sprintf("v%d", i) {
			t.Fatalf("record %d is %q", i, v)
		}
	}
}

// TestReplayRangeAllocatesWhatItReads: bringing a replica's state up to date
// when nothing or a few records are new allocates nothing or about what it
// reads, never a buffer of ReplayChunk (a tiered broker does it several
// times a second per metadata partition; made and zeroed each time, that
// buffer took a sixth of its CPU at latency-20k).
func TestReplayRangeAllocatesWhatItReads(t *testing.T) {
	l := replayLog(t, 10)
	noop := func([]byte, int64) error { return nil }
	end := l.LogEndOffset()
	if a := testing.AllocsPerRun(100, func() {
		if _, err := ReplayRange(l, end, end, noop); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("a replay with nothing to read made %v allocations", a)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 100
	for range runs {
		if _, err := ReplayRange(l, end-2, end, noop); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > ReplayChunk/16 {
		t.Fatalf("a replay of 2 records allocated %d bytes", per)
	}
}

// BenchmarkReplayRangeTail: the replay of a replica that keeps up, two new
// records at a time.
func BenchmarkReplayRangeTail(b *testing.B) {
	l := replayLog(b, 10)
	noop := func([]byte, int64) error { return nil }
	end := l.LogEndOffset()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReplayRange(l, end-2, end, noop); err != nil {
			b.Fatal(err)
		}
	}
}
