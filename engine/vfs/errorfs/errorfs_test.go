package errorfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
)

func TestRules(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default, 1)
	fs.Add(Rule{Ops: OpWrite, Path: "*.log", After: 2, Limit: 1, Errno: syscall.ENOSPC, PartialWrite: true})
	f, err := fs.OpenFile(filepath.Join(dir, "a.log"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; i < 2; i++ {
		if _, err := f.Write([]byte("ab")); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	n, err := f.Write([]byte("cdef"))
	if n != 2 || !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrInjected) {
		t.Fatalf("third write: %d %v", n, err)
	}
	if _, err := f.Write([]byte("gh")); err != nil {
		t.Fatalf("past the limit: %v", err)
	}
	if b, _ := os.ReadFile(f.Name()); string(b) != "ababcdgh" {
		t.Fatalf("content %q", b)
	}
	// Other paths and kinds are untouched; a probabilistic rule is seeded.
	g, err := fs.OpenFile(filepath.Join(dir, "b.index"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	count := func(seed int64) int {
		fs := New(vfs.Default, seed)
		fs.Add(Rule{Ops: OpSync, Prob: 0.5})
		h, _ := fs.OpenFile(filepath.Join(dir, "b.index"), os.O_RDWR, 0)
		defer h.Close()
		n := 0
		for i := 0; i < 100; i++ {
			if err := h.Datasync(); errors.Is(err, syscall.EIO) {
				n++
			}
		}
		return n
	}
	if a, b := count(7), count(7); a != b || a == 0 || a == 100 {
		t.Fatalf("seeded probability: %d and %d of 100", a, b)
	}
	if vfs.OSFile(f) == nil {
		t.Fatal("no OS file under an errorfs file")
	}
}

func TestSyncFSRule(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default, 1)
	s, err := vfs.OpenFSSync(fs, dir)
	if errors.Is(err, vfs.ErrFSSyncUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Sync(); err != nil {
		t.Fatalf("no rule: %v", err)
	}
	fs.Add(Rule{Ops: OpSyncFS, Path: dir, Limit: 1})
	if err := s.Sync(); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrInjected) {
		t.Fatalf("with a rule on the directory: %v", err)
	}
	if err := s.Sync(); err != nil {
		t.Fatalf("past the limit: %v", err)
	}
}
