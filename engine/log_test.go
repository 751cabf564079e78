package engine

import (
	"testing"
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
