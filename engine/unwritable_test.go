package engine

import (
	"slices"
	"syscall"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/engine/vfs/errorfs"
)

// UnwritableDirs: a directory is listed once an append found it full and while its
// usable space stays under SpaceRecovered, whether or not anything appends; it
// leaves the list when space is back. An offline directory stays listed.
func TestUnwritableDirs(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	efs := errorfs.New(vfs.Default, 1)
	m := openFS(t, dirs, SyncFsync, efs)
	defer m.Close()
	usable := map[string]int64{dirs[0]: 1 << 30, dirs[1]: 1 << 30}
	m.space = func(p string) (int64, int64) { return 2 << 30, usable[p] }
	if got := m.UnwritableDirs(); len(got) != 0 {
		t.Fatalf("fresh manager: %v", got)
	}
	l, err := m.CreateLog(TopicPartition{"full", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	full := l.ld.path
	id := efs.Add(errorfs.Rule{Ops: errorfs.OpWrite, Path: "*.log", Errno: syscall.ENOSPC})
	usable[full] = 4 << 10
	if _, err := l.Append(makeBatch(testBatch{records: 2, valueSize: 100}), AppendOptions{}); err == nil {
		t.Fatal("append on a full disk succeeded")
	}
	for range 2 { // listed on every call while the space stays short
		if got := m.UnwritableDirs(); !slices.Equal(got, []string{full}) {
			t.Fatalf("after ENOSPC: %v, want [%s]", got, full)
		}
	}
	// Some space back, not enough.
	usable[full] = SpaceRecovered - 1
	if got := m.UnwritableDirs(); !slices.Equal(got, []string{full}) {
		t.Fatalf("with %d bytes usable: %v", usable[full], got)
	}
	// Enough: writable again without any append in between.
	usable[full] = SpaceRecovered
	if got := m.UnwritableDirs(); len(got) != 0 {
		t.Fatalf("space back: %v", got)
	}
	efs.RemoveRule(id)
	r := mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 100}))
	if err := l.WaitDurable(r.LastOffset); err != nil {
		t.Fatal(err)
	}
	if got := m.UnwritableDirs(); len(got) != 0 {
		t.Fatalf("after a good append: %v", got)
	}
	// A failed fdatasync: offline, listed whatever the space.
	efs.Add(errorfs.Rule{Ops: errorfs.OpSync, Path: "*.log", Errno: syscall.EIO})
	r = mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 100}))
	if err := l.WaitDurable(r.LastOffset); err == nil {
		t.Fatal("WaitDurable after a failed fdatasync succeeded")
	}
	if got := m.UnwritableDirs(); !slices.Equal(got, []string{full}) {
		t.Fatalf("offline: %v, want [%s]", got, full)
	}
}
