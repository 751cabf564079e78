package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// syncCountFS counts the syncs (Sync, Datasync, SyncDir) and the creations of
// producer snapshots, per partition directory.
type syncCountFS struct {
	vfs.FS
	root string

	mu        sync.Mutex
	syncs     map[string]int // partition directory name → syncs of it or its files
	snaps     map[string]int // partition directory name → snapshots created
	rootSyncs int            // syncs of the log directory itself
}

func newSyncCountFS(root string) *syncCountFS {
	return &syncCountFS{FS: vfs.Default, root: root, syncs: map[string]int{}, snaps: map[string]int{}}
}

// partDir is the partition directory path lies in ("" outside one).
func (c *syncCountFS) partDir(path string) string {
	rel, err := filepath.Rel(c.root, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	first, rest, _ := strings.Cut(rel, string(filepath.Separator))
	if rest == "" && !strings.Contains(first, "-") {
		return ""
	}
	if rest == "" {
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			return "" // a file of the log directory itself (a checkpoint)
		}
	}
	return first
}

func (c *syncCountFS) count(snap bool, path string) {
	if d := c.partDir(path); d != "" {
		c.mu.Lock()
		if snap {
			c.snaps[d]++
		} else {
			c.syncs[d]++
		}
		c.mu.Unlock()
	}
}

func (c *syncCountFS) reset() (syncs, snaps map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	syncs, snaps = c.syncs, c.snaps
	c.syncs, c.snaps = map[string]int{}, map[string]int{}
	return syncs, snaps
}

func (c *syncCountFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if strings.Contains(filepath.Base(name), snapshotSuffix) && flag&os.O_CREATE != 0 {
		c.count(true, name)
	}
	return &countedFile{File: f, c: c}, nil
}

func (c *syncCountFS) SyncDir(dir string) error {
	if filepath.Clean(dir) == filepath.Clean(c.root) {
		c.mu.Lock()
		c.rootSyncs++
		c.mu.Unlock()
	}
	c.count(false, dir)
	return c.FS.SyncDir(dir)
}

type countedFile struct {
	vfs.File
	c *syncCountFS
}

func (f *countedFile) Unwrap() vfs.File { return f.File }
func (f *countedFile) Sync() error      { f.c.count(false, f.Name()); return f.File.Sync() }
func (f *countedFile) Datasync() error  { f.c.count(false, f.Name()); return f.File.Datasync() }

// A clean close of logs that changed nothing since they were opened (or since
// the last close) syncs none of their files and writes no producer snapshot:
// with thousands of idle partitions, a shutdown is not thousands of fsyncs.
// Logs that took records still get their snapshot and their syncs, and
// everything reads back after each reopen.
func TestCleanCloseSkipsIdleLogs(t *testing.T) {
	dir := t.TempDir()
	cfs := newSyncCountFS(dir)
	open := func() *Manager {
		m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: cfs})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	const n = 40
	tp := func(i int) TopicPartition { return TopicPartition{Topic: "idle", Partition: int32(i)} }
	m := open()
	for i := 0; i < n; i++ {
		if _, err := m.CreateLog(tp(i), DefaultLogConfig()); err != nil {
			t.Fatal(err)
		}
	}
	// Half the logs take a batch (and its fdatasync).
	for i := 0; i < n/2; i++ {
		l := m.Log(tp(i))
		r := mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 100}))
		if err := l.WaitDurable(r.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	cfs.reset()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	syncs, snaps := cfs.reset()
	for i := 0; i < n; i++ {
		d := tp(i).String()
		if i < n/2 && snaps[d] == 0 {
			t.Errorf("%s took records: no producer snapshot at close", d)
		}
		if i >= n/2 && (syncs[d] != 0 || snaps[d] != 0) {
			t.Errorf("%s never written: %d syncs, %d snapshots at close", d, syncs[d], snaps[d])
		}
	}

	// Opened again and closed with no change: no log syncs anything.
	m = open()
	for i := 0; i < n; i++ {
		l := m.Log(tp(i))
		want := 0
		if i < n/2 {
			want = 2
		}
		if got := len(readAll(t, l)); got != want/2 || l.LogEndOffset() != int64(want) {
			t.Fatalf("%s after reopen: %d batches, end %d", tp(i), got, l.LogEndOffset())
		}
	}
	cfs.reset()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	syncs, snaps = cfs.reset()
	if len(syncs) != 0 || len(snaps) != 0 {
		t.Fatalf("close with no change synced %v and wrote snapshots %v", syncs, snaps)
	}

	// One log appended to: only it syncs, and its producer state survives.
	m = open()
	l := m.Log(tp(n - 1))
	b := makeBatch(testBatch{records: 3, valueSize: 10, pid: 7, epoch: 1})
	mustAppend(t, l, b)
	cfs.reset()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	syncs, snaps = cfs.reset()
	if d := tp(n - 1).String(); len(syncs) != 1 || syncs[d] == 0 || snaps[d] != 1 {
		t.Fatalf("close after one append: syncs %v, snapshots %v (want only %s)", syncs, snaps, d)
	}
	m = open()
	defer m.Close()
	l = m.Log(tp(n - 1))
	if l.LogEndOffset() != 3 {
		t.Fatalf("end %d after reopen, want 3", l.LogEndOffset())
	}
	// The producer's next sequence is 3: a duplicate of the first batch is
	// recognised (the state came back from the snapshot written at close).
	r, err := l.Append(makeBatch(testBatch{records: 3, valueSize: 10, pid: 7, epoch: 1}), AppendOptions{LeaderEpoch: 1})
	if err != nil || !r.Duplicate || r.BaseOffset != 0 || l.LogEndOffset() != 3 {
		t.Fatalf("the first batch again after reopen: %+v, %v (want a duplicate of offset 0: producer state lost?)", r, err)
	}
}

