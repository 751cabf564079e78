package vfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// ErrCrashed is returned by every operation of a CrashFS after Crash (until
// Restart) and, for ever, by the Files opened before it.
var ErrCrashed = errors.New("vfs: the machine has crashed")

// CrashFS simulates power loss over a real file system: it remembers what an
// fsync made durable, and Crash puts every file back to that. The files stay
// real files (mmap, sendfile and fallocate work on them); the model is kept
// beside them, in memory or, for a process that will be killed, in a journal
// (OpenJournal).
//
// The model, precisely:
//
//  1. Data. Each file tracked (opened for writing through the FS) has a
//     synced size: its size when the FS first saw it, then its size just
//     before each successful Sync or Datasync of one of its Files, lowered
//     by every truncation (Truncate, O_TRUNC) to the new size. Crash
//     cuts every tracked file to min(synced size, size now): bytes appended
//     since the last sync are lost; a file never synced becomes empty.
//     CrashTorn instead keeps a random part of each unsynced tail (a torn
//     write).
//  2. Overwrites. A WriteAt below the synced size is lost at a crash until a
//     Sync or Datasync of its file covers it, or until it was written back
//     (WaitWriteback, writeback.go) and then any Sync or Datasync of the FS, or
//     an FSSync, flushed the device's cache: Crash writes zeros over what is
//     lost (what a segment written ahead held there), CrashTorn over a random
//     half of it. Written back alone does not make bytes above the synced
//     size durable: their size is metadata, which only a sync commits.
//     Write (what writes whole files and appends) is not tracked: what it
//     overwrites counts as durable at once, as does a truncation.
//     Writes through a memory mapping are not seen at all; what a mapping
//     wrote below the synced size survives, what lies above is cut.
//  3. Names. A creation (OpenFile with O_CREATE of a missing file), a
//     directory creation (MkdirAll) and a rename are durable once the
//     directory holding the new name is synced (SyncDir). Crash undoes the
//     others, newest first: a created file or directory is removed (with
//     what is in it), a renamed file goes back to its old name, and the file
//     a rename replaced comes back with the content it had.
//  4. A removal (Remove, RemoveAll) is durable at once; the model never
//     brings a removed file back.
//
// Log segments are append-only, which is what makes the size model sound for
// them; the engine's other files are written whole to a temporary name,
// synced and renamed (checkpoints, snapshots), or are indexes, which it
// checks at every use and rebuilds.
//
// All methods are safe for concurrent use. Operations hold a shared lock
// while they run and Crash an exclusive one, so nothing reaches the disk
// after the crash point.
type CrashFS struct {
	inner FS

	opMu    sync.RWMutex // shared by operations, exclusive for Crash
	crashed bool
	gen     int // generation: bumped by every Crash

	mu      sync.Mutex // guards the model
	files   map[string]*crashState
	wb      map[*crashState]bool // files with overwrites written back and not yet flushed
	pending []nsOp
	journal File // nil in memory mode
	jerr    error
	last    CutStats
}

type crashState struct {
	path    string // current name
	synced  int64
	gone    bool   // removed: later syncs of its Files change nothing
	lost    []span // overwrites below synced not yet synced or written back
	written []span // overwrites written back, durable at the next cache flush
}

// span is a range of a file, [off, off+n).
type span struct{ off, n int64 }

// clip cuts spans to [0, size).
func clip(ss []span, size int64) []span {
	kept := ss[:0]
	for _, s := range ss {
		if s.off < size {
			s.n = min(s.n, size-s.off)
			kept = append(kept, s)
		}
	}
	return kept
}

// nsOp is a namespace change not yet made durable.
type nsOp struct {
	kind        byte // 'C' create, 'M' mkdir, 'R' rename
	path        string
	old         string // rename: the old name
	dir         string // the directory whose sync makes it durable
	hadOld      bool   // rename: path existed before and was replaced
	overwritten []byte // rename: the replaced file's content
}

// NewCrashFS returns a CrashFS over inner that keeps its model in memory.
// Every file already on disk counts as synced at its size when first opened.
func NewCrashFS(inner FS) *CrashFS {
	return &CrashFS{inner: inner, files: make(map[string]*crashState), wb: make(map[*crashState]bool)}
}

// Crash simulates a power loss now: every operation in progress finishes,
// then the FS and every File opened through it fail with ErrCrashed, and
// the files on disk are put back to what the model says survives. Restart
// makes the FS usable again. Memory mappings of files (made through Fd) are
// not the FS's to stop: their owner must not touch them after Crash, as
// nothing of a process runs on after a power loss.
func (c *CrashFS) Crash() error { return c.crash(nil) }

