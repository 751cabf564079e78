package remote

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samsa-broker/samsa/engine"
)

// sealedSegment is the first segment of a log the engine wrote, sealed by
// a roll, with the metadata a leader would give it.
type sealedSegment struct {
	data  LogSegmentData
	files map[string][]byte // the files' contents, by object suffix
	md    SegmentMetadata
}

// writeSegment writes a log through the engine: batches in leader epoch 3,
// a transaction aborted (so the first segment has a transaction index),
// batches in epoch 5, until the first segment is rolled. It returns that
// segment.
func writeSegment(t *testing.T, tp TopicIDPartition) *sealedSegment {
	t.Helper()
	dir := t.TempDir()
	m, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: engine.SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.CreateLog(engine.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, engine.LogConfig{SegmentBytes: 64 << 10, IndexIntervalBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("remote-"), 40)
	batch := func(ts int64) []byte {
		recs := make([]engine.Record, 4)
		for i := range recs {
			recs[i] = engine.Record{Timestamp: ts + int64(i), Key: []byte(fmt.Sprint(ts, i)), Value: value}
		}
		b, err := engine.AppendRecords(nil, recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ts := int64(1_700_000_000_000)
	for i := 0; i < 20; i++ {
		if _, err := l.Append(batch(ts), engine.AppendOptions{LeaderEpoch: 3}); err != nil {
			t.Fatal(err)
		}
		ts += 10
	}
	txn, err := engine.AppendProducerRecords(nil, engine.BatchProducer{ID: 42, Epoch: 0, BaseSequence: 0, Transactional: true},
		[]engine.Record{{Timestamp: ts, Key: []byte("k"), Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	// The transaction coordinator's verification (KIP-890), then the batch.
	if g, needed := l.StartTxnVerification(42, 0, 0); needed && !l.CompleteTxnVerification(42, g) {
		t.Fatal("transaction verification failed")
	}
	if _, err := l.Append(txn, engine.AppendOptions{LeaderEpoch: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendMarker(engine.Marker{ProducerID: 42, ProducerEpoch: 0, Timestamp: ts + 1}, engine.AppendOptions{LeaderEpoch: 3}); err != nil {
		t.Fatal(err)
	}
	for l.LogEndOffset() < 400 {
		ts += 10
		if _, err := l.Append(batch(ts), engine.AppendOptions{LeaderEpoch: 5}); err != nil {
			t.Fatal(err)
		}
	}
	logDir := l.Dir()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// The first segment and the base of the next, from the file names.
	names, _ := filepath.Glob(filepath.Join(logDir, "*.log"))
	if len(names) < 2 {
		t.Fatalf("the log has %d segments, want a sealed one: %v", len(names), names)
	}
	var next int64
	fmt.Sscanf(filepath.Base(names[1]), "%d.log", &next)
	base := filepath.Join(logDir, fmt.Sprintf("%020d", 0))
	s := &sealedSegment{data: LogSegmentData{
		LogSegment: base + ".log", OffsetIndex: base + ".index", TimeIndex: base + ".timeindex", TransactionIndex: base + ".txnindex",
		ProducerSnapshot: filepath.Join(logDir, fmt.Sprintf("%020d.snapshot", next)),
	}, files: map[string][]byte{}}
	for suffix, path := range map[string]string{suffixLog: s.data.LogSegment, suffixOffsetIndex: s.data.OffsetIndex,
		suffixTimeIndex: s.data.TimeIndex, suffixTxnIndex: s.data.TransactionIndex, suffixProducerSnapshot: s.data.ProducerSnapshot} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("the engine wrote no %s: %v", suffix, err)
		}
		if len(b) == 0 {
			t.Fatalf("%s is empty", path)
		}
		s.files[suffix] = b
	}
	// The engine's leader-epoch checkpoint: both epochs start inside the
	// first segment, so the checkpoint up to its end (what Kafka hands over)
	// is the whole file.
	epochFile, err := os.ReadFile(filepath.Join(logDir, "leader-epoch-checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	var epochs []EpochEntry
	lines := strings.Split(strings.TrimSpace(string(epochFile)), "\n")
	for _, line := range lines[2:] {
		var e EpochEntry
		if _, err := fmt.Sscanf(line, "%d %d", &e.Epoch, &e.StartOffset); err != nil {
			t.Fatalf("leader-epoch-checkpoint line %q: %v", line, err)
		}
		epochs = append(epochs, e)
	}
	if len(epochs) != 2 || epochs[0] != (EpochEntry{3, 0}) || epochs[1].Epoch != 5 || epochs[1].StartOffset >= next {
		t.Fatalf("leader epochs %v, want 3 from 0 and 5 inside the first segment (next base %d)", epochs, next)
	}
	s.data.LeaderEpochIndex = epochFile
	s.files[suffixLeaderEpoch] = epochFile

	var maxTs int64
	if err := engine.ForEachBatch(s.files[suffixLog], func(h engine.BatchHeader, _ []byte) error {
		maxTs = max(maxTs, h.MaxTimestamp)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.md = SegmentMetadata{
		ID: NewSegmentID(tp), StartOffset: 0, EndOffset: next - 1, MaxTimestamp: maxTs, BrokerID: 1,
		EventTimestamp: ts, SegmentSize: int64(len(s.files[suffixLog])),
		LeaderEpochs: epochs, State: CopySegmentStarted,
	}
	return s
}
