package engine

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// appendDurable appends n small batches, each waited for (a producer waiting
// for its acknowledgement before the next send): small flushes, one each.
func appendDurable(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		r := mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 100}))
		if err := l.WaitDurable(r.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func activeFile(t *testing.T, l *Log) string {
	t.Helper()
	files := segmentFiles(t, l.Dir())
	return files[len(files)-1]
}

// A log of small durable appends is written ahead with zeros; nothing past
// the batches is read; a roll and a clean close cut the files to their data,
// and the log opens clean and whole.
func TestPreallocSmallFlushes(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"pw", 0}
	m := openTest(t, []string{dir}, SyncFsync, nil)
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 1 << 20
	l, err := m.CreateLog(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	appendDurable(t, l, preallocAfter) // the flushes that make it a small-flush log
	if got := fileSize(t, activeFile(t, l)); got != l.Size() {
		t.Fatalf("before %d small flushes: file %d bytes, log %d", preallocAfter, got, l.Size())
	}
	appendDurable(t, l, 20)
	got := fileSize(t, activeFile(t, l))
	if got <= l.Size() {
		t.Fatalf("after small flushes: file %d bytes, log %d: not allocated ahead", got, l.Size())
	}
	if got > l.Size()+preallocMax {
		t.Fatalf("file %d bytes, log %d: more than %d ahead", got, l.Size(), preallocMax)
	}
	data, err := os.ReadFile(activeFile(t, l))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data[l.Size():], []byte{0}); n != len(data)-int(l.Size()) {
		t.Fatalf("past the log's end: %d zeros of %d bytes", n, len(data)-int(l.Size()))
	}
	if hs := readAll(t, l); len(hs) != preallocAfter+20 {
		t.Fatalf("read %d batches", len(hs))
	}
	// Enough to pass the first chunk: the blocks ahead follow the appends.
	first := got
	for i := 0; i < 100 && l.Size() <= first; i++ {
		appendDurable(t, l, 100)
	}
	if got := fileSize(t, activeFile(t, l)); got <= l.Size() || l.Size() <= first {
		t.Fatalf("after the first chunk (%d bytes): file %d bytes, log %d", first, got, l.Size())
	}

	// A roll cuts the old segment to its data.
	old := activeFile(t, l)
	l.appendMu.Lock()
	err = l.rollLocked(l.LogEndOffset())
	l.appendMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fileSize(t, old), l.Size(); got != want {
		t.Fatalf("rolled segment: file %d bytes, data %d", got, want)
	}
	appendDurable(t, l, 10)
	if got := fileSize(t, activeFile(t, l)); got <= l.Size()-fileSize(t, old) {
		t.Fatalf("new segment: file %d bytes: not allocated ahead", got)
	}
	leo, size := l.LogEndOffset(), l.Size()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := fileSize(t, activeFile(t, l)), size-fileSize(t, old); got != want {
		t.Fatalf("after a clean close: active file %d bytes, data %d", got, want)
	}
	m = openTest(t, []string{dir}, SyncFsync, nil)
	defer m.Close()
	if r := m.Recovery(); r.RecoveredLogs != 0 || r.BytesTruncated != 0 || r.PreallocatedBytesCut != 0 {
		t.Fatalf("reopen after a clean close: %+v", r)
	}
	l = m.Log(tp)
	if l.LogEndOffset() != leo || l.Size() != size {
		t.Fatalf("reopened: LEO %d size %d, want %d %d", l.LogEndOffset(), l.Size(), leo, size)
	}
	if hs := readAll(t, l); int64(len(hs)) != leo {
		t.Fatalf("read %d batches, want %d", len(hs), leo)
	}
}

