package engine

import (
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// plantedBugRun appends and waits for durability under SyncFsync on a
// CrashFS, cuts the power and returns how many acknowledged offsets were lost.
func plantedBugRun(t *testing.T) int64 {
	dir := t.TempDir()
	fs := vfs.NewCrashFS(vfs.Default)
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"planted", 0}
	l, err := m.CreateLog(tp, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		r := mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 100}))
		if err := l.WaitDurable(r.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	acked := l.LogEndOffset()
	if err := fs.Crash(); err != nil {
		t.Fatal(err)
	}
	m.abandon()
	fs.Restart()
	m, err = Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return acked - m.Log(tp).LogEndOffset()
}

// In the default build SAMSA_FAULT_SKIP_FDATASYNC does nothing: the switch
// exists only with -tags samsa_faults.
func TestSkipFdatasyncSwitchIsNotInTheDefaultBuild(t *testing.T) {
	t.Setenv("SAMSA_FAULT_SKIP_FDATASYNC", "1")
	if lost := plantedBugRun(t); lost > 0 {
		if plantedBugBuild {
			t.Skip("built with -tags samsa_faults")
		}
		t.Fatalf("%d acknowledged offsets lost at a power loss", lost)
	}
}
