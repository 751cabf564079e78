package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// flipByte xors one byte of a file.
func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
}

// batchAt returns the file position and header of the batch holding offset
// in the segment file path.
func batchAt(t *testing.T, path string, offset int64) (int64, BatchHeader) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for p := 0; p+BatchHeaderSize <= len(data); {
		h := parseHeaderUnchecked(data[p:])
		if h.BaseOffset <= offset && offset <= h.LastOffset() {
			return int64(p), h
		}
		p += int(h.Size())
	}
	t.Fatalf("no batch holds %d in %s", offset, path)
	return 0, BatchHeader{}
}

// fillClosed writes n one-record batches to a log of small segments and
// closes the manager cleanly.
func fillClosed(t *testing.T, dir string, tp TopicPartition, n int) string {
	t.Helper()
	m := openTest(t, []string{dir}, SyncNone, nil)
	l, err := m.CreateLog(tp, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 100, baseTs: int64(i)}))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return l.Dir()
}

func openSmall(t *testing.T, dir string, opts Options) *Manager {
	t.Helper()
	opts.Dirs = []string{dir}
	opts.Sync = SyncNone
	opts.DefaultConfig = smallConfig()
	m, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A flipped byte in a sealed segment is found by a scrub; reads of a range
// reaching it fail with ErrCorrupt instead of serving it, reads before and
// after it go on, and a follower-style truncation to the damage clears it.
func TestScrubFindsDamageInSealedSegment(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"sealed", 0}
	pdir := fillClosed(t, dir, tp, 100)
	files := segmentFiles(t, pdir)
	if len(files) < 4 {
		t.Fatalf("%d segments", len(files))
	}
	pos, h := batchAt(t, files[1], 25)
	if pos == 0 {
		pos, h = batchAt(t, files[1], 27)
	}
	flipByte(t, files[1], pos+h.Size()-3) // in the records, under the CRC
	bad := h.BaseOffset

	m := openSmall(t, dir, Options{})
	defer m.Close()
	l := m.Log(tp)
	if ds := l.Damage(); len(ds) != 0 {
		t.Fatalf("damage before any scrub: %v", ds)
	}
	rep, err := m.Scrub(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Damage) != 1 || rep.Damage[0].FirstOffset != bad || rep.Damage[0].LastOffset != bad || rep.Segments != len(files) {
		t.Fatalf("scrub report %+v", rep)
	}
	if first, ok := l.FirstDamagedOffset(); !ok || first != bad {
		t.Fatalf("FirstDamagedOffset %d %v, want %d", first, ok, bad)
	}
	if ds := m.Damaged(); len(ds) != 1 || ds[0].TP != tp || ds[0].FoundBy != foundByScrub {
		t.Fatalf("Damaged %v", ds)
	}
	// A read starting at the damage fails; one starting before it stops short.
	if _, err := l.ReadCopy(bad, 1<<20, 100, true, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read at the damage: %v", err)
	}
	first := h.BaseOffset - 2
	got, err := l.ReadCopy(first, 1<<20, 100, true, nil)
	if err != nil || len(got) == 0 {
		t.Fatalf("read before the damage: %d bytes, %v", len(got), err)
	}
	for p := 0; p < len(got); {
		hh, err := ValidateBatch(got[p:])
		if err != nil || hh.LastOffset() >= bad {
			t.Fatalf("read before the damage served %d..%d: %v", hh.BaseOffset, hh.LastOffset(), err)
		}
		p += int(hh.Size())
	}
	if got, err := l.ReadCopy(bad+1, 1<<20, 100, true, nil); err != nil || len(got) == 0 {
		t.Fatalf("read after the damage: %d bytes %v", len(got), err)
	}
	if st := m.Stats(); st.CorruptBatches != 1 || st.DamagedLogs != 1 || st.ScrubbedBytes == 0 {
		t.Fatalf("stats %+v", st)
	}
	// A second scrub finds it again but records (and counts) it once.
	if rep, _ := m.Scrub(context.Background()); len(rep.Damage) != 1 || len(l.Damage()) != 1 || m.Stats().CorruptBatches != 1 {
		t.Fatalf("second scrub: %+v, %d recorded", rep, len(l.Damage()))
	}
	// Repair as a follower would: truncate to the damage, fetch again.
	if err := l.TruncateTo(bad); err != nil {
		t.Fatal(err)
	}
	if len(l.Damage()) != 0 {
		t.Fatalf("damage after truncating it away: %v", l.Damage())
	}
	r := mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 100}))
	if r.BaseOffset != bad {
		t.Fatalf("append after repair at %d", r.BaseOffset)
	}
	readAll(t, l)
}

