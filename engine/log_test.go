package engine

import (
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAppendReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	tp := TopicPartition{"t", 0}
	l, err := m.CreateLog(tp, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for i := 0; i < 100; i++ {
		r := mustAppend(t, l, makeBatch(testBatch{records: 3, valueSize: 100, baseTs: 1000 + int64(i)}))
		if r.BaseOffset != want || r.LastOffset != want+2 {
			t.Fatalf("append %d: got %d..%d want %d..", i, r.BaseOffset, r.LastOffset, want)
		}
		want += 3
	}
	if l.LogEndOffset() != 300 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	hs := readAll(t, l)
	if len(hs) != 100 {
		t.Fatalf("read %d batches", len(hs))
	}
	// Read in the middle of a batch returns the batch holding the offset.
	s, err := l.Read(151, 1, 300, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	buf := make([]byte, s.Size)
	s.File.ReadAt(buf, s.Pos)
	h, err := ValidateBatch(buf)
	if err != nil || h.BaseOffset != 150 || int64(s.Size) != h.Size() {
		t.Fatalf("read 151: %+v %v size %d", h, err, s.Size)
	}
	// upTo bounds.
	got, err := l.ReadCopy(0, 1<<20, 6, true, nil)
	if err != nil || len(got) != 2*len(buf) {
		t.Fatalf("upTo 6: %d bytes, %v", len(got), err)
	}
	if _, err := l.Read(301, 100, 400, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past LEO: %v", err)
	}
	if s, err := l.Read(300, 100, 400, true); err != nil || s.Size != 0 {
		t.Fatalf("read at LEO: %v %d", err, s.Size)
	}
}

func smallConfig() LogConfig {
	c := DefaultLogConfig()
	c.SegmentBytes = 4096
	c.IndexIntervalBytes = 256
	c.SegmentIndexBytes = 1 << 12
	c.FileDeleteDelayMs = 0
	return c
}

func segmentCount(l *Log) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

func TestRollIndexAndReopen(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	tp := TopicPartition{"roll", 3}
	l, err := m.CreateLog(tp, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 50, baseTs: int64(1000 + i*10), tsStep: 1}))
	}
	if n := segmentCount(l); n < 8 {
		t.Fatalf("%d segments after 200 appends of ~180 bytes into 4 KiB segments", n)
	}
	// Every offset reads back the batch holding it, through the index.
	for off := int64(0); off < 400; off += 7 {
		got, err := l.ReadCopy(off, 1, 400, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ValidateBatch(got)
		if err != nil || h.BaseOffset > off || h.LastOffset() < off {
			t.Fatalf("offset %d: batch %d..%d %v", off, h.BaseOffset, h.LastOffset(), err)
		}
	}
	off, ts, ok, err := l.OffsetForTimestamp(1000 + 55*10 + 1)
	if err != nil || !ok || off != 111 || ts != 1551 {
		t.Fatalf("OffsetForTimestamp: %d %d %v %v", off, ts, ok, err)
	}
	if _, _, ok, _ := l.OffsetForTimestamp(1 << 50); ok {
		t.Fatalf("found a timestamp after the last")
	}
	mts, moff := l.MaxTimestamp()
	if mts != 1000+199*10+1 || moff != 399 {
		t.Fatalf("MaxTimestamp %d at %d", mts, moff)
	}
	l.SetHighWatermark(1000)
	if l.HighWatermark() != 400 {
		t.Fatalf("HW not clamped: %d", l.HighWatermark())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	l = m.Log(tp)
	if l == nil {
		t.Fatal("log not found after restart")
	}
	if l.LogEndOffset() != 400 || l.HighWatermark() != 400 || l.RecoveryPoint() != 400 {
		t.Fatalf("after restart LEO %d HW %d RP %d", l.LogEndOffset(), l.HighWatermark(), l.RecoveryPoint())
	}
	if hs := readAll(t, l); len(hs) != 200 {
		t.Fatalf("%d batches after restart", len(hs))
	}
	r := mustAppend(t, l, makeBatch(testBatch{records: 1}))
	if r.BaseOffset != 400 {
		t.Fatalf("append after restart at %d", r.BaseOffset)
	}
}

func TestAppendRejectsAndLeavesLogUnchanged(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.MaxMessageBytes = 500
	l, _ := m.CreateLog(TopicPartition{"rej", 0}, cfg)
	mustAppend(t, l, makeBatch(testBatch{records: 1}))
	good := makeBatch(testBatch{records: 1})
	bad := makeBatch(testBatch{records: 1})
	bad[len(bad)-1] ^= 0xFF
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"crc":       {append(append([]byte(nil), good...), bad...), ErrCorruptBatch},
		"too large": {makeBatch(testBatch{records: 10, valueSize: 100}), ErrBatchTooLarge},
		"empty":     {nil, ErrCorruptBatch},
		"trailing":  {append(append([]byte(nil), good...), 1, 2, 3), ErrCorruptBatch},
		"magic":     {func() []byte { b := makeBatch(testBatch{}); b[offMagic] = 1; return b }(), ErrUnsupportedMagic},
	} {
		if _, err := l.Append(tc.b, AppendOptions{}); !isErr(err, tc.want) {
			t.Errorf("%s: got %v want %v", name, err, tc.want)
		}
	}
	if l.LogEndOffset() != 1 || len(readAll(t, l)) != 1 {
		t.Fatalf("log changed: LEO %d", l.LogEndOffset())
	}
	// Multi-batch append.
	two := append(makeBatch(testBatch{records: 2}), makeBatch(testBatch{records: 3})...)
	r, err := l.Append(two, AppendOptions{LeaderEpoch: 4})
	if err != nil || r.BaseOffset != 1 || r.LastOffset != 5 {
		t.Fatalf("multi-batch: %+v %v", r, err)
	}
	if l.LatestEpoch() != 4 {
		t.Fatalf("latest epoch %d", l.LatestEpoch())
	}
}

