package engine

import (
	"errors"
	"os"
	"testing"
)

// A new segment's index files are created with its first batch. After a crash
// (the process killed: no flush, no checkpoint, no clean-shutdown marker):
//   - an empty log whose index files were never created opens without creating
//     them or rebuilding anything, and its first append creates them;
//   - a log with batches whose index files are gone (the crash lost their
//     creation) has them rebuilt from the log, as any missing index.
func TestLazyIndexFilesAfterCrash(t *testing.T) {
	dir := t.TempDir()
	idle, full := TopicPartition{"lazy-idle", 0}, TopicPartition{"lazy-full", 0}
	cfg := DefaultLogConfig()
	cfg.IndexIntervalBytes = 64 // an entry per batch after the first
	m := openTest(t, []string{dir}, SyncNone, nil)
	li, err := m.CreateLog(idle, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lf, err := m.CreateLog(full, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ip, tp := activeIndexPaths(li)
	missing := func(what string, paths ...string) {
		t.Helper()
		for _, p := range paths {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s: %s: %v, want no file", what, p, err)
			}
		}
	}
	missing("a new log", ip, tp)
	const n = 40
	for i := range n {
		mustAppend(t, lf, makeBatch(testBatch{records: 1, valueSize: 100, baseTs: int64(1000 + i)}))
	}
	fip, ftp := activeIndexPaths(lf)
	m.abandon()

	// The idle log: recovered (an empty scan), its index files still not created.
	m = openTest(t, []string{dir}, SyncNone, nil)
	if rs := m.Recovery(); rs.RecoveredLogs != 2 {
		t.Fatalf("recovery %+v: want both logs recovered", rs)
	}
	li, lf = m.Log(idle), m.Log(full)
	if li == nil || li.LogEndOffset() != 0 || lf == nil || lf.LogEndOffset() != n {
		t.Fatalf("after the crash: idle %v, full %v", li, lf)
	}
	missing("an idle log after a crash", ip, tp)
	m.abandon()

	// The crash lost the index files of the log with batches.
	for _, p := range []string{fip, ftp} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	li, lf = m.Log(idle), m.Log(full)
	missing("an idle log after a second crash", ip, tp)
	for _, p := range []string{fip, ftp} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Fatalf("rebuilt index %s: %v", p, err)
		}
	}
	for off := int64(0); off < n; off++ {
		got, err := lf.ReadCopy(off, 1, n, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if h, err := ValidateBatch(got); err != nil || h.BaseOffset != off {
			t.Fatalf("offset %d: batch %d: %v", off, h.BaseOffset, err)
		}
		if o, _, ok, err := lf.OffsetForTimestamp(int64(1000) + off); err != nil || !ok || o != off {
			t.Fatalf("OffsetForTimestamp(%d) = %d %v %v", 1000+off, o, ok, err)
		}
	}
	// The idle log's first batches create its index files and use them.
	for i := range n {
		mustAppend(t, li, makeBatch(testBatch{records: 1, valueSize: 100, baseTs: int64(5000 + i)}))
	}
	if fi, err := os.Stat(ip); err != nil || fi.Size() == 0 {
		t.Fatalf("index of the idle log after its appends: %v", err)
	}
	if _, err := os.Stat(tp); err != nil {
		t.Fatal(err)
	}
	if o, _, ok, err := li.OffsetForTimestamp(5000 + n/2); err != nil || !ok || o != n/2 {
		t.Fatalf("OffsetForTimestamp = %d %v %v", o, ok, err)
	}
}
