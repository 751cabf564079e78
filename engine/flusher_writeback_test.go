package engine

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// wbFS is the OS's file system with a switch that makes write-backs fail.
type wbFS struct {
	vfs.FS
	fail atomic.Bool
}

type wbFile struct {
	vfs.File
	fs *wbFS
}

func (f *wbFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &wbFile{File: file, fs: f}, nil
}

func (f *wbFS) SyncFlushesCache(dir string) bool { return vfs.SyncFlushesCache(f.FS, dir) }

func (f *wbFile) Unwrap() vfs.File { return f.File }

func (f *wbFile) WaitWriteback() error {
	if f.fs.fail.Load() {
		return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.(vfs.Writeback).WaitWriteback()
}

// openWB opens a Manager over fsys (manual rounds), skipping the test where the
// directory's file system does not flush the cache at every fdatasync.
func openWB(t *testing.T, dir string, fsys vfs.FS) *Manager {
	t.Helper()
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: fsys, DefaultConfig: smallConfig(), manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	if !m.dirs[0].writeback {
		m.Close()
		t.Skipf("%s: no rounds by one cache flush on this file system", dir)
	}
	return m
}

// wbLogs creates n logs of topic with 1 MiB segments (room for the zeros ahead).
func wbLogs(t *testing.T, m *Manager, topic string, n int) []*Log {
	t.Helper()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 1 << 20
	logs := make([]*Log, n)
	for i := range logs {
		var err error
		if logs[i], err = m.CreateLog(TopicPartition{topic, int32(i)}, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return logs
}

// roundsUntilWriteback runs rounds of a small batch per log until one is made
// durable by one cache flush, checking every waiter's release.
func roundsUntilWriteback(t *testing.T, m *Manager, logs []*Log) {
	t.Helper()
	for i := range 20 {
		before := m.FlushStats()
		errs := appendWaiting(t, logs)
		m.flushRound()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("round %d: log %d: %v", i, j, err)
			}
		}
		if st := m.FlushStats(); st.WritebackRounds > before.WritebackRounds {
			return
		}
	}
	t.Fatal("20 rounds of small appends and none by one cache flush")
}

// TestWritebackRound: once their segments are written ahead and synced, a round of
// several logs writes them back and ends with one fdatasync; every waiter is
// released; a log that does not qualify (a rolled segment) is synced the usual way
// in the same round; what the rounds covered survives a power cut that puts every
// byte not made durable back to what the disk held (the model's zeros), and what
// came after them is lost.
func TestWritebackRound(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewCrashFS(vfs.Default)
	m := openWB(t, dir, fs)
	const n = 6
	logs := wbLogs(t, m, "wb", n)
	roundsUntilWriteback(t, m, logs)

	before := m.FlushStats()
	errs := appendWaiting(t, logs)
	m.flushRound()
	st := m.FlushStats()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
	wb, seg := st.Syncs[SyncKindWriteback]-before.Syncs[SyncKindWriteback], st.Syncs[SyncKindSegment]-before.Syncs[SyncKindSegment]
	if st.WritebackRounds-before.WritebackRounds != 1 || wb != n-1 || seg != 1 {
		t.Fatalf("a round of %d qualifying logs: %d write-back rounds, %d written back, %d fdatasyncs; want 1, %d, 1",
			n, st.WritebackRounds-before.WritebackRounds, wb, seg, n-1)
	}
	for i, l := range logs {
		if rp := l.recoveryPoint.Load(); rp != l.LogEndOffset() {
			t.Fatalf("log %d: recovery point %d, log end %d", i, rp, l.LogEndOffset())
		}
	}

	// Log 0 rolls: it has two segments above its recovery point, and is synced
	// the usual way beside the others' write-back.
	for segmentCount(logs[0]) < 2 {
		mustAppend(t, logs[0], makeBatch(testBatch{records: 4, valueSize: 8000}))
	}
	before = m.FlushStats()
	errs = appendWaiting(t, logs)
	m.flushRound()
	st = m.FlushStats()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("round with a rolled log: log %d: %v", i, err)
		}
	}
	if wb := st.Syncs[SyncKindWriteback] - before.Syncs[SyncKindWriteback]; wb != n-2 || st.Syncs[SyncKindIndex] == before.Syncs[SyncKindIndex] {
		t.Fatalf("a round with a rolled log: %d written back (want %d), index syncs %d -> %d",
			wb, n-2, before.Syncs[SyncKindIndex], st.Syncs[SyncKindIndex])
	}

	// Appends after the last round are lost in a power cut, the rest is kept.
	want := ends(logs)
	appendWaiting(t, logs)
	if err := fs.Crash(); err != nil {
		t.Fatal(err)
	}
	m.abandon()
	fs.Restart()
	if fs.LastCut().BytesLost == 0 {
		t.Fatal("the power cut lost nothing: the appends after the last round should have gone")
	}
	m = openWB(t, dir, fs)
	defer m.Close()
	for i := range want {
		l := m.Log(TopicPartition{"wb", int32(i)})
		if l == nil || l.LogEndOffset() != want[i] {
			t.Fatalf("log %d after the power cut: %v, want end %d", i, l, want[i])
		}
		readAll(t, l)
	}
}