func TestLogAppendTime(t *testing.T) {
	clk := newFakeClock(1_700_000_000_000)
	m := openTest(t, []string{t.TempDir()}, SyncNone, clk)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.TimestampType = LogAppendTime
	l, _ := m.CreateLog(TopicPartition{"lat", 0}, cfg)
	r := mustAppend(t, l, makeBatch(testBatch{records: 2, baseTs: 5}))
	if r.LogAppendTime != 1_700_000_000_000 {
		t.Fatalf("LogAppendTime %d", r.LogAppendTime)
	}
	hs := readAll(t, l) // checks the rewritten CRC
	if !hs[0].LogAppendTimeType() || hs[0].MaxTimestamp != 1_700_000_000_000 {
		t.Fatalf("header %+v", hs[0])
	}
}

func TestProducerState(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	tp := TopicPartition{"idem", 0}
	l, _ := m.CreateLog(tp, smallConfig())
	pb := func(epoch int16, seq int32, n int) []byte {
		return makeBatch(testBatch{records: n, pid: 42, epoch: epoch, seq: seq})
	}
	mustAppend(t, l, makeBatch(testBatch{records: 1})) // offset 0, non-idempotent
	r1 := mustAppend(t, l, pb(0, 0, 3))                // 1..3
	r2 := mustAppend(t, l, pb(0, 3, 2))                // 4..5
	d, err := l.Append(pb(0, 0, 3), AppendOptions{})
	if err != nil || !d.Duplicate || d.BaseOffset != r1.BaseOffset || d.LastOffset != r1.LastOffset {
		t.Fatalf("duplicate: %+v %v", d, err)
	}
	if _, err := l.Append(pb(0, 9, 1), AppendOptions{}); !isErr(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	if _, err := l.Append(pb(1, 5, 1), AppendOptions{}); !isErr(err, ErrOutOfOrderSequence) {
		t.Fatalf("new epoch not at 0: %v", err)
	}
	mustAppend(t, l, pb(1, 0, 1)) // 6
	if _, err := l.Append(pb(0, 5, 1), AppendOptions{}); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("fenced epoch: %v", err)
	}
	// Unknown producer at any sequence is accepted (documented choice).
	mustAppend(t, l, makeBatch(testBatch{records: 1, pid: 77, epoch: 0, seq: 1000}))
	if e, s, ok := l.ProducerState(42); !ok || e != 1 || s != 0 {
		t.Fatalf("state %d %d %v", e, s, ok)
	}
	if l.LogEndOffset() != 8 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	_ = r2
	// After a clean restart (snapshot) and after a crash (replay), state survives.
	m.Close()
	for _, crash := range []bool{false, true} {
		m = openTest(t, []string{dir}, SyncNone, nil)
		l = m.Log(tp)
		if e, s, ok := l.ProducerState(42); !ok || e != 1 || s != 0 {
			t.Fatalf("crash=%v: state %d %d %v", crash, e, s, ok)
		}
		d, err := l.Append(pb(1, 0, 1), AppendOptions{})
		if err != nil || !d.Duplicate || d.BaseOffset != 6 {
			t.Fatalf("crash=%v: duplicate after restart: %+v %v", crash, d, err)
		}
		m.abandon() // the next round opens after a crash
	}
}