// A flusher round with many dirty logs syncs them several at a time
// (flushLogs); every waiter is still released only once its offset is
// durable, and a power cut right after loses none of them.
func TestParallelFlushRoundIsDurable(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewCrashFS(vfs.Default)
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	logs := make([]*Log, n)
	for i := range logs {
		if logs[i], err = m.CreateLog(TopicPartition{Topic: "par", Partition: int32(i)}, DefaultLogConfig()); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 3; k++ {
				r, err := l.Append(makeBatch(testBatch{records: 1 + i%3, valueSize: 64}), AppendOptions{LeaderEpoch: 1})
				if err == nil {
					err = l.WaitDurable(r.LastOffset)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", l.tp, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := make([]int64, n)
	for i, l := range logs {
		want[i] = l.LogEndOffset()
	}
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
	for i := range logs {
		l := m.Log(TopicPartition{Topic: "par", Partition: int32(i)})
		if l == nil || l.LogEndOffset() != want[i] {
			t.Fatalf("partition %d after the power cut: %v, want end %d", i, l, want[i])
		}
		readAll(t, l)
	}
}

// CreateLogs syncs each log directory once for all the logs it creates in it
// (CreateLog once per log), and what it returned survives a power cut, empty
// or not.
func TestCreateLogsShareOneDirectorySync(t *testing.T) {
	dir := t.TempDir()
	cfs := newSyncCountFS(dir)
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: cfs})
	if err != nil {
		t.Fatal(err)
	}
	rootSyncs := func() int {
		cfs.mu.Lock()
		defer cfs.mu.Unlock()
		n := cfs.rootSyncs
		cfs.rootSyncs = 0
		return n
	}
	rootSyncs() // Open's own
	var want []NewLog
	for i := 0; i < 100; i++ {
		want = append(want, NewLog{TP: TopicPartition{Topic: "new", Partition: int32(i)}, Config: DefaultLogConfig()})
	}
	logs, err := m.CreateLogs(want)
	if err != nil || len(logs) != 100 {
		t.Fatalf("CreateLogs: %d logs, %v", len(logs), err)
	}
	for i, l := range logs {
		if l.TopicPartition() != want[i].TP {
			t.Fatalf("log %d is %s", i, l.TopicPartition())
		}
	}
	if n := rootSyncs(); n != 1 {
		t.Fatalf("%d syncs of the log directory for 100 new logs, want 1", n)
	}
	// Existing logs: nothing created, nothing synced.
	if again, err := m.CreateLogs(want[:10]); err != nil || again[3] != logs[3] {
		t.Fatalf("CreateLogs of existing logs: %v", err)
	}
	if n := rootSyncs(); n != 0 {
		t.Fatalf("%d syncs of the log directory for existing logs", n)
	}
	m.Close()

	dir = t.TempDir()
	fs := vfs.NewCrashFS(vfs.Default)
	m, err = Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	logs, err = m.CreateLogs(want[:20])
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i += 2 {
		r := mustAppend(t, logs[i], makeBatch(testBatch{records: 2}))
		if err := logs[i].WaitDurable(r.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
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
	for i := 0; i < 20; i++ {
		l := m.Log(want[i].TP)
		wantEnd := int64(0)
		if i%2 == 0 {
			wantEnd = 2
		}
		if l == nil || l.LogEndOffset() != wantEnd {
			t.Fatalf("partition %d after the power cut: %v, want end %d", i, l, wantEnd)
		}
	}
}

// The first record of a new leader epoch writes no leader-epoch checkpoint on
// the append path: the flush that makes it durable does (before the recovery
// point passes it). A process that dies before writing it loses no epoch:
// recovery assigns the epochs of the batches it keeps.
func TestEpochCheckpointWrittenByFlush(t *testing.T) {
	dir := t.TempDir()
	cfs := newSyncCountFS(dir)
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone, FS: cfs})
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "ep", Partition: 0}
	l, err := m.CreateLog(tp, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfs.reset()
	for epoch := int32(1); epoch <= 3; epoch++ {
		if _, err := l.Append(makeBatch(testBatch{records: 2}), AppendOptions{LeaderEpoch: epoch}); err != nil {
			t.Fatal(err)
		}
	}
	if syncs, _ := cfs.reset(); syncs[tp.String()] != 0 {
		t.Fatalf("appends in 3 new epochs synced %d times", syncs[tp.String()])
	}
	if e, end := l.EndOffsetForEpoch(2); e != 2 || end != 4 {
		t.Fatalf("EndOffsetForEpoch(2) = %d, %d; want 2, 4", e, end)
	}
	ckpt := filepath.Join(l.Dir(), leaderEpochFile)
	if _, err := os.Stat(ckpt); !os.IsNotExist(err) {
		t.Fatalf("checkpoint written by the appends: %v", err)
	}
	// Killed before any flush: the epochs come back from the batch headers.
	m.abandon()
	m, err = Open(Options{Dirs: []string{dir}, Sync: SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	l = m.Log(tp)
	for epoch, want := range map[int32]int64{1: 2, 2: 4, 3: 6} {
		if e, end := l.EndOffsetForEpoch(epoch); e != epoch || end != want {
			t.Fatalf("after a crash, EndOffsetForEpoch(%d) = %d, %d; want %d, %d", epoch, e, end, epoch, want)
		}
	}
	// A new epoch, then a flush: the checkpoint holds it.
	if _, err := l.Append(makeBatch(testBatch{records: 1}), AppendOptions{LeaderEpoch: 7}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ckpt)
	if err != nil || !strings.Contains(string(b), "7 6") {
		t.Fatalf("checkpoint after the flush: %q, %v (want the entry 7 6)", b, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
