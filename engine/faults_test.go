package engine

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"syscall"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/engine/vfs/errorfs"
)

func openFS(t testing.TB, dirs []string, pol SyncPolicy, fsys vfs.FS) *Manager {
	t.Helper()
	m, err := Open(Options{Dirs: dirs, Sync: pol, FS: fsys})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return m
}

// engineClass reports whether err is one of the engine's error classes.
func engineClass(err error) bool {
	for _, c := range []error{ErrIO, ErrCorrupt, ErrClosed, ErrOffsetOutOfRange, ErrLogDirOffline, ErrInvalidConfig} {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

// A full disk fails the append that hit it, undoes its partial write and
// leaves the directory online: once space is back the log takes appends.
func TestNoSpaceOnAppendIsUndone(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default, 1)
	m := openFS(t, []string{dir}, SyncFsync, efs)
	tp := TopicPartition{"full", 0}
	l, err := m.CreateLog(tp, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		r := mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 100}))
		if err := l.WaitDurable(r.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	leo, size := l.LogEndOffset(), l.Size()
	id := efs.Add(errorfs.Rule{Ops: errorfs.OpWrite, Path: "*.log", Errno: syscall.ENOSPC, PartialWrite: true})
	_, err = l.Append(makeBatch(testBatch{records: 3, valueSize: 300}), AppendOptions{})
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, ErrIO) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("append on a full disk: %v", err)
	}
	if l.LogEndOffset() != leo || l.Size() != size {
		t.Fatalf("log changed: LEO %d size %d, want %d %d", l.LogEndOffset(), l.Size(), leo, size)
	}
	if fi, err := os.Stat(segmentFiles(t, l.Dir())[0]); err != nil || fi.Size() != size {
		t.Fatalf("segment file: %v %v, want %d bytes (partial write undone)", fi.Size(), err, size)
	}
	if st := m.Stats(); st.NoSpace != 1 || st.DirsOffline != 0 {
		t.Fatalf("stats %+v", st)
	}
	efs.RemoveRule(id)
	r := mustAppend(t, l, makeBatch(testBatch{records: 3, valueSize: 300}))
	if r.BaseOffset != leo {
		t.Fatalf("append after space came back at %d, want %d", r.BaseOffset, leo)
	}
	if err := l.WaitDurable(r.LastOffset); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openFS(t, []string{dir}, SyncFsync, nil)
	defer m.Close()
	if hs := readAll(t, m.Log(tp)); len(hs) != 11 {
		t.Fatalf("%d batches after reopen, want 11", len(hs))
	}
}

// A failed fdatasync takes the directory offline for good: waiters and later
// appends fail with ErrLogDirOffline, reads go on, and a reopen recovers what
// was acknowledged before.
func TestSyncFailureTakesDirOffline(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default, 1)
	m := openFS(t, []string{dir}, SyncFsync, efs)
	tp := TopicPartition{"eio", 0}
	l, _ := m.CreateLog(tp, DefaultLogConfig())
	r := mustAppend(t, l, makeBatch(testBatch{records: 5, valueSize: 50}))
	if err := l.WaitDurable(r.LastOffset); err != nil {
		t.Fatal(err)
	}
	acked := l.LogEndOffset()
	efs.Add(errorfs.Rule{Ops: errorfs.OpSync, Path: "*.log", Errno: syscall.EIO})
	r = mustAppend(t, l, makeBatch(testBatch{records: 5, valueSize: 50}))
	err := l.WaitDurable(r.LastOffset)
	if !errors.Is(err, ErrLogDirOffline) || !errors.Is(err, ErrIO) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable after a failed fdatasync: %v", err)
	}
	if _, err := l.Append(makeBatch(testBatch{}), AppendOptions{}); !errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("append to an offline dir: %v", err)
	}
	done := make(chan error, 1)
	l.OnDurable(r.LastOffset, func(err error) { done <- err })
	if err := <-done; !errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("OnDurable on an offline dir: %v", err)
	}
	if hs := readAll(t, l); len(hs) != 2 {
		t.Fatalf("reads of an offline dir: %d batches", len(hs))
	}
	if _, err := m.CreateLog(TopicPartition{"other", 0}, DefaultLogConfig()); !errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("CreateLog with every dir offline: %v", err)
	}
	if st := m.DirStats(); !errors.Is(st[0].Err, ErrLogDirOffline) {
		t.Fatalf("DirStats: %v", st[0].Err)
	}
	if st := m.Stats(); st.DirsOffline != 1 || st.EIO < 1 {
		t.Fatalf("stats %+v", st)
	}
	if err := m.Close(); err == nil {
		t.Fatal("Close of an offline dir reported no error")
	}
	if _, err := os.Stat(dir + "/" + cleanShutdownFile); err == nil {
		t.Fatal("clean-shutdown marker written for an offline dir")
	}
	m = openFS(t, []string{dir}, SyncFsync, nil)
	defer m.Close()
	l = m.Log(tp)
	if l.LogEndOffset() < acked {
		t.Fatalf("LEO %d after reopen, acknowledged %d", l.LogEndOffset(), acked)
	}
	r = mustAppend(t, l, makeBatch(testBatch{}))
	if err := l.WaitDurable(r.LastOffset); err != nil {
		t.Fatalf("reopened dir: %v", err)
	}
}