// After a crash the blocks ahead are cut as what they are, not counted as a
// torn tail; every durable batch is there and appends go on.
func TestPreallocCrash(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"pwcrash", 0}
	m := openTest(t, []string{dir}, SyncFsync, nil)
	l, _ := m.CreateLog(tp, DefaultLogConfig())
	appendDurable(t, l, 30)
	leo, size := l.LogEndOffset(), l.Size()
	if fileSize(t, activeFile(t, l)) <= size {
		t.Fatal("not allocated ahead")
	}
	m.abandon()
	m = openTest(t, []string{dir}, SyncFsync, nil)
	defer m.Close()
	r := m.Recovery()
	if r.RecoveredLogs != 1 || r.BytesTruncated != 0 || r.PreallocatedBytesCut == 0 {
		t.Fatalf("recovery: %+v", r)
	}
	l = m.Log(tp)
	if l.LogEndOffset() != leo || l.Size() != size || fileSize(t, activeFile(t, l)) != size {
		t.Fatalf("recovered: LEO %d size %d file %d, want %d %d", l.LogEndOffset(), l.Size(), fileSize(t, activeFile(t, l)), leo, size)
	}
	appendDurable(t, l, 10)
	if hs := readAll(t, l); int64(len(hs)) != leo+10 {
		t.Fatalf("read %d batches", len(hs))
	}

	// The dump of a segment allocated ahead says so, and finds no problem.
	var out strings.Builder
	if err := DumpSegment(&out, activeFile(t, l), DumpOptions{}); err != nil {
		t.Fatalf("dump: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "bytes of zeros (allocated ahead of the appends)") {
		t.Fatalf("dump:\n%s", out.String())
	}
}

// Big flushes, the none policy and NoPrealloc grow the file with the data.
func TestPreallocNotForBigFlushes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		big  bool
	}{
		{"big flushes", Options{Sync: SyncFsync}, true},
		{"none policy", Options{Sync: SyncNone}, false},
		{"off", Options{Sync: SyncFsync, NoPrealloc: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Dirs = []string{t.TempDir()}
			m, err := Open(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			l, _ := m.CreateLog(TopicPartition{"grow", 0}, DefaultLogConfig())
			value := 100
			if tc.big {
				value = preallocSmallSync + 1
			}
			for i := 0; i < 2*preallocAfter; i++ {
				mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: value}))
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if got := fileSize(t, activeFile(t, l)); got != l.Size() {
				t.Fatalf("file %d bytes, log %d", got, l.Size())
			}
		})
	}
}

// checkAhead compares the directory's count of bytes allocated ahead with the logs'.
func checkAhead(t *testing.T, m *Manager) {
	t.Helper()
	for _, d := range m.dirs {
		var sum int64
		for _, l := range m.Logs() {
			if l.ld != d {
				continue
			}
			l.appendMu.Lock()
			if len(l.segs) > 0 {
				act := l.segs[len(l.segs)-1]
				if n := act.preallocated - act.size.Load(); n > 0 {
					sum += n
				}
			}
			l.appendMu.Unlock()
		}
		if got := d.ahead.Load(); got != sum {
			t.Fatalf("%s: %d bytes ahead counted, %d in the logs", d.path, got, sum)
		}
	}
}

// The bytes allocated ahead in a directory stay within its budget: past it, logs
// grow as they go; the count follows appends, truncation, deletion, close.
func TestPreallocDirBudget(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, preallocBudget: 3 * preallocMin})
	if err != nil {
		t.Fatal(err)
	}
	var logs []*Log
	for p := 0; p < 5; p++ {
		l, err := m.CreateLog(TopicPartition{"budget", int32(p)}, DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
		appendDurable(t, l, preallocAfter+1) // the first chunk only
		checkAhead(t, m)
	}
	written := 0
	for _, l := range logs {
		if fileSize(t, activeFile(t, l)) > l.Size() {
			written++
		}
	}
	if written != 3 {
		t.Fatalf("%d logs allocated ahead, want 3 (the budget's)", written)
	}
	if got := m.dirs[0].ahead.Load(); got > 3*preallocMin {
		t.Fatalf("%d bytes ahead, budget %d", got, 3*preallocMin)
	}
	if err := logs[0].TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	checkAhead(t, m)
	if err := logs[1].TruncateTo(0); err != nil { // below the log start: a fresh segment
		t.Fatal(err)
	}
	checkAhead(t, m)
	if err := m.DeleteLog(logs[2].TopicPartition()); err != nil {
		t.Fatal(err)
	}
	checkAhead(t, m)
	// Room again: a log that grew as it went now allocates ahead.
	appendDurable(t, logs[3], 1)
	appendDurable(t, logs[4], 1)
	checkAhead(t, m)
	if fileSize(t, activeFile(t, logs[4])) <= logs[4].Size() {
		t.Fatal("with the budget freed, the last log is still not allocated ahead")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := m.dirs[0].ahead.Load(); got != 0 {
		t.Fatalf("after close: %d bytes ahead", got)
	}
}
