package engine

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/engine/vfs/errorfs"
)

// allocated is the disk space a file takes (its blocks, not its size).
func allocated(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

func activeIndexPaths(l *Log) (string, string) {
	l.mu.RLock()
	s := l.segs[len(l.segs)-1]
	l.mu.RUnlock()
	return s.path(indexSuffix), s.path(timeIndexSuffix)
}

// An idle partition's indexes take no disk space and no descriptor; they
// grow in steps as entries come, and are trimmed to their entries at close.
func TestIndexGrowsOnDemand(t *testing.T) {
	dir := t.TempDir()
	m := openFS(t, []string{dir}, SyncNone, nil)
	cfg := DefaultLogConfig()
	cfg.IndexIntervalBytes = 64 // an entry per batch
	l, err := m.CreateLog(TopicPartition{"grow", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ip, tp := activeIndexPaths(l)
	for _, p := range []string{ip, tp} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s of an idle log: %v; want no file (created with the first batch)", p, err)
		}
	}
	// No index descriptor is held: the process's descriptors that name
	// an index file.
	countIndexFds := func() int {
		ents, _ := os.ReadDir("/proc/self/fd")
		n := 0
		for _, e := range ents {
			if dst, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && filepath.Dir(dst) == l.Dir() && filepath.Ext(dst) != ".log" {
				n++
			}
		}
		return n
	}
	if n := countIndexFds(); n != 0 {
		t.Fatalf("%d index descriptors open, want 0", n)
	}
	var sizes []int64
	for i := 0; i < 3000; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 40, baseTs: int64(1000 + i)}))
		fi, _ := os.Stat(ip)
		if len(sizes) == 0 || sizes[len(sizes)-1] != fi.Size() {
			sizes = append(sizes, fi.Size())
		}
	}
	// 0, then 4 KiB, 8 KiB, 16 KiB, 32 KiB (3,000 entries of 8 bytes).
	want := []int64{0, 4096, 8192, 16384, 32768}
	if len(sizes) != len(want) {
		t.Fatalf("offset index sizes %v, want %v", sizes, want)
	}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("offset index sizes %v, want %v", sizes, want)
		}
	}
	if a := allocated(t, ip); a < 24000 {
		t.Fatalf("offset index has %d bytes allocated: growth must reserve its blocks (fallocate)", a)
	}
	if n := countIndexFds(); n != 0 {
		t.Fatalf("%d index descriptors open, want 0", n)
	}
	// Lookups over the grown index.
	for _, off := range []int64{0, 1, 511, 512, 1500, 2999} {
		buf, err := l.ReadCopy(off, 1<<20, l.LogEndOffset(), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ValidateBatch(buf)
		if err != nil || h.BaseOffset != off {
			t.Fatalf("read at %d: first batch at %d (%v)", off, h.BaseOffset, err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(ip)
	if fi.Size()%offsetEntrySize != 0 || fi.Size() >= 32768 || fi.Size() < 2900*offsetEntrySize {
		t.Fatalf("offset index after close: %d bytes, want its entries only", fi.Size())
	}
	m = openFS(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	if r := m.Recovery(); r.IndexesRebuilt != 0 || r.RecoveredLogs != 0 {
		t.Fatalf("reopen after a clean close: %+v", r)
	}
	l = m.Log(TopicPartition{"grow", 0})
	r := mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 40, baseTs: 9000}))
	if r.BaseOffset != 3000 {
		t.Fatalf("append after reopen at %d", r.BaseOffset)
	}
	if ts, off := l.MaxTimestamp(); ts != 9000 || off != 3000 {
		t.Fatalf("max timestamp %d at %d", ts, off)
	}
}

// An index that cannot grow (the disk is full) fails the append before
// anything is written; once the growth succeeds, appends go on.
func TestIndexGrowthFailureFailsAppend(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default, 1)
	m := openFS(t, []string{dir}, SyncFsync, efs)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.IndexIntervalBytes = 64
	l, err := m.CreateLog(TopicPartition{"nogrow", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 40}))
	// The index files are opened only to grow: an open failing with
	// ENOSPC stands for the fallocate a full disk refuses.
	id := efs.Add(errorfs.Rule{Ops: errorfs.OpOpen, Path: "*index", Errno: syscall.ENOSPC})
	leo, size := l.LogEndOffset(), l.Size()
	_, err = l.Append(makeBatch(testBatch{records: 1, valueSize: 40}), AppendOptions{})
	if !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("append whose index cannot grow: %v", err)
	}
	if l.LogEndOffset() != leo || l.Size() != size {
		t.Fatalf("log changed: LEO %d size %d, want %d %d", l.LogEndOffset(), l.Size(), leo, size)
	}
	efs.RemoveRule(id)
	for i := 0; i < 1000; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 40}))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A writable index found at its full preallocated size (an earlier version
// fallocated segment.index.bytes, and a crash left it so) gives the space
// back when it is rebuilt.
func TestIndexPreallocatedFileShrinks(t *testing.T) {
	dir := t.TempDir()
	m := openFS(t, []string{dir}, SyncNone, nil)
	l, err := m.CreateLog(TopicPartition{"old", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 10, valueSize: 100}))
	}
	ip, tp := activeIndexPaths(l)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(ip)
	entries := fi.Size()
	for _, p := range []string{ip, tp} {
		if err := os.Truncate(p, 10<<20); err != nil {
			t.Fatal(err)
		}
	}
	m = openFS(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	if fi, _ := os.Stat(ip); fi.Size() > 4096 || fi.Size() < entries {
		t.Fatalf("index reopened at %d bytes, want its entries (%d) rounded to a step", fi.Size(), entries)
	}
}