// CrashTorn is Crash, except that each file keeps a random part (drawn from
// rnd) of the bytes it had past its synced size, as when a write was under
// way.
func (c *CrashFS) CrashTorn(rnd *rand.Rand) error { return c.crash(rnd) }

func (c *CrashFS) crash(rnd *rand.Rand) error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	if c.crashed {
		return ErrCrashed
	}
	c.crashed = true
	c.gen++
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cutLocked(rnd)
}

// Restart ends a crash: the FS takes operations again, with everything now
// on disk counted as durable.
func (c *CrashFS) Restart() {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	c.crashed = false
}

// CutStats says what a crash (or OpenJournal) put back.
type CutStats struct {
	Undone    int   // creations and renames undone
	FilesCut  int   // files cut back to their synced size
	BytesLost int64 // bytes cut off, and overwrites put back to zeros
}

// LastCut is what the last Crash, CrashTorn or OpenJournal cut.
func (c *CrashFS) LastCut() CutStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// cutLocked applies the model to the disk and starts a fresh one.
func (c *CrashFS) cutLocked(rnd *rand.Rand) error {
	var errs []error
	c.last = CutStats{Undone: len(c.pending)}
	for i := len(c.pending) - 1; i >= 0; i-- {
		if err := c.undoLocked(c.pending[i]); err != nil {
			errs = append(errs, err)
		}
	}
	c.pending = nil
	paths := make([]string, 0, len(c.files))
	for p := range c.files {
		paths = append(paths, p)
	}
	sort.Strings(paths) // a seeded rnd draws the same way every time
	for _, p := range paths {
		st := c.files[p]
		fi, err := c.inner.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		target := min(st.synced, fi.Size())
		if rnd != nil && fi.Size() > target {
			target += rnd.Int63n(fi.Size() - target + 1)
		}
		var lost []span
		for _, sp := range clip(append(st.lost, st.written...), target) {
			if rnd == nil || rnd.Intn(2) == 0 {
				lost = append(lost, sp)
			}
		}
		if target == fi.Size() && len(lost) == 0 {
			continue
		}
		f, err := c.inner.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if target < fi.Size() {
			if err := f.Truncate(target); err != nil {
				errs = append(errs, err)
			} else {
				c.last.FilesCut++
				c.last.BytesLost += fi.Size() - target
			}
		}
		for _, sp := range lost {
			if err := writeZeros(f, sp); err != nil {
				errs = append(errs, err)
				break
			}
			c.last.BytesLost += sp.n
		}
		f.Close()
	}
	c.files = make(map[string]*crashState)
	c.wb = make(map[*crashState]bool)
	return errors.Join(errs...)
}

// writeZeros writes zeros over sp of f.
func writeZeros(f File, sp span) error {
	zeros := make([]byte, min(sp.n, 64<<10))
	for off, end := sp.off, sp.off+sp.n; off < end; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), end-off)], off); err != nil {
			return err
		}
	}
	return nil
}