func TestRetention(t *testing.T) {
	clk := newFakeClock(1_000_000)
	m := openTest(t, []string{t.TempDir()}, SyncNone, clk)
	defer m.Close()
	cfg := smallConfig()
	cfg.RetentionMs = 10_000
	l, _ := m.CreateLog(TopicPartition{"ret", 0}, cfg)
	for i := 0; i < 100; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 200, baseTs: clk.now().UnixMilli()}))
		clk.advance(100)
	}
	l.SetHighWatermark(l.LogEndOffset())
	segsBefore := segmentCount(l)
	// Nothing is older than 10 s yet.
	if n := m.EnforceRetention(); n != 0 {
		t.Fatalf("deleted %d segments too early", n)
	}
	clk.advance(10_000 - 5_000) // the first half of the batches expire
	n := m.EnforceRetention()
	if n == 0 || segmentCount(l) != segsBefore-n {
		t.Fatalf("time retention deleted %d of %d", n, segsBefore)
	}
	ls := l.LogStartOffset()
	if ls < 30 || ls > 60 {
		t.Fatalf("log start %d after time retention", ls)
	}
	if _, err := l.Read(ls-1, 100, 100, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	// Size retention.
	cfg.RetentionMs = -1
	cfg.RetentionBytes = 3 * 4096
	l.SetConfig(cfg)
	m.EnforceRetention()
	if l.Size() > 3*4096+4096 || l.Size() < 3*4096-4096 {
		t.Fatalf("size %d after size retention", l.Size())
	}
	// DeleteRecords.
	ls, err := l.DeleteRecordsBefore(90)
	if err != nil || ls != 90 || l.LogStartOffset() != 90 {
		t.Fatalf("DeleteRecordsBefore: %d %v", ls, err)
	}
	if _, err := l.DeleteRecordsBefore(1000); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecordsBefore past HW: %v", err)
	}
	if hs := readAll(t, l); hs[0].BaseOffset != 90 || len(hs) != 10 {
		t.Fatalf("after DeleteRecords: first %d, %d batches", hs[0].BaseOffset, len(hs))
	}
	// Everything expires, including the active segment (rolled first).
	cfg.RetentionMs = 1
	l.SetConfig(cfg)
	clk.advance(100_000)
	m.EnforceRetention()
	if l.LogStartOffset() != 100 || l.LogEndOffset() != 100 || l.Size() != 0 {
		t.Fatalf("after full expiry: start %d end %d size %d", l.LogStartOffset(), l.LogEndOffset(), l.Size())
	}
	if r := mustAppend(t, l, makeBatch(testBatch{records: 1})); r.BaseOffset != 100 {
		t.Fatalf("append after expiry at %d", r.BaseOffset)
	}
}

func TestPinnedSegmentSurvivesDeletion(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"pin", 0}, smallConfig())
	for i := 0; i < 60; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 200}))
	}
	l.SetHighWatermark(60)
	s, err := l.Read(0, 1<<20, 60, true)
	if err != nil || s.Size == 0 {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecordsBefore(59); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, s.Size)
	if _, err := s.File.ReadAt(buf, s.Pos); err != nil {
		t.Fatalf("pinned slice unreadable after deletion: %v", err)
	}
	if _, err := ValidateBatch(buf); err != nil {
		t.Fatal(err)
	}
	s.Release()
	s.Release()
	// The flusher may hold the last pin for a moment (it syncs the segments
	// above the recovery point); the files go with it.
	eventually(t, 10*time.Second, "deleted segment files removed after the last release", func() bool {
		ents, _ := os.ReadDir(l.Dir())
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), deletedSuffix) {
				return false
			}
		}
		return true
	})
}

