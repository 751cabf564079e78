// Package errorfs wraps a vfs.FS and injects errors by rule, in the manner of
// cockroachdb/pebble's vfs/errorfs: ENOSPC on writes, EIO on reads or syncs,
// after N operations, at a seeded probability, on paths matching a pattern.
//
// An injected error is an *os.PathError whose Err is an Injected wrapping the
// errno, so errors.Is(err, syscall.ENOSPC) and errors.Is(err, ErrInjected)
// both hold. What goes through a File's descriptor (mmap, fallocate,
// sendfile) is not seen and cannot fail here.
//
// Rules can be added and removed while the FS is in use (to let a full disk
// get space back, say). All methods are safe for concurrent use.
package errorfs

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// Op is a set of operation kinds.
type Op uint32

const (
	OpOpen     Op = 1 << iota // OpenFile of an existing file, or without O_CREATE
	OpCreate                  // OpenFile with O_CREATE of a file that does not exist
	OpRead                    // File.ReadAt
	OpWrite                   // File.WriteAt, File.Write
	OpSync                    // File.Sync, File.Datasync
	OpTruncate                // File.Truncate
	OpStat                    // File.Stat, FS.Stat
	OpRename                  // FS.Rename
	OpRemove                  // FS.Remove, FS.RemoveAll
	OpMkdir                   // FS.MkdirAll
	OpReadDir                 // FS.ReadDir
	OpSyncDir                 // FS.SyncDir
	OpSyncFS                  // FSSync.Sync (the path is the directory it was opened on)

	// OpAny is every kind.
	OpAny Op = 1<<iota - 1
)

var opNames = [...]string{"open", "create", "read", "write", "sync", "truncate", "stat", "rename", "remove", "mkdir", "readdir", "syncdir", "syncfs"}

