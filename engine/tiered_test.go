package engine

import (
	"errors"
	"os"
	"testing"
)

// A log with remote storage keeps its local segments past
// local.retention.bytes until they are copied, then deletes exactly the
// copied ones; its sealed segments name their files and the producer
// snapshot at their end.
func TestLocalRetentionWaitsForCopies(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	cfg := smallConfig()
	cfg.RemoteStorage = true
	cfg.RetentionBytes = -1
	cfg.LocalRetentionBytes = 0
	l, err := m.CreateLog(TopicPartition{"tiered", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 200, baseTs: 1000 + int64(i)}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	sealed := l.SealedSegments(l.LogEndOffset())
	if len(sealed) < 3 {
		t.Fatalf("%d sealed segments, want at least 3", len(sealed))
	}
	for i, s := range sealed {
		if i > 0 && s.Base != sealed[i-1].Next {
			t.Fatalf("segment %d starts at %d, the one before ends at %d", i, s.Base, sealed[i-1].Next)
		}
		for _, p := range []string{s.Log, s.OffsetIndex, s.TimeIndex, s.ProducerSnapshot} {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("segment %d: %v", s.Base, err)
			}
		}
		if st, _ := os.Stat(s.Log); st.Size() != s.Size {
			t.Fatalf("segment %d: size %d, file %d", s.Base, s.Size, st.Size())
		}
		if s.MaxTimestamp != 1000+s.Next-1 {
			t.Fatalf("segment %d: max timestamp %d, want %d", s.Base, s.MaxTimestamp, 1000+s.Next-1)
		}
	}
	if got := l.SealedSegments(sealed[1].Next - 1); len(got) != 1 {
		t.Fatalf("SealedSegments below %d: %d, want 1", sealed[1].Next-1, len(got))
	}

	// Nothing copied: nothing deleted.
	if n, err := l.EnforceRetention(); err != nil || n != 0 {
		t.Fatalf("retention before any copy deleted %d (%v)", n, err)
	}
	// Two copied: those two go, and the log start follows.
	l.SetRemoteEnd(sealed[1].Next)
	if n, err := l.EnforceRetention(); err != nil || n != 2 {
		t.Fatalf("retention after two copies deleted %d (%v), want 2", n, err)
	}
	if l.LogStartOffset() != sealed[2].Base {
		t.Fatalf("log start %d, want %d", l.LogStartOffset(), sealed[2].Base)
	}
	// Everything copied: every sealed segment goes, never the active one.
	l.SetRemoteEnd(l.LogEndOffset())
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != sealed[len(sealed)-1].Next {
		t.Fatalf("log start %d, want the active segment's base %d", l.LogStartOffset(), sealed[len(sealed)-1].Next)
	}
	if len(l.SealedSegments(l.LogEndOffset())) != 0 {
		t.Fatal("sealed segments left after everything was copied")
	}
}

func TestEpochsIn(t *testing.T) {
	es := []EpochStart{{1, 0}, {3, 10}, {4, 20}}
	got := EpochsIn(es, 5, 15)
	want := []EpochStart{{1, 5}, {3, 10}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("EpochsIn(5, 15) = %v, want %v", got, want)
	}
	if got := EpochsIn(es, 20, 30); len(got) != 1 || got[0] != (EpochStart{4, 20}) {
		t.Fatalf("EpochsIn(20, 30) = %v", got)
	}
	if b := string(EncodeEpochCheckpoint(es[:2])); b != "0\n2\n1 0\n3 10\n" {
		t.Fatalf("checkpoint %q", b)
	}
}

func TestTimestampInBatch(t *testing.T) {
	b := makeBatch(testBatch{records: 5, baseTs: 1000, tsStep: 10})
	for _, c := range []struct{ ts, off, got int64 }{{0, 0, 1000}, {1000, 0, 1000}, {1015, 2, 1020}, {1040, 4, 1040}} {
		off, got, err := TimestampInBatch(b, c.ts)
		if err != nil || off != c.off || got != c.got {
			t.Errorf("TimestampInBatch(%d) = %d, %d, %v; want %d, %d", c.ts, off, got, err, c.off, c.got)
		}
	}
	if _, _, err := TimestampInBatch(b[:len(b)-1], 0); err == nil {
		t.Error("a cut batch answered")
	}
}

// The whole log's start of a tiered log (DeleteRecords below the local
// start) only rises, and survives a restart.
func TestRemoteLogStartPersists(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	tp := TopicPartition{"tiered", 0}
	l, err := m.CreateLog(tp, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l.RemoteLogStart() != 0 {
		t.Fatalf("a new log's remote log start %d", l.RemoteLogStart())
	}
	for _, off := range []int64{40, 25} {
		if err := l.RaiseRemoteLogStart(off); err != nil {
			t.Fatal(err)
		}
	}
	if l.RemoteLogStart() != 40 {
		t.Fatalf("remote log start %d, want 40 (it never falls)", l.RemoteLogStart())
	}
	m.Close()
	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	if got := m.Log(tp).RemoteLogStart(); got != 40 {
		t.Fatalf("after a restart: %d, want 40", got)
	}
}

// remote.log.copy.disable: local segments follow retention.bytes, copied or
// not, and local.retention.bytes no longer applies.
func TestRetentionWithCopyDisabled(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	cfg := smallConfig()
	cfg.RemoteStorage, cfg.RemoteCopyDisable = true, true
	cfg.LocalRetentionBytes = 0
	cfg.RetentionBytes = 8192
	l, err := m.CreateLog(TopicPartition{"frozen", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 200}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() == 0 || l.Size() < cfg.RetentionBytes || len(l.SealedSegments(l.LogEndOffset())) == 0 {
		t.Fatalf("log start %d, %d bytes kept, %d sealed: want retention.bytes (%d), not local.retention.bytes (0), nothing copied",
			l.LogStartOffset(), l.Size(), len(l.SealedSegments(l.LogEndOffset())), cfg.RetentionBytes)
	}
}

// An empty log takes the producer state of another log's snapshot at its
// start: the producers it knows, and a duplicate of their last batch is
// answered as such.
func TestRestoreProducerSnapshot(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	src, err := m.CreateLog(TopicPartition{"src", 0}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	var last []byte
	for i := 0; i < 40; i++ {
		last = makeBatch(testBatch{records: 1, valueSize: 200, pid: 7, epoch: 2, seq: int32(i)})
		mustAppend(t, src, last)
	}
	sealed := src.SealedSegments(src.LogEndOffset())
	if len(sealed) == 0 || sealed[len(sealed)-1].ProducerSnapshot == "" {
		t.Fatalf("no sealed segment with a producer snapshot: %+v", sealed)
	}
	s := sealed[len(sealed)-1]
	snap, err := os.ReadFile(s.ProducerSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := m.CreateLog(TopicPartition{"dst", 0}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.TruncateFullyAndStartAt(s.Next); err != nil {
		t.Fatal(err)
	}
	if err := dst.RestoreProducerSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	epoch, seq, ok := dst.ProducerState(7)
	wantEpoch, wantSeq, _ := src.ProducerState(7)
	if !ok || epoch != wantEpoch || seq > wantSeq || seq < 0 {
		t.Fatalf("restored producer 7: epoch %d, last sequence %d (%v); the source has %d, %d", epoch, seq, ok, wantEpoch, wantSeq)
	}
	mustAppend(t, dst, makeBatch(testBatch{records: 1, valueSize: 200, pid: 7, epoch: 2, seq: seq + 1}))
	if err := dst.RestoreProducerSnapshot(snap); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a restore into a log with records: %v", err)
	}
}