func TestTruncation(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	tp := TopicPartition{"trunc", 1}
	l, _ := m.CreateLog(tp, smallConfig())
	for i := 0; i < 100; i++ {
		ep := int32(1)
		if i >= 50 {
			ep = 2
		}
		if _, err := l.Append(makeBatch(testBatch{records: 2, valueSize: 100, pid: 9, epoch: 0, seq: int32(2 * i)}), AppendOptions{LeaderEpoch: ep}); err != nil {
			t.Fatal(err)
		}
	}
	if e, off := l.EndOffsetForEpoch(1); e != 1 || off != 100 {
		t.Fatalf("EndOffsetForEpoch(1) = %d, %d", e, off)
	}
	if e, off := l.EndOffsetForEpoch(2); e != 2 || off != 200 {
		t.Fatalf("EndOffsetForEpoch(2) = %d, %d", e, off)
	}
	if e, off := l.EndOffsetForEpoch(0); e != 0 || off != 0 {
		t.Fatalf("EndOffsetForEpoch(0) = %d, %d", e, off)
	}
	if e, off := l.EndOffsetForEpoch(3); e != -1 || off != -1 {
		t.Fatalf("EndOffsetForEpoch(3) = %d, %d", e, off)
	}
	l.SetHighWatermark(150)
	// Truncate inside a batch: the whole batch goes.
	if err := l.TruncateTo(121); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 120 || l.HighWatermark() != 120 {
		t.Fatalf("after TruncateTo(121): LEO %d HW %d", l.LogEndOffset(), l.HighWatermark())
	}
	if hs := readAll(t, l); len(hs) != 60 || hs[59].LastOffset() != 119 {
		t.Fatalf("after truncation: %d batches", len(hs))
	}
	if err := l.TruncateTo(90); err != nil {
		t.Fatal(err)
	}
	if l.LatestEpoch() != 1 {
		t.Fatalf("epoch after truncating epoch 2 away: %d", l.LatestEpoch())
	}
	if e, s, ok := l.ProducerState(9); !ok || e != 0 || s != 89 {
		t.Fatalf("producer state after truncation: %d %d %v", e, s, ok)
	}
	r := mustAppend(t, l, makeBatch(testBatch{records: 2, pid: 9, epoch: 0, seq: 90}))
	if r.BaseOffset != 90 {
		t.Fatalf("append after truncation at %d", r.BaseOffset)
	}
	// Follower append keeps offsets.
	fb := makeBatch(testBatch{records: 3})
	stampBatch(fb, 100, 7)
	if r, err := l.Append(fb, AppendOptions{Follower: true}); err != nil || r.BaseOffset != 100 || l.LogEndOffset() != 103 {
		t.Fatalf("follower append: %+v %v", r, err)
	}
	if l.LatestEpoch() != 7 {
		t.Fatalf("follower epoch %d", l.LatestEpoch())
	}
	stampBatch(fb, 50, 7)
	if _, err := l.Append(fb, AppendOptions{Follower: true}); !isErr(err, ErrUnexpectedAppendOffset) {
		t.Fatalf("follower append below LEO: %v", err)
	}
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 500 || l.LogEndOffset() != 500 || l.Size() != 0 || l.LatestEpoch() != -1 {
		t.Fatalf("after TruncateFully: %d %d %d", l.LogStartOffset(), l.LogEndOffset(), l.Size())
	}
	if r := mustAppend(t, l, makeBatch(testBatch{records: 1})); r.BaseOffset != 500 {
		t.Fatalf("append after TruncateFully at %d", r.BaseOffset)
	}
	m.Close()
	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	l = m.Log(tp)
	if l.LogStartOffset() != 500 || l.LogEndOffset() != 501 || l.LatestEpoch() != 1 {
		t.Fatalf("after restart: start %d end %d epoch %d", l.LogStartOffset(), l.LogEndOffset(), l.LatestEpoch())
	}
}

