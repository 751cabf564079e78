package vfs

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// overwrites runs the overwrite part of the model against fs: an overwrite
// below the synced size is lost unless a sync of its file, or its write-back
// and then a cache flush, covers it; a write-back never makes an append durable.
func overwrites(t *testing.T, fs FS, dir string) (check func()) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	open := func(name, data string) File {
		f, err := fs.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
		must(err)
		write(t, f, data)
		must(f.Datasync())
		return f
	}
	at := func(f File, s string, off int64) {
		t.Helper()
		_, err := f.WriteAt([]byte(s), off)
		must(err)
	}
	g, s, h, i := open("g", "gggggggg"), open("s", "ssssssss"), open("h", "hhhhhhhh"), open("i", "iiiiiiii")
	must(fs.SyncDir(dir))
	at(g, "GG", 2) // never synced
	at(s, "SS", 0)
	must(s.Datasync()) // its own sync
	at(h, "HH", 0)
	at(h, "ZZZZ", 8) // an append: written back, but its size is never committed
	must(h.(Writeback).WaitWriteback())
	must(s.Datasync()) // another file's sync flushes the cache: h's overwrite is durable
	at(i, "II", 0)
	must(i.(Writeback).WaitWriteback()) // no flush after it
	return func() {
		want := map[string]string{"g": "gg\x00\x00gggg", "s": "SSssssss", "h": "HHhhhhhh", "i": "\x00\x00iiiiii"}
		for name, w := range want {
			if got, _ := content(t, filepath.Join(dir, name)); got != w {
				t.Errorf("%s = %q, want %q", name, got, w)
			}
		}
		for _, f := range []File{g, s, h, i} {
			f.Close()
		}
	}
}

func TestCrashModelOverwrites(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("write-back without a cache flush is Linux's sync_file_range")
	}
	t.Run("memory", func(t *testing.T) {
		dir := t.TempDir()
		fs := NewCrashFS(Default)
		check := overwrites(t, fs, dir)
		if err := fs.Crash(); err != nil {
			t.Fatal(err)
		}
		check()
	})
	t.Run("journal", func(t *testing.T) {
		dir := t.TempDir()
		jpath := filepath.Join(t.TempDir(), "journal")
		fs, err := OpenJournal(Default, jpath)
		if err != nil {
			t.Fatal(err)
		}
		check := overwrites(t, fs, dir)
		fs2, err := OpenJournal(Default, jpath) // the process died: the journal cuts
		if err != nil {
			t.Fatal(err)
		}
		defer fs2.CloseJournal()
		fs.Crash()
		check()
	})
}

func TestSyncFlushesCache(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	dir := t.TempDir()
	// What the machine's temporary directory is on decides the answer; that it
	// is asked through a CrashFS does not.
	if a, b := SyncFlushesCache(Default, dir), SyncFlushesCache(NewCrashFS(Default), dir); a != b {
		t.Fatalf("os %v, crash model %v", a, b)
	}
	if SyncFlushesCache(struct{ FS }{Default}, dir) {
		t.Fatal("an FS that cannot say said yes")
	}
}