// EIO on a read fails that read with ErrIO; the log is unharmed.
func TestReadEIO(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default, 1)
	m := openFS(t, []string{dir}, SyncNone, efs)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"rd", 0}, DefaultLogConfig())
	for i := 0; i < 5; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 100}))
	}
	id := efs.Add(errorfs.Rule{Ops: errorfs.OpRead, Path: "*.log", Errno: syscall.EIO})
	for _, off := range []int64{0, 4} {
		_, err := l.ReadCopy(off, 1<<20, l.LogEndOffset(), true, nil)
		if !errors.Is(err, ErrIO) || !errors.Is(err, syscall.EIO) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("ReadCopy(%d) with EIO: %v", off, err)
		}
	}
	if len(l.Damage()) != 0 {
		t.Fatalf("an I/O error was recorded as damage: %v", l.Damage())
	}
	efs.RemoveRule(id)
	if hs := readAll(t, l); len(hs) != 5 {
		t.Fatalf("%d batches", len(hs))
	}
	if st := m.Stats(); st.EIO != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// Seeded random faults on every operation kind while a workload runs: the
// engine returns only its own error classes and never panics, and a reopen
// without faults recovers a log holding everything acknowledged durable. The
// flusher runs on the test goroutine, so a seed replays exactly.
func TestRandomFaultsNeverPanic(t *testing.T) {
	seeds := 8
	if testing.Short() {
		seeds = 2
	}
	if os.Getenv("SAMSA_LONG") != "" {
		seeds = 200
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { randomFaults(t, seed) })
	}
}

func randomFaults(t *testing.T, seed int64) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(seed))
	efs := errorfs.New(vfs.Default, seed)
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: efs, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"rnd", 0}
	l, err := m.CreateLog(tp, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	errnos := []syscall.Errno{syscall.EIO, syscall.ENOSPC}
	efs.Add(errorfs.Rule{Ops: errorfs.OpWrite | errorfs.OpRead | errorfs.OpTruncate | errorfs.OpCreate | errorfs.OpRename | errorfs.OpSyncDir,
		Prob: 0.03, Errno: errnos[rng.Intn(2)], PartialWrite: true})
	efs.Add(errorfs.Rule{Ops: errorfs.OpSync, Prob: 0.01, Errno: errnos[rng.Intn(2)], After: 20})
	ackedEnd := int64(0) // every offset below it was acknowledged durable (and not truncated away)
	check := func(op string, err error) {
		if err != nil && !engineClass(err) {
			t.Fatalf("seed %d: %s returned an error of no engine class: %v", seed, op, err)
		}
	}
	for i := 0; i < 300; i++ {
		switch k := rng.Intn(20); {
		case k < 14:
			r, err := l.Append(makeBatch(testBatch{records: 1 + rng.Intn(3), valueSize: rng.Intn(300)}), AppendOptions{LeaderEpoch: 1})
			check("append", err)
			if err == nil && rng.Intn(3) == 0 {
				err = waitManual(m, l, r.LastOffset)
				check("wait", err)
				if err == nil {
					ackedEnd = max(ackedEnd, r.LastOffset+1)
				}
			}
		case k < 17:
			off := l.LogStartOffset() + rng.Int63n(l.LogEndOffset()-l.LogStartOffset()+1)
			_, err := l.ReadCopy(off, int32(1+rng.Intn(4096)), l.LogEndOffset(), true, nil)
			check("read", err)
		case k < 18:
			if leo := l.LogEndOffset(); leo > 0 {
				to := leo - rng.Int63n(min(leo, 5))
				err := l.TruncateTo(to)
				check("truncate", err)
				ackedEnd = min(ackedEnd, l.LogEndOffset())
			}
		case k < 19:
			_, _, _, err := l.OffsetForTimestamp(rng.Int63n(100))
			check("offset for timestamp", err)
		default:
			check("checkpoint", m.writeCheckpoints())
		}
	}
	m.Close() // may fail: the faults are still on
	m = openFS(t, []string{dir}, SyncFsync, nil)
	defer m.Close()
	l = m.Log(tp)
	if l == nil {
		t.Fatalf("seed %d: log gone", seed)
	}
	if l.LogEndOffset() < ackedEnd {
		t.Fatalf("seed %d: LEO %d after reopen, acknowledged up to %d", seed, l.LogEndOffset(), ackedEnd)
	}
	hs := readAll(t, l)
	for i := 1; i < len(hs); i++ {
		if hs[i].BaseOffset != hs[i-1].LastOffset()+1 {
			t.Fatalf("seed %d: offsets not dense: %d after %d", seed, hs[i].BaseOffset, hs[i-1].LastOffset())
		}
	}
}

// waitManual is WaitDurable for a manager whose flusher runs on the caller's
// goroutine (manualBackground).
func waitManual(m *Manager, l *Log, offset int64) error {
	done := make(chan error, 1)
	l.OnDurable(offset, func(err error) { done <- err })
	for {
		select {
		case err := <-done:
			return err
		default:
			m.flushRound()
		}
	}
}
