package engine

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/engine/vfs/errorfs"
)

// openSyncfs opens a Manager over fsys whose rounds of at least min logs sync
// by syncfs, skipping the test where syncfs cannot be had.
func openSyncfs(t *testing.T, dir string, fsys vfs.FS, min int, manual bool) *Manager {
	t.Helper()
	if s, err := vfs.OpenFSSync(vfs.Default, dir); err != nil {
		t.Skipf("syncfs: %v", err)
	} else {
		s.Close()
	}
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: fsys, DefaultConfig: smallConfig(),
		FlushSyncfsMinLogs: min, manualBackground: manual})
	if err != nil {
		t.Fatal(err)
	}
	if m.dirs[0].fsSync == nil {
		t.Fatal("the directory has no syncfs handle")
	}
	return m
}

// syncfsLogs creates n logs of topic in m.
func syncfsLogs(t *testing.T, m *Manager, topic string, n int) []*Log {
	t.Helper()
	logs := make([]*Log, n)
	for i := range logs {
		var err error
		if logs[i], err = m.CreateLog(TopicPartition{topic, int32(i)}, smallConfig()); err != nil {
			t.Fatal(err)
		}
	}
	return logs
}

// appendWaiting appends a small batch to each log and returns, per log, the
// error its durability callback reports ("not released" until it runs).
func appendWaiting(t *testing.T, logs []*Log) []error {
	errs := make([]error, len(logs))
	for i, l := range logs {
		r := mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 100}))
		errs[i] = errors.New("not released")
		l.OnDurable(r.LastOffset, func(err error) { errs[i] = err })
	}
	return errs
}

// powerCutKeeps cuts the power under m (abandoned), reopens dir over fs with
// syncfs from min logs, and checks that log i of topic ends at want[i], reads
// back, and kept leader epoch 1 in its checkpoint. It returns the new Manager.
func powerCutKeeps(t *testing.T, fs *vfs.CrashFS, m *Manager, dir string, min int, topic string, want []int64) *Manager {
	t.Helper()
	if err := fs.Crash(); err != nil {
		t.Fatal(err)
	}
	m.abandon()
	fs.Restart()
	m = openSyncfs(t, dir, fs, min, true)
	for i := range want {
		l := m.Log(TopicPartition{topic, int32(i)})
		if l == nil || l.LogEndOffset() != want[i] {
			t.Fatalf("log %d after the power cut: %v, want end %d", i, l, want[i])
		}
		readAll(t, l)
		if e := l.epochs.latest(); e != 1 {
			t.Fatalf("log %d after the power cut: leader epoch %d in its checkpoint, want 1", i, e)
		}
	}
	return m
}

// ends is each log's end offset.
func ends(logs []*Log) []int64 {
	want := make([]int64, len(logs))
	for i, l := range logs {
		want[i] = l.LogEndOffset()
	}
	return want
}

// TestSyncfsRound: a round of at least FlushSyncfsMinLogs logs is one syncfs
// and no fdatasync, releases every waiter, and what it covered survives a
// power cut; a smaller round keeps an fdatasync per log; a log with a rolled
// segment whose indexes were never synced is flushed the usual way in a
// syncfs round.
func TestSyncfsRound(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewCrashFS(vfs.Default)
	m := openSyncfs(t, dir, fs, 8, true)
	const n = 16
	logs := syncfsLogs(t, m, "fs", n)
	check := func(what string, errs []error) {
		t.Helper()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s: log %d: %v", what, i, err)
			}
		}
	}
	// Twice: the first append of a log creates its segment file and begins its
	// leader epoch, whose checkpoint the first flush writes; the syncfs covers
	// those too.
	for round := range 2 {
		before := m.FlushStats()
		errs := appendWaiting(t, logs)
		m.flushRound()
		check(fmt.Sprint("syncfs round ", round), errs)
		st := m.FlushStats()
		others := 0
		for k, v := range st.Syncs {
			if k != SyncKindFS {
				others += int(v - before.Syncs[k])
			}
		}
		if st.SyncfsRounds-before.SyncfsRounds != 1 || st.Syncs[SyncKindFS]-before.Syncs[SyncKindFS] != 1 || others != 0 {
			t.Fatalf("round %d of %d logs: %d syncfs rounds, %d syncfs, %d other syncs; want 1, 1, 0",
				round, n, st.SyncfsRounds-before.SyncfsRounds, st.Syncs[SyncKindFS]-before.Syncs[SyncKindFS], others)
		}
	}
	for i, l := range logs {
		if rp := l.recoveryPoint.Load(); rp != l.LogEndOffset() {
			t.Fatalf("log %d: recovery point %d, log end %d", i, rp, l.LogEndOffset())
		}
	}

	// Below the minimum: one fdatasync per log.
	before := m.FlushStats()
	errs := appendWaiting(t, logs[:3])
	m.flushRound()
	check("small round", errs)
	st := m.FlushStats()
	if st.SerialRounds-before.SerialRounds != 1 || st.Syncs[SyncKindSegment]-before.Syncs[SyncKindSegment] != 3 ||
		st.Syncs[SyncKindFS] != before.Syncs[SyncKindFS] {
		t.Fatalf("a round of 3 logs: %+v after %+v", st, before)
	}

	// Log 0 rolls: its old segment's indexes need their own syncs.
	for segmentCount(logs[0]) < 2 {
		mustAppend(t, logs[0], makeBatch(testBatch{records: 4, valueSize: 400}))
	}
	before = m.FlushStats()
	errs = appendWaiting(t, logs)
	m.flushRound()
	check("round with a rolled log", errs)
	st = m.FlushStats()
	if st.Syncs[SyncKindFS]-before.Syncs[SyncKindFS] != 1 || st.Syncs[SyncKindIndex] == before.Syncs[SyncKindIndex] ||
		st.Syncs[SyncKindSegment]-before.Syncs[SyncKindSegment] < 2 {
		t.Fatalf("a round with a rolled log: %+v after %+v", st, before)
	}

	// Appends after the last round are lost in a power cut, the rest is kept.
	want := ends(logs)
	appendWaiting(t, logs)
	powerCutKeeps(t, fs, m, dir, 8, "fs", want).Close()
}