func (c *CrashFS) undoLocked(op nsOp) error {
	switch op.kind {
	case 'C':
		if err := c.inner.Remove(op.path); err != nil && !IsNotExist(err) {
			return err
		}
	case 'M':
		return c.inner.RemoveAll(op.path)
	case 'R':
		if _, err := c.inner.Stat(op.path); err == nil {
			if _, err := c.inner.Stat(op.old); err == nil {
				if err := c.inner.RemoveAll(op.old); err != nil {
					return err
				}
			}
			if err := c.inner.Rename(op.path, op.old); err != nil {
				return err
			}
			c.moveLocked(op.path, op.old)
		}
		if op.hadOld {
			f, err := c.inner.OpenFile(op.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = f.Write(op.overwritten)
			if e := f.Close(); err == nil {
				err = e
			}
			return err
		}
	}
	return nil
}

// moveLocked renames the model's entries at and below from.
func (c *CrashFS) moveLocked(from, to string) {
	for p, st := range c.files {
		if p == from || strings.HasPrefix(p, from+"/") {
			delete(c.files, p)
			np := to + p[len(from):]
			st.path = np
			c.files[np] = st
		}
	}
}

func (c *CrashFS) dropLocked(path string, below bool) {
	for p, st := range c.files {
		if p == path || below && strings.HasPrefix(p, path+"/") {
			st.gone = true
			delete(c.files, p)
			delete(c.wb, st)
		}
	}
}

// begin takes the shared lock for one operation; ok is false after a crash.
func (c *CrashFS) begin() bool {
	c.opMu.RLock()
	if c.crashed {
		c.opMu.RUnlock()
		return false
	}
	return true
}

func (c *CrashFS) end() { c.opMu.RUnlock() }

func crashed(op, path string) error { return &os.PathError{Op: op, Path: path, Err: ErrCrashed} }

// OpenFile implements FS.
func (c *CrashFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if !c.begin() {
		return nil, crashed("open", name)
	}
	defer c.end()
	p := filepath.Clean(name)
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	var before os.FileInfo
	var existed bool
	if writable {
		var err error
		before, err = c.inner.Stat(p)
		existed = err == nil
	}
	f, err := c.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	cf := &crashFile{File: f, c: c, gen: c.gen}
	if !writable {
		return cf, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st := c.files[p]; {
	case !existed:
		cf.st = c.applyLocked(event{kind: 'C', path: p})
	case st != nil:
		cf.st = st
	default:
		cf.st = c.applyLocked(event{kind: 'K', path: p, size: before.Size()})
	}
	if existed && flag&os.O_TRUNC != 0 {
		c.applyLocked(event{kind: 'T', path: p, size: 0})
	}
	return cf, nil
}

// Rename implements FS.
func (c *CrashFS) Rename(oldname, newname string) error {
	if !c.begin() {
		return crashed("rename", newname)
	}
	defer c.end()
	op, np := filepath.Clean(oldname), filepath.Clean(newname)
	var content []byte
	hadOld := false
	if fi, err := c.inner.Stat(np); err == nil && fi.Mode().IsRegular() {
		b, err := ReadFile(c.inner, np)
		if err != nil {
			return err
		}
		content, hadOld = b, true
	}
	if err := c.inner.Rename(oldname, newname); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyLocked(event{kind: 'R', old: op, path: np, hadOld: hadOld, data: content})
	return nil
}

// Remove implements FS.
func (c *CrashFS) Remove(name string) error {
	if !c.begin() {
		return crashed("remove", name)
	}
	defer c.end()
	if err := c.inner.Remove(name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyLocked(event{kind: 'X', path: filepath.Clean(name)})
	return nil
}

// RemoveAll implements FS.
func (c *CrashFS) RemoveAll(path string) error {
	if !c.begin() {
		return crashed("removeall", path)
	}
	defer c.end()
	err := c.inner.RemoveAll(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyLocked(event{kind: 'A', path: filepath.Clean(path)})
	return err
}

// MkdirAll implements FS.
func (c *CrashFS) MkdirAll(path string, perm os.FileMode) error {
	if !c.begin() {
		return crashed("mkdir", path)
	}
	defer c.end()
	p := filepath.Clean(path)
	var created []string
	for d := p; ; d = filepath.Dir(d) {
		if _, err := c.inner.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := c.inner.MkdirAll(path, perm); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(created) - 1; i >= 0; i-- {
		c.applyLocked(event{kind: 'M', path: created[i]})
	}
	return nil
}

// ReadDir implements FS.
func (c *CrashFS) ReadDir(name string) ([]os.DirEntry, error) {
	if !c.begin() {
		return nil, crashed("readdir", name)
	}
	defer c.end()
	return c.inner.ReadDir(name)
}

// Stat implements FS.
func (c *CrashFS) Stat(name string) (os.FileInfo, error) {
	if !c.begin() {
		return nil, crashed("stat", name)
	}
	defer c.end()
	return c.inner.Stat(name)
}

// SyncDir implements FS.
func (c *CrashFS) SyncDir(dir string) error {
	if !c.begin() {
		return crashed("syncdir", dir)
	}
	defer c.end()
	if err := c.inner.SyncDir(dir); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyLocked(event{kind: 'D', path: filepath.Clean(dir)})
	return nil
}

// event is one change of the model; the journal holds them in order.
type event struct {
	// K known, C create, S sync, T truncate, M mkdir, R rename, X remove, A remove
	// all, D sync dir, O overwrite (size: its offset; data: its length, 8 bytes
	// big-endian), W written back, F cache flushed
	kind   byte
	path   string
	old    string
	size   int64
	hadOld bool
	data   []byte
}

// applyLocked changes the model (and journals the change). It returns the
// state of ev.path for K, C and S.
func (c *CrashFS) applyLocked(ev event) *crashState {
	if c.journal != nil && c.jerr == nil {
		if _, err := c.journal.Write(ev.encode()); err != nil {
			c.jerr = err
		}
	}
	return c.replayLocked(ev)
}

func (c *CrashFS) replayLocked(ev event) *crashState {
	switch ev.kind {
	case 'K':
		st := &crashState{path: ev.path, synced: ev.size}
		c.files[ev.path] = st
		return st
	case 'C':
		st := &crashState{path: ev.path}
		c.files[ev.path] = st
		c.pending = append(c.pending, nsOp{kind: 'C', path: ev.path, dir: filepath.Dir(ev.path)})
		return st
	case 'S':
		st := c.files[ev.path]
		if st == nil {
			st = &crashState{path: ev.path}
			c.files[ev.path] = st
		}
		st.synced = ev.size
		st.lost, st.written = nil, nil
		delete(c.wb, st)
		return st
	case 'T':
		if st := c.files[ev.path]; st != nil {
			st.synced = min(st.synced, ev.size)
			st.lost, st.written = clip(st.lost, ev.size), clip(st.written, ev.size)
		}
	case 'O':
		if st := c.files[ev.path]; st != nil && len(ev.data) == 8 {
			sp := span{ev.size, int64(binary.BigEndian.Uint64(ev.data))}
			if n := len(st.lost); n > 0 && st.lost[n-1].off+st.lost[n-1].n == sp.off {
				st.lost[n-1].n += sp.n
			} else {
				st.lost = append(st.lost, sp)
			}
		}
	case 'W':
		if st := c.files[ev.path]; st != nil && len(st.lost) > 0 {
			st.written = append(st.written, st.lost...)
			st.lost = nil
			c.wb[st] = true
		}
	case 'F':
		for st := range c.wb {
			st.written = nil
		}
		clear(c.wb)
	case 'M':
		c.pending = append(c.pending, nsOp{kind: 'M', path: ev.path, dir: filepath.Dir(ev.path)})
	case 'R':
		c.dropLocked(ev.path, true)
		c.moveLocked(ev.old, ev.path)
		c.pending = append(c.pending, nsOp{kind: 'R', path: ev.path, old: ev.old, dir: filepath.Dir(ev.path),
			hadOld: ev.hadOld, overwritten: ev.data})
	case 'X':
		c.dropLocked(ev.path, false)
	case 'A':
		c.dropLocked(ev.path, true)
	case 'D':
		kept := c.pending[:0]
		for _, op := range c.pending {
			if op.dir != ev.path {
				kept = append(kept, op)
			}
		}
		clear(c.pending[len(kept):])
		c.pending = kept
	}
	return nil
}

// JournalErr is the first error writing the journal, if any: from then on
// the journal is incomplete and a cut at the next Open would be wrong.
func (c *CrashFS) JournalErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jerr
}

// crashFile is a File of a CrashFS.
type crashFile struct {
	File
	c   *CrashFS
	gen int
	st  *crashState // nil for a file opened read-only
}

func (f *crashFile) Unwrap() File { return f.File }

func (f *crashFile) begin() bool {
	if !f.c.begin() {
		return false
	}
	if f.gen != f.c.gen {
		f.c.end()
		return false
	}
	return true
}

func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	if !f.begin() {
		return 0, crashed("read", f.Name())
	}
	defer f.c.end()
	return f.File.ReadAt(p, off)
}

// WriteAt records what it wrote below the synced size: lost at a crash until a
// sync covers it. It is recorded after the write: a sync between the two does not
// count for it, so that the model claims less than the disk holds, never more.
func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	if !f.begin() {
		return 0, crashed("write", f.Name())
	}
	defer f.c.end()
	n, err := f.File.WriteAt(p, off)
	if n > 0 && f.st != nil {
		f.c.mu.Lock()
		if below := min(off+int64(n), f.st.synced); !f.st.gone && off < below {
			var l [8]byte
			binary.BigEndian.PutUint64(l[:], uint64(below-off))
			f.c.applyLocked(event{kind: 'O', path: f.st.path, size: off, data: l[:]})
		}
		f.c.mu.Unlock()
	}
	return n, err
}

func (f *crashFile) Write(p []byte) (int, error) {
	if !f.begin() {
		return 0, crashed("write", f.Name())
	}
	defer f.c.end()
	return f.File.Write(p)
}

// Truncate is durable at once in the model: it lowers the synced size.
func (f *crashFile) Truncate(size int64) error {
	if !f.begin() {
		return crashed("truncate", f.Name())
	}
	defer f.c.end()
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	if f.st != nil {
		f.c.mu.Lock()
		if !f.st.gone {
			f.c.applyLocked(event{kind: 'T', path: f.st.path, size: size})
		}
		f.c.mu.Unlock()
	}
	return nil
}

func (f *crashFile) Stat() (os.FileInfo, error) {
	if !f.begin() {
		return nil, crashed("stat", f.Name())
	}
	defer f.c.end()
	return f.File.Stat()
}

func (f *crashFile) Sync() error     { return f.sync(f.File.Sync) }
func (f *crashFile) Datasync() error { return f.sync(f.File.Datasync) }

// sync records the size seen before the sync: what was written before it
// started is what the sync covers. The model is locked while it runs, so that an
// overwrite is recorded either before it (covered) or after it (not). A sync also
// flushes the device's cache ('F'): what other files wrote back (WaitWriteback)
// before it began is durable after it.
func (f *crashFile) sync(do func() error) error {
	if !f.begin() {
		return crashed("sync", f.Name())
	}
	defer f.c.end()
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var size int64 = -1
	if f.st != nil {
		fi, err := f.File.Stat()
		if err != nil {
			return err
		}
		size = fi.Size()
	}
	if err := do(); err != nil {
		return err
	}
	if f.st != nil && !f.st.gone {
		c.applyLocked(event{kind: 'S', path: f.st.path, size: size})
	}
	if len(c.wb) > 0 {
		c.applyLocked(event{kind: 'F'})
	}
	return nil
}

// WaitWriteback implements Writeback when the inner File does: the file's
// overwrites recorded before it become durable at the next cache flush ('W').
func (f *crashFile) WaitWriteback() error {
	w, ok := f.File.(Writeback)
	if !ok {
		return &os.PathError{Op: "writeback", Path: f.Name(), Err: errors.ErrUnsupported}
	}
	if !f.begin() {
		return crashed("writeback", f.Name())
	}
	defer f.c.end()
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := w.WaitWriteback(); err != nil {
		return err
	}
	if f.st != nil && !f.st.gone && len(f.st.lost) > 0 {
		c.applyLocked(event{kind: 'W', path: f.st.path})
	}
	return nil
}

// SyncFlushesCache implements CacheFlusher as the inner FS does.
func (c *CrashFS) SyncFlushesCache(dir string) bool { return SyncFlushesCache(c.inner, dir) }

// Close always releases the descriptor, crashed or not.
func (f *crashFile) Close() error { return f.File.Close() }

func (ev event) String() string {
	return fmt.Sprintf("%c %s %s %d", ev.kind, ev.path, ev.old, ev.size)
}

// OpenFSSync implements FSSyncer when the inner FS does. The model takes a
// successful Sync as a sync of every tracked file below dir, at its size just
// before the call, and of every directory below dir (the names created or
// renamed in them become durable). The real syncfs covers the whole file
// system, so the model claims less than the disk holds, never more. While a
// Sync runs the model is locked: a file created or renamed meanwhile waits
// and is not covered.
func (c *CrashFS) OpenFSSync(dir string) (FSSync, error) {
	if !c.begin() {
		return nil, crashed("syncfs", dir)
	}
	defer c.end()
	inner, err := OpenFSSync(c.inner, dir)
	if err != nil {
		return nil, err
	}
	return &crashFSSync{FSSync: inner, c: c, dir: filepath.Clean(dir), gen: c.gen}, nil
}

type crashFSSync struct {
	FSSync
	c   *CrashFS
	dir string
	gen int
}

func (s *crashFSSync) Sync() error {
	c := s.c
	if !c.begin() {
		return crashed("syncfs", s.dir)
	}
	defer c.end()
	if s.gen != c.gen {
		return crashed("syncfs", s.dir)
	}
	below := func(p string) bool { return p == s.dir || strings.HasPrefix(p, s.dir+string(filepath.Separator)) }
	c.mu.Lock()
	defer c.mu.Unlock()
	type sized struct {
		st   *crashState
		size int64
	}
	var files []sized
	for _, st := range c.files {
		if st.gone || !below(st.path) {
			continue
		}
		fi, err := c.inner.Stat(st.path)
		if err != nil {
			continue // removed or renamed outside the FS: nothing to claim
		}
		files = append(files, sized{st, fi.Size()})
	}
	dirs := map[string]bool{}
	for _, op := range c.pending {
		if below(op.dir) {
			dirs[op.dir] = true
		}
	}
	if err := s.FSSync.Sync(); err != nil {
		return err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].st.path < files[j].st.path })
	for _, f := range files {
		c.applyLocked(event{kind: 'S', path: f.st.path, size: f.size})
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		c.applyLocked(event{kind: 'D', path: d})
	}
	if len(c.wb) > 0 {
		c.applyLocked(event{kind: 'F'})
	}
	return nil
}
