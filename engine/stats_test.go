package engine

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/engine/vfs/errorfs"
)

// recordingHandler keeps the messages logged.
type recordingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	h.mu.Lock()
	h.msgs = append(h.msgs, b.String())
	h.mu.Unlock()
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) count(sub string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// Failures are counted each time and logged once per partition and kind
// within the rate-limit window.
func TestFailuresCountedAndLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default, 1)
	h := &recordingHandler{}
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone, FS: efs, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ := m.CreateLog(TopicPartition{"a", 0}, DefaultLogConfig())
	b, _ := m.CreateLog(TopicPartition{"b", 0}, DefaultLogConfig())
	efs.Add(errorfs.Rule{Ops: errorfs.OpWrite, Path: "*.log", Errno: syscall.ENOSPC})
	for i := 0; i < 10; i++ {
		a.Append(makeBatch(testBatch{}), AppendOptions{})
		b.Append(makeBatch(testBatch{}), AppendOptions{})
	}
	if st := m.Stats(); st.NoSpace != 20 {
		t.Fatalf("stats %+v", st)
	}
	if n := h.count("storage failure where=a-0 kind=no space"); n != 1 {
		t.Fatalf("a-0 logged %d times", n)
	}
	if n := h.count("storage failure where=b-0 kind=no space"); n != 1 {
		t.Fatalf("b-0 logged %d times", n)
	}
}

// Open reports what recovery did after a crash.
func TestRecoveryStatsAfterCrash(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"rs", 0}
	m := openTest(t, []string{dir}, SyncNone, nil)
	l, _ := m.CreateLog(tp, smallConfig())
	for i := 0; i < 100; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 150}))
	}
	m.abandon()
	files := segmentFiles(t, l.Dir())
	fi, _ := os.Stat(files[len(files)-1])
	os.Truncate(files[len(files)-1], fi.Size()-7) // torn last batch
	h := &recordingHandler{}
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone, Logger: slog.New(h), DefaultConfig: smallConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rs := m.Recovery()
	if rs.Logs != 1 || rs.RecoveredLogs != 1 || rs.SegmentsScanned != len(files) || rs.IndexesRebuilt != len(files) ||
		rs.BytesTruncated == 0 || rs.BytesScanned == 0 || rs.Duration <= 0 {
		t.Fatalf("recovery %+v (%d segments)", rs, len(files))
	}
	if lr := m.Log(tp).Recovery(); lr.BytesTruncated != rs.BytesTruncated {
		t.Fatalf("log recovery %+v", lr)
	}
	if h.count("logs opened") != 1 || h.count("recovered=1") != 1 {
		t.Fatalf("no recovery summary logged: %v", h.msgs)
	}
}