// TestSyncfsErrorFallsBack: a syncfs error names no file and may be another
// process's, so the round's logs are synced again the usual way, file by
// file; when those syncs succeed the waiters are released, the directory
// stays online, and what the round covered (segment data, the first
// leader-epoch checkpoints, the new names) survives a power cut.
func TestSyncfsErrorFallsBack(t *testing.T) {
	dir := t.TempDir()
	crash := vfs.NewCrashFS(vfs.Default)
	efs := errorfs.New(crash, 1)
	m := openSyncfs(t, dir, efs, 2, true)
	const n = 4
	logs := syncfsLogs(t, m, "fb", n)
	// The first flush of each log: its segment file and its epoch checkpoint.
	efs.Add(errorfs.Rule{Ops: errorfs.OpSyncFS, Errno: syscall.EIO, Limit: 1})
	errs := appendWaiting(t, logs)
	before := m.FlushStats()
	m.flushRound()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("log %d after a syncfs error whose fallback succeeded: %v", i, err)
		}
	}
	st := m.FlushStats()
	if st.SyncfsFallbacks-before.SyncfsFallbacks != 1 || st.Syncs[SyncKindSegment]-before.Syncs[SyncKindSegment] != n ||
		st.Syncs[SyncKindEpochs]-before.Syncs[SyncKindEpochs] != n {
		t.Fatalf("fallback round: %d fallbacks, %d segment syncs, %d checkpoint syncs; want 1, %d, %d",
			st.SyncfsFallbacks-before.SyncfsFallbacks, st.Syncs[SyncKindSegment]-before.Syncs[SyncKindSegment],
			st.Syncs[SyncKindEpochs]-before.Syncs[SyncKindEpochs], n, n)
	}
	if err := m.dirs[0].offlineErr(); err != nil {
		t.Fatalf("directory offline after a syncfs error that was not its files': %v", err)
	}
	if got := m.Stats().EIO; got != 1 {
		t.Fatalf("EIO count %d, want 1 (the syncfs's)", got)
	}
	// The next round is a syncfs again.
	errs = appendWaiting(t, logs)
	before = m.FlushStats()
	m.flushRound()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("log %d after the second round: %v", i, err)
		}
	}
	if st := m.FlushStats(); st.SyncfsRounds-before.SyncfsRounds != 1 || st.SyncfsFallbacks != before.SyncfsFallbacks {
		t.Fatalf("second round: %+v after %+v", st, before)
	}
	powerCutKeeps(t, crash, m, dir, 2, "fb", ends(logs)).Close()
}

// TestSyncfsFailureTakesDirOffline: when the syncs of the fallback fail too,
// the error was the directory's: it goes offline and every waiter of the
// round fails.
func TestSyncfsFailureTakesDirOffline(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default, 1)
	m := openSyncfs(t, dir, efs, 1, false)
	defer m.Close()
	a, _ := m.CreateLog(TopicPartition{"a", 0}, DefaultLogConfig())
	b, _ := m.CreateLog(TopicPartition{"b", 0}, DefaultLogConfig())
	var r AppendResult
	for _, l := range []*Log{a, b} {
		r = mustAppend(t, l, makeBatch(testBatch{records: 3, valueSize: 50}))
		if err := l.WaitDurable(r.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.FlushStats(); st.SyncfsRounds == 0 {
		t.Fatalf("no syncfs round: %+v", st)
	}
	efs.Add(errorfs.Rule{Ops: errorfs.OpSyncFS, Errno: syscall.EIO})
	efs.Add(errorfs.Rule{Ops: errorfs.OpSync, Path: "*.log", Errno: syscall.EIO})
	r = mustAppend(t, b, makeBatch(testBatch{records: 3, valueSize: 50}))
	err := b.WaitDurable(r.LastOffset)
	if !errors.Is(err, ErrLogDirOffline) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable after a failed syncfs and fdatasync: %v", err)
	}
	if _, err := a.Append(makeBatch(testBatch{}), AppendOptions{}); !errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("append to another log of the offline dir: %v", err)
	}
	if rp := b.recoveryPoint.Load(); rp > r.BaseOffset {
		t.Fatalf("recovery point %d advanced past %d by a failed syncfs", rp, r.BaseOffset)
	}
	if st := m.FlushStats(); st.SyncfsFallbacks == 0 {
		t.Fatalf("no fallback counted: %+v", st)
	}
}