func TestManagerDirsAndDelete(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	m := openTest(t, []string{d1, d2}, SyncNone, nil)
	for p := int32(0); p < 4; p++ {
		l, err := m.CreateLog(TopicPartition{"spread", p}, DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, makeBatch(testBatch{records: 1}))
	}
	st := m.DirStats()
	if len(st) != 2 || len(st[0].Logs) != 2 || len(st[1].Logs) != 2 {
		t.Fatalf("DirStats %+v", st)
	}
	if st[0].TotalBytes <= 0 || st[0].UsableBytes <= 0 || st[0].UsableBytes > st[0].TotalBytes {
		t.Fatalf("disk space %d/%d", st[0].UsableBytes, st[0].TotalBytes)
	}
	if st[0].Logs[0].Size == 0 || st[0].Logs[0].OffsetLag != 1 {
		t.Fatalf("LogStat %+v", st[0].Logs[0])
	}
	if _, err := m.CreateLog(TopicPartition{"../x", 0}, DefaultLogConfig()); !isErr(err, ErrInvalidConfig) {
		t.Fatalf("bad topic: %v", err)
	}
	tp := TopicPartition{"spread", 1}
	dir := m.Log(tp).Dir()
	if err := m.DeleteLog(tp); err != nil {
		t.Fatal(err)
	}
	if m.Log(tp) != nil || len(m.Logs()) != 3 {
		t.Fatal("log still listed")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("log dir still there: %v", err)
	}
	if err := m.DeleteLog(tp); !isErr(err, ErrNoLog) {
		t.Fatalf("second delete: %v", err)
	}
	m.Close()
	m = openTest(t, []string{d1, d2}, SyncNone, nil)
	defer m.Close()
	if len(m.Logs()) != 3 || m.Log(tp) != nil {
		t.Fatalf("%d logs after restart", len(m.Logs()))
	}
	if _, err := m.Logs()[0].Append(makeBatch(testBatch{}), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestWaitDurableGroupCommit(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncFsync, nil)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"dur", 0}, DefaultLogConfig())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				r, err := l.Append(makeBatch(testBatch{records: 1, valueSize: 100}), AppendOptions{})
				if err == nil {
					err = l.WaitDurable(r.LastOffset)
				}
				if err == nil && l.RecoveryPoint() <= r.LastOffset {
					err = fmt.Errorf("recovery point %d not past %d", l.RecoveryPoint(), r.LastOffset)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	l.OnDurable(l.LogEndOffset()-1, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := m.FsyncLatency()
	if st.Count == 0 || st.Count > 320 || st.P50 <= 0 || st.Max < st.P50 {
		t.Fatalf("fsync stats %+v", st)
	}
	t.Logf("fdatasyncs for 320 durable appends: %d, p50 %v p99 %v", st.Count, st.P50, st.P99)
}

func TestConcurrentAppendRead(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	cfg := smallConfig()
	cfg.SegmentBytes = 64 << 10
	l, _ := m.CreateLog(TopicPartition{"conc", 0}, cfg)
	const writers, per = 4, 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, err := l.Append(makeBatch(testBatch{records: 2, valueSize: 64}), AppendOptions{}); err != nil {
					t.Error(err)
					return
				}
				l.SetHighWatermark(l.LogEndOffset())
			}
		}()
	}
	var rg sync.WaitGroup
	for r := 0; r < 3; r++ {
		rg.Add(1)
		go func() {
			defer rg.Done()
			var buf []byte
			off := int64(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				hw := l.HighWatermark()
				var err error
				buf, err = l.ReadCopy(off, 4096, hw, true, buf[:0])
				if err != nil {
					t.Error(err)
					return
				}
				for p := 0; p < len(buf); {
					h, err := ValidateBatch(buf[p:])
					if err != nil {
						t.Error(err)
						return
					}
					if h.LastOffset() >= hw {
						t.Errorf("read past HW %d: %d", hw, h.LastOffset())
					}
					off = h.LastOffset() + 1
					p += int(h.Size())
				}
				if off >= writers*per*2 {
					off = 0
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	if l.LogEndOffset() != writers*per*2 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	if hs := readAll(t, l); len(hs) != writers*per {
		t.Fatalf("%d batches", len(hs))
	}
}

func TestIntervalPolicyFlushes(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncInterval, FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"iv", 0}, DefaultLogConfig())
	r := mustAppend(t, l, makeBatch(testBatch{records: 4}))
	if err := l.WaitDurable(r.LastOffset); err != nil { // returns at once under interval
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.RecoveryPoint() <= r.LastOffset {
		if time.Now().After(deadline) {
			t.Fatalf("recovery point %d never passed %d", l.RecoveryPoint(), r.LastOffset)
		}
		time.Sleep(time.Millisecond) // poll interval
	}

	// Byte trigger.
	m2, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncInterval, FlushInterval: time.Hour, FlushBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	l2, _ := m2.CreateLog(TopicPartition{"iv", 1}, DefaultLogConfig())
	r = mustAppend(t, l2, makeBatch(testBatch{records: 1, valueSize: 2000}))
	deadline = time.Now().Add(10 * time.Second)
	for l2.RecoveryPoint() <= r.LastOffset {
		if time.Now().After(deadline) {
			t.Fatalf("byte trigger: recovery point %d", l2.RecoveryPoint())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSegmentMsRoll(t *testing.T) {
	clk := newFakeClock(1_000_000)
	m := openTest(t, []string{t.TempDir()}, SyncNone, clk)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.SegmentMs = 60_000
	l, _ := m.CreateLog(TopicPartition{"ms", 0}, cfg)
	mustAppend(t, l, makeBatch(testBatch{}))
	clk.advance(30_000)
	mustAppend(t, l, makeBatch(testBatch{}))
	if segmentCount(l) != 1 {
		t.Fatalf("rolled early")
	}
	clk.advance(31_000)
	mustAppend(t, l, makeBatch(testBatch{}))
	if segmentCount(l) != 2 {
		t.Fatalf("%d segments after segment.ms", segmentCount(l))
	}
	readAll(t, l)
	// A full index also rolls.
	cfg.SegmentIndexBytes = 4 * timeEntrySize
	cfg.IndexIntervalBytes = 0
	l2, _ := m.CreateLog(TopicPartition{"ms", 1}, cfg)
	for i := 0; i < 20; i++ {
		mustAppend(t, l2, makeBatch(testBatch{}))
	}
	// 6 offset-index entries fit: 7 batches per segment.
	if n := segmentCount(l2); n != 3 {
		t.Fatalf("%d segments with a 6-entry offset index", n)
	}
	readAll(t, l2)
}

func TestCloseWithWaitersAndDirLock(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncFsync, nil)
	if _, err := Open(Options{Dirs: []string{dir}}); !isErr(err, ErrInvalidConfig) {
		t.Fatalf("second Open of a locked dir: %v", err)
	}
	l, _ := m.CreateLog(TopicPartition{"cw", 0}, DefaultLogConfig())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := l.Append(makeBatch(testBatch{records: 1}), AppendOptions{})
				if err != nil {
					if !isErr(err, ErrClosed) {
						t.Error(err)
					}
					return
				}
				if err := l.WaitDurable(r.LastOffset); err != nil && !isErr(err, ErrClosed) {
					t.Error(err)
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for l.LogEndOffset() < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d appends in 30 s", l.LogEndOffset())
		}
		time.Sleep(time.Millisecond) // poll interval
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	m = openTest(t, []string{dir}, SyncFsync, nil)
	defer m.Close()
	if hs := readAll(t, m.Log(TopicPartition{"cw", 0})); len(hs) < 50 {
		t.Fatalf("%d batches after close", len(hs))
	}
}

func TestProducerExpiry(t *testing.T) {
	clk := newFakeClock(1_000_000_000)
	m := openTest(t, []string{t.TempDir()}, SyncNone, clk)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"exp", 0}, DefaultLogConfig())
	mustAppend(t, l, makeBatch(testBatch{records: 1, pid: 8, epoch: 0, seq: 0, baseTs: clk.now().UnixMilli()}))
	m.EnforceRetention()
	if _, _, ok := l.ProducerState(8); !ok {
		t.Fatal("producer expired at once")
	}
	clk.advance(producerExpirationMs)
	m.EnforceRetention()
	if _, _, ok := l.ProducerState(8); ok {
		t.Fatal("producer not expired after a day")
	}
}

// TestReadMatchesNaive compares Read (index lookups, index jumps) with a
// plain walk over every batch, for random offsets, byte limits and bounds.
func TestReadMatchesNaive(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 256 << 10
	cfg.IndexIntervalBytes = 1024
	l, _ := m.CreateLog(TopicPartition{"naive", 0}, cfg)
	rng := rand.New(rand.NewSource(7))
	type ref struct {
		h   BatchHeader
		seg int64 // base of its segment
	}
	for i := 0; i < 3000; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1 + rng.Intn(5), valueSize: rng.Intn(700)}))
	}
	var all []ref
	for _, s := range l.pinAll() {
		sc := getScanner(s.log, s.size.Load())
		for pos := int64(0); pos < sc.limit; {
			h, err := sc.header(pos)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, ref{h, s.base})
			pos += h.Size()
		}
		putScanner(sc)
		s.release()
	}
	leo := l.LogEndOffset()
	for trial := 0; trial < 3000; trial++ {
		off := rng.Int63n(leo)
		upTo := off + rng.Int63n(leo-off+1)
		maxBytes := int32(rng.Intn(64 << 10))
		minOne := rng.Intn(2) == 0
		// Naive answer.
		i := sort.Search(len(all), func(i int) bool { return all[i].h.LastOffset() >= off })
		var want int64
		for j := i; j < len(all) && all[j].seg == all[i].seg; j++ {
			h := all[j].h
			if h.LastOffset() >= upTo || (want+h.Size() > int64(maxBytes) && !(want == 0 && minOne)) {
				break
			}
			want += h.Size()
		}
		if off >= upTo {
			want = 0
		}
		s, err := l.Read(off, maxBytes, upTo, minOne)
		if err != nil {
			t.Fatal(err)
		}
		if int64(s.Size) != want {
			t.Fatalf("Read(%d, %d, %d, %v) = %d bytes, want %d", off, maxBytes, upTo, minOne, s.Size, want)
		}
		s.Release()
	}
}