func (o Op) String() string {
	var s string
	for i, n := range opNames {
		if o&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

// ErrInjected matches every error this package injects.
var ErrInjected = errors.New("errorfs: injected error")

// Injected is an injected errno.
type Injected struct{ Errno syscall.Errno }

func (e *Injected) Error() string        { return "injected " + e.Errno.Error() }
func (e *Injected) Unwrap() error        { return e.Errno }
func (e *Injected) Is(target error) bool { return target == ErrInjected }

// Rule says which operations fail.
type Rule struct {
	// Ops are the operation kinds the rule applies to; 0 is OpAny.
	Ops Op
	// Path is a filepath.Match pattern, matched against the base name and
	// against the whole path; "" matches every path.
	Path string
	// After lets the first After matching operations through.
	After int64
	// Prob is the probability that a matching operation (past After) fails,
	// drawn from the FS's seeded source; 0 means always.
	Prob float64
	// Limit stops the rule after that many injections; 0 is no limit.
	Limit int64
	// Errno is what fails the operation (default EIO).
	Errno syscall.Errno
	// PartialWrite makes a failing WriteAt or Write first write the first
	// half of its bytes, as a write that runs out of space part-way does.
	PartialWrite bool
}

type rule struct {
	Rule
	id       int
	seen     int64
	injected int64
}

// FS injects errors into the operations of an inner FS.
type FS struct {
	inner vfs.FS

	mu     sync.Mutex
	rules  []*rule
	nextID int
	rng    *rand.Rand

	injected atomic.Int64
}

// New wraps inner; seed drives the probabilistic rules.
func New(inner vfs.FS, seed int64) *FS {
	return &FS{inner: inner, rng: rand.New(rand.NewSource(seed))}
}

// Add installs a rule and returns its id, for RemoveRule.
func (fs *FS) Add(r Rule) int {
	if r.Ops == 0 {
		r.Ops = OpAny
	}
	if r.Errno == 0 {
		r.Errno = syscall.EIO
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.nextID++
	fs.rules = append(fs.rules, &rule{Rule: r, id: fs.nextID})
	return fs.nextID
}

// RemoveRule uninstalls the rule with that id.
func (fs *FS) RemoveRule(id int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, r := range fs.rules {
		if r.id == id {
			fs.rules = append(fs.rules[:i], fs.rules[i+1:]...)
			return
		}
	}
}

// Clear uninstalls every rule.
func (fs *FS) Clear() {
	fs.mu.Lock()
	fs.rules = nil
	fs.mu.Unlock()
}

// Injected is the number of errors injected so far.
func (fs *FS) Injected() int64 { return fs.injected.Load() }

// check returns the rule that fails op on path, if any.
func (fs *FS) check(op Op, path string) *rule {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, r := range fs.rules {
		if r.Ops&op == 0 || !matches(r.Path, path) {
			continue
		}
		r.seen++
		if r.seen <= r.After || (r.Limit > 0 && r.injected >= r.Limit) {
			continue
		}
		if r.Prob > 0 && r.Prob < 1 && fs.rng.Float64() >= r.Prob {
			continue
		}
		r.injected++
		fs.injected.Add(1)
		return r
	}
	return nil
}

func matches(pattern, path string) bool {
	if pattern == "" {
		return true
	}
	if ok, _ := filepath.Match(pattern, filepath.Base(path)); ok {
		return true
	}
	ok, _ := filepath.Match(pattern, path)
	return ok
}

func (fs *FS) fail(op Op, path string) error {
	if r := fs.check(op, path); r != nil {
		return &os.PathError{Op: op.String(), Path: path, Err: &Injected{Errno: r.Errno}}
	}
	return nil
}

// OpenFile implements vfs.FS.
func (fs *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	op := OpOpen
	if flag&os.O_CREATE != 0 {
		if _, err := fs.inner.Stat(name); err != nil {
			op = OpCreate
		}
	}
	if err := fs.fail(op, name); err != nil {
		return nil, err
	}
	f, err := fs.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: fs}, nil
}

func (fs *FS) Rename(oldname, newname string) error {
	if err := fs.fail(OpRename, newname); err != nil {
		return err
	}
	return fs.inner.Rename(oldname, newname)
}

func (fs *FS) Remove(name string) error {
	if err := fs.fail(OpRemove, name); err != nil {
		return err
	}
	return fs.inner.Remove(name)
}

func (fs *FS) RemoveAll(path string) error {
	if err := fs.fail(OpRemove, path); err != nil {
		return err
	}
	return fs.inner.RemoveAll(path)
}

func (fs *FS) MkdirAll(path string, perm os.FileMode) error {
	if err := fs.fail(OpMkdir, path); err != nil {
		return err
	}
	return fs.inner.MkdirAll(path, perm)
}

func (fs *FS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := fs.fail(OpReadDir, name); err != nil {
		return nil, err
	}
	return fs.inner.ReadDir(name)
}

func (fs *FS) Stat(name string) (os.FileInfo, error) {
	if err := fs.fail(OpStat, name); err != nil {
		return nil, err
	}
	return fs.inner.Stat(name)
}

func (fs *FS) SyncDir(dir string) error {
	if err := fs.fail(OpSyncDir, dir); err != nil {
		return err
	}
	return fs.inner.SyncDir(dir)
}

// OpenFSSync implements vfs.FSSyncer when the inner FS does: its Sync fails
// by the rules of OpSyncFS, matched against dir.
func (fs *FS) OpenFSSync(dir string) (vfs.FSSync, error) {
	inner, err := vfs.OpenFSSync(fs.inner, dir)
	if err != nil {
		return nil, err
	}
	return &fsSync{FSSync: inner, fs: fs, dir: dir}, nil
}

type fsSync struct {
	vfs.FSSync
	fs  *FS
	dir string
}

func (s *fsSync) Sync() error {
	if err := s.fs.fail(OpSyncFS, s.dir); err != nil {
		return err
	}
	return s.FSSync.Sync()
}

// file injects errors into one open file.
type file struct {
	vfs.File
	fs *FS
}

func (f *file) Unwrap() vfs.File { return f.File }

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.fail(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if r := f.fs.check(OpWrite, f.Name()); r != nil {
		n := 0
		if r.PartialWrite && len(p) > 1 {
			n, _ = f.File.WriteAt(p[:len(p)/2], off)
		}
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: &Injected{Errno: r.Errno}}
	}
	return f.File.WriteAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	if r := f.fs.check(OpWrite, f.Name()); r != nil {
		n := 0
		if r.PartialWrite && len(p) > 1 {
			n, _ = f.File.Write(p[:len(p)/2])
		}
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: &Injected{Errno: r.Errno}}
	}
	return f.File.Write(p)
}

func (f *file) Truncate(size int64) error {
	if err := f.fs.fail(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *file) Sync() error {
	if err := f.fs.fail(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *file) Datasync() error {
	if err := f.fs.fail(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Datasync()
}

func (f *file) Stat() (os.FileInfo, error) {
	if err := f.fs.fail(OpStat, f.Name()); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

// String describes a rule, for test failure messages.
func (r Rule) String() string {
	return fmt.Sprintf("%v on %q after %d p=%g limit %d: %v", r.Ops, r.Path, r.After, r.Prob, r.Limit, r.Errno)
}
