package engine

import (
	"bytes"
	"log/slog"
	"testing"
)

// A new partition's log starts from a fresh, empty active segment: nothing to
// check or recover, so CreateLog logs no warning and the log is appendable at once.
func TestCreateLogDoesNotRecover(t *testing.T) {
	var logs bytes.Buffer
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncNone,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for p := int32(0); p < 4; p++ {
		l, err := m.CreateLog(TopicPartition{Topic: "fresh", Partition: p}, DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		if r := mustAppend(t, l, makeBatch(testBatch{records: 3})); r.BaseOffset != 0 || r.LastOffset != 2 {
			t.Fatalf("partition %d: first append at %d..%d, want 0..2", p, r.BaseOffset, r.LastOffset)
		}
	}
	if logs.Len() > 0 {
		t.Fatalf("creating logs logged warnings:\n%s", logs.String())
	}
}