// TestWritebackFailureTakesDirOffline: a write-back error fails the round's
// waiters, takes the directory offline, and moves no recovery point.
func TestWritebackFailureTakesDirOffline(t *testing.T) {
	dir := t.TempDir()
	fsys := &wbFS{FS: vfs.Default}
	m := openWB(t, dir, fsys)
	defer m.Close()
	logs := wbLogs(t, m, "wbfail", 4)
	roundsUntilWriteback(t, m, logs)
	rps := make([]int64, len(logs))
	for i, l := range logs {
		rps[i] = l.recoveryPoint.Load()
	}
	fsys.fail.Store(true)
	errs := appendWaiting(t, logs)
	m.flushRound()
	for i, err := range errs {
		if !errors.Is(err, ErrLogDirOffline) {
			t.Fatalf("log %d: waiter released with %v, want the directory offline", i, err)
		}
		if rp := logs[i].recoveryPoint.Load(); rp != rps[i] {
			t.Fatalf("log %d: recovery point moved %d -> %d after a failed round", i, rps[i], rp)
		}
	}
	if _, err := logs[0].Append(makeBatch(testBatch{records: 1}), AppendOptions{LeaderEpoch: 1}); !errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("append after the failed round: %v", err)
	}
}

// TestWritebackOff: with Options.NoFlushWriteback every log has its fdatasync.
func TestWritebackOff(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, DefaultConfig: smallConfig(), manualBackground: true, NoFlushWriteback: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	logs := wbLogs(t, m, "wboff", 4)
	for i := range 10 {
		errs := appendWaiting(t, logs)
		m.flushRound()
		for j, err := range errs {
			if err != nil {
				t.Fatal(fmt.Sprintf("round %d log %d", i, j), err)
			}
		}
	}
	if st := m.FlushStats(); st.WritebackRounds != 0 || st.Syncs[SyncKindWriteback] != 0 {
		t.Fatalf("write-back rounds with the option off: %+v", st)
	}
}

// hookFS is a file system whose write-back waits run a hook first: its call
// number at (counted from 1), once.
type hookFS struct {
	vfs.FS
	calls atomic.Int32
	at    int32
	hook  atomic.Pointer[func()]
}

type hookFile struct {
	vfs.File
	fs *hookFS
}

func (f *hookFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: file, fs: f}, nil
}

func (f *hookFS) SyncFlushesCache(dir string) bool { return vfs.SyncFlushesCache(f.FS, dir) }

func (f *hookFile) Unwrap() vfs.File { return f.File }

func (f *hookFile) WaitWriteback() error {
	if f.fs.calls.Add(1) == f.fs.at {
		if h := f.fs.hook.Swap(nil); h != nil {
			(*h)()
		}
	}
	return f.File.(vfs.Writeback).WaitWriteback()
}

