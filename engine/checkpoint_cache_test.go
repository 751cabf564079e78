package engine

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The checkpoint writer writes what encodeOffsetsCheckpoint would, rewrites a file
// only when one of its offsets moved, and lists the logs again when one is created
// or deleted.
func TestCheckpointWriterOnlyOnChange(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	var logs []*Log
	for _, tp := range []TopicPartition{{"b", 10}, {"b", 2}, {"a", 0}, {"b", 1}} {
		l, err := m.CreateLog(tp, DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	inode := func(name string) uint64 {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	want := func(f func(*Log) int64) string {
		offs := map[TopicPartition]int64{}
		for _, l := range m.Logs() {
			offs[l.tp] = f(l)
		}
		return string(encodeOffsetsCheckpoint(offs))
	}
	check := func(what string) {
		t.Helper()
		for name, f := range map[string]func(*Log) int64{
			recoveryPointFile:  func(l *Log) int64 { return l.recoveryPoint.Load() },
			replicationFile:    func(l *Log) int64 { return l.hw.Load() },
			logStartOffsetFile: func(l *Log) int64 { return l.logStart.Load() },
		} {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if w := want(f); string(got) != w {
				t.Fatalf("%s: %s is\n%s\nwant\n%s", what, name, got, w)
			}
		}
	}
	if err := m.writeCheckpoints(); err != nil {
		t.Fatal(err)
	}
	check("first round")
	hw, rp := inode(replicationFile), inode(recoveryPointFile)
	if err := m.writeCheckpoints(); err != nil {
		t.Fatal(err)
	}
	if inode(replicationFile) != hw || inode(recoveryPointFile) != rp {
		t.Fatal("an idle round rewrote a checkpoint file")
	}
	mustAppend(t, logs[1], makeBatch(testBatch{records: 3}))
	logs[1].SetHighWatermark(2)
	if err := m.writeCheckpoints(); err != nil {
		t.Fatal(err)
	}
	check("after a HW move")
	if inode(replicationFile) == hw {
		t.Fatal("the replication checkpoint was not rewritten after a HW move")
	}
	if err := m.DeleteLog(TopicPartition{"a", 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateLog(TopicPartition{"c", 7}, DefaultLogConfig()); err != nil {
		t.Fatal(err)
	}
	if err := m.writeCheckpoints(); err != nil {
		t.Fatal(err)
	}
	check("after a delete and a create")
}
