package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParseRelease(t *testing.T) {
	for _, c := range []struct {
		rel      string
		maj, min int
		ok       bool
	}{
		{"6.18.44-fc-v1098", 6, 18, true},
		{"5.8.0", 5, 8, true},
		{"5.10", 5, 10, true},
		{"4.19.0-27-amd64", 4, 19, true},
		{"6", 0, 0, false},
		{"x.1", 0, 0, false},
		{"", 0, 0, false},
		{"99999999999999999999.1", 0, 0, false},
	} {
		maj, min, ok := parseRelease(c.rel)
		if ok != c.ok || ok && (maj != c.maj || min != c.min) {
			t.Errorf("parseRelease(%q) = %d, %d, %v; want %d, %d, %v", c.rel, maj, min, ok, c.maj, c.min, c.ok)
		}
	}
}

// TestCrashFSSyncFS: a syncfs of a directory makes the files below it durable
// at their sizes before the call, and the names created in it, and nothing
// outside it.
func TestCrashFSSyncFS(t *testing.T) {
	root := t.TempDir()
	c := NewCrashFS(Default)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	logs, other := filepath.Join(root, "logs"), filepath.Join(root, "other")
	must(c.MkdirAll(filepath.Join(logs, "p-0"), 0o755))
	must(c.MkdirAll(other, 0o755))
	must(c.SyncDir(root))
	must(c.SyncDir(logs))
	s, err := c.OpenFSSync(logs)
	if errors.Is(err, ErrFSSyncUnsupported) {
		t.Skip(err)
	}
	must(err)
	defer s.Close()
	a, err := c.OpenFile(filepath.Join(logs, "p-0", "a"), os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	write(t, a, "kept")
	o, err := c.OpenFile(filepath.Join(other, "o"), os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	write(t, o, "lost")
	must(c.SyncDir(other))
	must(s.Sync())
	write(t, a, "-after")
	must(c.Crash())
	c.Restart()
	if got, _ := content(t, filepath.Join(logs, "p-0", "a")); got != "kept" {
		t.Errorf("a = %q after the crash, want what was written before the syncfs", got)
	}
	if got, ok := content(t, filepath.Join(other, "o")); !ok || got != "" {
		t.Errorf("o = %q (exists %v), want an empty file: its directory was synced, its data never", got, ok)
	}
	if err := s.Sync(); err == nil {
		t.Error("a handle opened before the crash still syncs")
	}
}