// The background scrubber finds the same damage at its rate.
func TestBackgroundScrubber(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"bg", 0}
	pdir := fillClosed(t, dir, tp, 60)
	files := segmentFiles(t, pdir)
	pos, h := batchAt(t, files[0], 3)
	flipByte(t, files[0], pos+BatchHeaderSize+2)
	m := openSmall(t, dir, Options{ScrubBytesPerSecond: 1 << 20, ScrubInterval: time.Hour})
	defer m.Close()
	l := m.Log(tp)
	eventually(t, 10*time.Second, "the scrubber finds the damage", func() bool { return len(l.Damage()) > 0 })
	if d := l.Damage()[0]; d.FirstOffset != h.BaseOffset || d.FoundBy != foundByScrub {
		t.Fatalf("damage %v", d)
	}
	eventually(t, 10*time.Second, "a scrub pass completes", func() bool { return m.Stats().ScrubPasses > 0 })
}

// A flipped byte in the last batch of a cleanly closed segment is found at
// Open, recorded (not cut: the shutdown was clean) and never served.
func TestOpenFindsDamagedLastBatch(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"last", 0}
	pdir := fillClosed(t, dir, tp, 30)
	files := segmentFiles(t, pdir)
	act := files[len(files)-1]
	pos, h := batchAt(t, act, 29)
	flipByte(t, act, pos+h.Size()-1)
	m := openSmall(t, dir, Options{})
	defer m.Close()
	l := m.Log(tp)
	if l.LogEndOffset() != 30 {
		t.Fatalf("LEO %d: the damaged batch was cut", l.LogEndOffset())
	}
	ds := l.Damage()
	if len(ds) != 1 || ds[0].FirstOffset != 29 || ds[0].FoundBy != foundByOpen {
		t.Fatalf("damage %v", ds)
	}
	if rs := m.Recovery(); rs.DamagedBatches != 1 || rs.CleanLogs != 1 || rs.TailBytesVerified == 0 {
		t.Fatalf("recovery %+v", rs)
	}
	if _, err := l.ReadCopy(29, 1<<20, 30, true, nil); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("read of the damaged batch: %v", err)
	}
	if got, err := l.ReadCopy(28, 1<<20, 30, true, nil); err != nil || len(got) == 0 {
		t.Fatalf("read before it: %d %v", len(got), err)
	} else if hh, _ := ValidateBatch(got); hh.LastOffset() != 28 || len(got) != int(hh.Size()) {
		t.Fatalf("read before it served %d bytes up to %d", len(got), hh.LastOffset())
	}
	// Appends go on after it; the damage stays recorded across a clean restart.
	mustAppend(t, l, makeBatch(testBatch{}))
	m.Close()
	m = openSmall(t, dir, Options{})
	if ds := m.Log(tp).Damage(); len(ds) != 1 || ds[0].FirstOffset != 29 {
		t.Fatalf("after restart: %v", ds)
	}
	m.Close()
}

// A torn tail on a cleanly closed segment (cut from outside) is cut back to
// the last whole batch at Open, and says so.
func TestOpenCutsTornTailAfterCleanShutdown(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"torn", 0}
	pdir := fillClosed(t, dir, tp, 30)
	files := segmentFiles(t, pdir)
	act := files[len(files)-1]
	pos, h := batchAt(t, act, 29)
	if err := os.Truncate(act, pos+h.Size()/2); err != nil {
		t.Fatal(err)
	}
	m := openSmall(t, dir, Options{})
	defer m.Close()
	l := m.Log(tp)
	if l.LogEndOffset() != 29 {
		t.Fatalf("LEO %d, want 29", l.LogEndOffset())
	}
	if rs := m.Recovery(); rs.BytesTruncated != h.Size()/2 {
		t.Fatalf("recovery %+v", rs)
	}
	if hs := readAll(t, l); len(hs) != 29 {
		t.Fatalf("%d batches", len(hs))
	}
}