// TestWritebackRoundLateAppends: appends that come while a write-back round runs
// (here: during its second wait, log 1's) to logs whose write-back it has not
// waited for yet (logs 2 and 3, the round's last, which it fdatasyncs) are made
// durable by the round (wbPlan.extend), their waiters, queued after the round
// began, are released by it, and they survive a power cut that loses every byte
// not made durable. One to a log whose wait is over (log 0) is not: it waits for
// the next round. With the round as it was before
// (Options.earlyWaiters) all of them wait for the next round.
func TestWritebackRoundLateAppends(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprintf("early=%v", early), func(t *testing.T) {
			dir := t.TempDir()
			crash := vfs.NewCrashFS(vfs.Default)
			fsys := &hookFS{FS: crash}
			open := func() *Manager {
				m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: fsys, DefaultConfig: smallConfig(),
					manualBackground: true, earlyWaiters: early})
				if err != nil {
					t.Fatal(err)
				}
				if !m.dirs[0].writeback {
					m.Close()
					t.Skipf("%s: no rounds by one cache flush on this file system", dir)
				}
				return m
			}
			m := open()
			const n = 4
			logs := wbLogs(t, m, "late", n)
			roundsUntilWriteback(t, m, logs)

			var want []int64 // the ends the round makes durable
			late := make([]error, n)
			hook := func() {
				want = ends(logs)
				for _, i := range []int{0, 2, 3} {
					r := mustAppend(t, logs[i], makeBatch(testBatch{records: 3, valueSize: 200}))
					late[i] = errors.New("not released")
					logs[i].OnDurable(r.LastOffset, func(err error) { late[i] = err })
				}
				if !early {
					want[2], want[3] = logs[2].LogEndOffset(), logs[3].LogEndOffset()
				}
			}
			fsys.calls.Store(0)
			fsys.at = 2
			fsys.hook.Store(&hook)
			before := m.FlushStats()
			errs := appendWaiting(t, logs)
			m.flushRound()
			if st := m.FlushStats(); st.WritebackRounds-before.WritebackRounds != 1 {
				t.Fatalf("%d write-back rounds, want 1", st.WritebackRounds-before.WritebackRounds)
			}
			if fsys.hook.Load() != nil {
				t.Fatal("the round waited for fewer than 2 write-backs")
			}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("log %d: %v", i, err)
				}
			}
			for i, l := range logs {
				rp := l.recoveryPoint.Load()
				if rp != want[i] {
					t.Fatalf("log %d: recovery point %d after the round, want %d (end %d)", i, rp, want[i], l.LogEndOffset())
				}
				if durable := rp == l.LogEndOffset(); i != 1 && (late[i] == nil) != durable {
					t.Fatalf("log %d: late waiter %v with the late append durable=%v", i, late[i], durable)
				}
			}

			// Nothing is synced after this: a power cut keeps what the round made
			// durable (and may keep more: bytes written back with another log's,
			// which the round did not count).
			if err := crash.Crash(); err != nil {
				t.Fatal(err)
			}
			m.abandon()
			crash.Restart()
			m = open()
			defer m.Close()
			for i := range want {
				l := m.Log(TopicPartition{"late", int32(i)})
				if l == nil || l.LogEndOffset() < want[i] {
					t.Fatalf("log %d after the power cut: %v, want end %d at least", i, l, want[i])
				}
				readAll(t, l)
			}
		})
	}
}

// TestWritebackRoundBusyLog: a write-back round whose list holds a log that
// another flush holds (another round's plan, with concurrent rounds) does not
// wait for it while it holds its own logs' flush locks, but after them: the other
// round may be waiting for one of them (two rounds, each with the other's log in
// its rest, waited for each other before). Here the round must reach its
// write-back waits while the busy log stays held.
func TestWritebackRoundBusyLog(t *testing.T) {
	fsys := &hookFS{FS: vfs.Default}
	m := openWB(t, t.TempDir(), fsys)
	defer m.Close()
	const n = 4
	logs := wbLogs(t, m, "busy", n)
	roundsUntilWriteback(t, m, logs)

	reached := make(chan struct{})
	hook := func() { close(reached) }
	fsys.calls.Store(0)
	fsys.at = 1
	fsys.hook.Store(&hook)
	errs := appendWaiting(t, logs)
	busy := logs[n-1]
	busy.flushMu.Lock() // as another round's plan would hold it
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.flushRound()
	}()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		busy.flushMu.Unlock()
		<-done
		t.Fatal("the round waited for the busy log before its write-backs, holding its own logs")
	}
	busy.flushMu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the round did not end once the busy log was free")
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
}