func TestDeleteLogWithPinnedSlice(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	tp := TopicPartition{"dlp", 0}
	l, _ := m.CreateLog(tp, DefaultLogConfig())
	mustAppend(t, l, makeBatch(testBatch{records: 3, valueSize: 50}))
	s, err := l.Read(0, 1<<20, 3, true)
	if err != nil || s.Size == 0 {
		t.Fatal(err)
	}
	if err := m.DeleteLog(tp); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, s.Size)
	if _, err := s.File.ReadAt(buf, s.Pos); err != nil {
		t.Fatalf("pinned slice after DeleteLog: %v", err)
	}
	if _, err := ValidateBatch(buf); err != nil {
		t.Fatal(err)
	}
	s.Release()
	if _, err := l.Append(makeBatch(testBatch{}), AppendOptions{}); !isErr(err, ErrClosed) {
		t.Fatalf("append to a deleted log: %v", err)
	}
	if _, err := l.Read(0, 100, 3, true); !isErr(err, ErrClosed) {
		t.Fatalf("read of a deleted log: %v", err)
	}
}

func TestOffsetForTimestampCompressed(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"comp", 0}, DefaultLogConfig())
	mustAppend(t, l, makeBatch(testBatch{records: 3, baseTs: 100, tsStep: 10}))
	mustAppend(t, l, makeBatch(testBatch{records: 3, baseTs: 200, tsStep: 10, compression: 2}))
	// Uncompressed: the exact record.
	if off, ts, ok, err := l.OffsetForTimestamp(105); err != nil || !ok || off != 1 || ts != 110 {
		t.Fatalf("uncompressed: %d %d %v %v", off, ts, ok, err)
	}
	// Compressed: the batch's base offset and max timestamp.
	if off, ts, ok, err := l.OffsetForTimestamp(215); err != nil || !ok || off != 3 || ts != 220 {
		t.Fatalf("compressed: %d %d %v %v", off, ts, ok, err)
	}
}