// A deleted index, of the active segment or of a sealed one, is rebuilt.
func TestDeletedIndexIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"noidx", 0}
	pdir := fillClosed(t, dir, tp, 100)
	files := segmentFiles(t, pdir)
	idx := func(f, suf string) string { return f[:len(f)-len(logSuffix)] + suf }
	for _, f := range []string{files[1], files[len(files)-1]} {
		if err := os.Remove(idx(f, indexSuffix)); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(idx(f, timeIndexSuffix)); err != nil {
			t.Fatal(err)
		}
	}
	m := openSmall(t, dir, Options{})
	l := m.Log(tp)
	if rs := m.Recovery(); rs.IndexesRebuilt != 1 {
		t.Fatalf("recovery %+v: the active segment's index was not rebuilt", rs)
	}
	for off := int64(0); off < 100; off++ {
		got, err := l.ReadCopy(off, 1, 100, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if h, err := ValidateBatch(got); err != nil || h.BaseOffset != off {
			t.Fatalf("offset %d: batch %d: %v", off, h.BaseOffset, err)
		}
		if o, _, ok, err := l.OffsetForTimestamp(off); err != nil || !ok || o != off {
			t.Fatalf("OffsetForTimestamp(%d) = %d %v %v", off, o, ok, err)
		}
	}
	if st := m.Stats(); st.IndexRebuilds < 2 {
		t.Fatalf("stats %+v: the sealed segment's index was not rebuilt", st)
	}
	m.Close()
	for _, f := range []string{files[1], files[len(files)-1]} {
		if fi, err := os.Stat(idx(f, indexSuffix)); err != nil || fi.Size() == 0 {
			t.Fatalf("index of %s after close: %v", filepath.Base(f), err)
		}
	}
}

// A batch whose framing is broken (its length field) in a sealed segment is
// found by the read that reaches it and recorded.
func TestReadFindsBrokenFraming(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"frame", 0}
	pdir := fillClosed(t, dir, tp, 60)
	files := segmentFiles(t, pdir)
	pos, _ := batchAt(t, files[1], 24)
	// The magic byte: the header no longer parses.
	flipByte(t, files[1], pos+offMagic)
	m := openSmall(t, dir, Options{})
	defer m.Close()
	l := m.Log(tp)
	var err error
	for off := int64(0); off < 60 && err == nil; off++ {
		_, err = l.ReadCopy(off, 1, 60, true, nil)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("reads over broken framing: %v", err)
	}
	ds := l.Damage()
	if len(ds) != 1 || ds[0].FoundBy != foundByRead || ds[0].Segment != parseBaseOf(t, files[1]) {
		t.Fatalf("damage %v", ds)
	}
}

func parseBaseOf(t *testing.T, path string) int64 {
	b, ok := parseBase(filepath.Base(path), logSuffix)
	if !ok {
		t.Fatal(path)
	}
	return b
}

// A flipped byte in the lastOffsetDelta of a batch near the tail of a cleanly
// closed segment (the CRC covers it) damages that batch only: Open records it,
// keeps the intact batches after it and their offsets, and serves them.
func TestOpenKeepsBatchesAfterDamagedOffsets(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"offs", 0}
	pdir := fillClosed(t, dir, tp, 30)
	files := segmentFiles(t, pdir)
	act := files[len(files)-1]
	pos, h := batchAt(t, act, 27)
	if h.BaseOffset != 27 || h.LastOffset() != 27 {
		t.Fatalf("batch %d..%d", h.BaseOffset, h.LastOffset())
	}
	// lastOffsetDelta is at byte 23 of the header (big-endian int32): its high bits
	// turn 0 into a large delta.
	flipByte(t, act, pos+24)
	m := openSmall(t, dir, Options{})
	defer m.Close()
	l := m.Log(tp)
	if l.LogEndOffset() != 30 {
		t.Fatalf("LEO %d, want 30: the batches after the damaged one were cut", l.LogEndOffset())
	}
	ds := l.Damage()
	if len(ds) != 1 || ds[0].FirstOffset != 27 || ds[0].LastOffset != 27 || ds[0].FoundBy != foundByOpen {
		t.Fatalf("damage %+v", ds)
	}
	if _, err := l.ReadCopy(27, 1<<20, 30, true, nil); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("read of the damaged batch: %v", err)
	}
	for _, off := range []int64{28, 29} {
		got, err := l.ReadCopy(off, 1<<20, 30, true, nil)
		if err != nil || len(got) == 0 {
			t.Fatalf("read at %d after the damage: %d bytes, %v", off, len(got), err)
		}
		if hh, err := ValidateBatch(got); err != nil || hh.BaseOffset != off {
			t.Fatalf("read at %d served batch %d: %v", off, hh.BaseOffset, err)
		}
	}
	// A scrub finds the same single range.
	rep, err := l.Scrub(context.Background())
	if err != nil || len(rep.Damage) != 1 || rep.Damage[0].FirstOffset != 27 || rep.Damage[0].LastOffset != 27 {
		t.Fatalf("scrub: %+v %v", rep.Damage, err)
	}
	// Appends continue after the log end.
	mustAppend(t, l, makeBatch(testBatch{}))
	if l.LogEndOffset() != 31 {
		t.Fatalf("LEO %d after an append", l.LogEndOffset())
	}
}
