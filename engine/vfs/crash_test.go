package vfs

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, f File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// scenario runs the same steps against fs: the expectations after a crash
// are the model's (see the CrashFS doc).
func scenario(t *testing.T, fs FS, dir string) (crashed func()) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// a: created, dir synced, synced part-way, appended after.
	a, err := fs.OpenFile(filepath.Join(dir, "a"), os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	must(fs.SyncDir(dir))
	write(t, a, "synced")
	must(a.Datasync())
	write(t, a, "-lost")
	// b: created and synced, but its directory entry never synced: gone.
	b, err := fs.OpenFile(filepath.Join(dir, "b"), os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	write(t, b, "data")
	must(b.Sync())
	// c: written whole, synced, renamed over an older c without a dir sync:
	// the old c comes back.
	must(os.WriteFile(filepath.Join(dir, "c"), []byte("old"), 0o644))
	tmp, err := fs.OpenFile(filepath.Join(dir, "c.tmp"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	must(err)
	write(t, tmp, "new")
	must(tmp.Sync())
	must(tmp.Close())
	must(fs.Rename(filepath.Join(dir, "c.tmp"), filepath.Join(dir, "c")))
	// d: a new directory never synced in its parent, with a synced file.
	must(fs.MkdirAll(filepath.Join(dir, "d", "e"), 0o755))
	x, err := fs.OpenFile(filepath.Join(dir, "d", "e", "x"), os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	write(t, x, "x")
	must(x.Sync())
	must(fs.SyncDir(filepath.Join(dir, "d", "e")))
	// f: a file that existed before, overwritten in place (kept), truncated
	// (kept), written past the truncation (lost).
	must(os.WriteFile(filepath.Join(dir, "f"), []byte("0123456789"), 0o644))
	f, err := fs.OpenFile(filepath.Join(dir, "f"), os.O_RDWR, 0)
	must(err)
	write(t, f, "tail")
	must(f.Truncate(4))
	if _, err := f.WriteAt([]byte("more"), 4); err != nil {
		t.Fatal(err)
	}
	return func() {
		if s, _ := content(t, filepath.Join(dir, "a")); s != "synced" {
			t.Errorf("a = %q, want the synced prefix", s)
		}
		if _, ok := content(t, filepath.Join(dir, "b")); ok {
			t.Error("b survived without a sync of its directory")
		}
		if s, _ := content(t, filepath.Join(dir, "c")); s != "old" {
			t.Errorf("c = %q, want the content the unsynced rename replaced", s)
		}
		if _, ok := content(t, filepath.Join(dir, "c.tmp")); ok {
			t.Error("c.tmp survived: its creation was never made durable")
		}
		if _, err := os.Stat(filepath.Join(dir, "d")); err == nil {
			t.Error("d survived without a sync of its parent")
		}
		if s, _ := content(t, filepath.Join(dir, "f")); s != "tail" {
			t.Errorf("f = %q, want the truncation kept and the unsynced tail gone", s)
		}
		if _, err := a.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrCrashed) {
			t.Errorf("a File opened before the crash: %v", err)
		}
		a.Close()
		b.Close()
		x.Close()
		f.Close()
	}
}

func TestCrashModel(t *testing.T) {
	dir := t.TempDir()
	fs := NewCrashFS(Default)
	check := scenario(t, fs, dir)
	if err := fs.Crash(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(dir); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Stat after Crash: %v", err)
	}
	check()
	fs.Restart()
	if _, err := fs.Stat(dir); err != nil {
		t.Fatal(err)
	}
	if st := fs.LastCut(); st.FilesCut < 2 || st.Undone < 3 {
		t.Fatalf("cut stats %+v", st)
	}
}

// The journal, replayed by a new OpenJournal, cuts exactly as Crash does.
func TestJournalReplaysTheModel(t *testing.T) {
	dir := t.TempDir()
	jpath := filepath.Join(t.TempDir(), "journal")
	fs, err := OpenJournal(Default, jpath)
	if err != nil {
		t.Fatal(err)
	}
	check := scenario(t, fs, dir)
	// The process dies here: nothing more happens through fs.
	fs2, err := OpenJournal(Default, jpath)
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.CloseJournal()
	fs.Crash() // only so that check's handles report ErrCrashed; the disk is already cut
	check()
	if st := fs2.LastCut(); st.FilesCut < 2 {
		t.Fatalf("cut stats %+v", st)
	}
	if fi, err := os.Stat(jpath); err != nil || fi.Size() != 0 {
		t.Fatalf("journal after replay: %v %v", fi, err)
	}
}

func TestCrashTornKeepsAPrefix(t *testing.T) {
	dir := t.TempDir()
	fs := NewCrashFS(Default)
	f, _ := fs.OpenFile(filepath.Join(dir, "a"), os.O_RDWR|os.O_CREATE, 0o644)
	fs.SyncDir(dir)
	write(t, f, "synced")
	f.Datasync()
	write(t, f, "0123456789")
	if err := fs.CrashTorn(rand.New(rand.NewSource(5))); err != nil {
		t.Fatal(err)
	}
	s, _ := content(t, filepath.Join(dir, "a"))
	if len(s) < 6 || s != "synced0123456789"[:len(s)] {
		t.Fatalf("a = %q", s)
	}
	f.Close()
}
