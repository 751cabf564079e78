// Package vfs is the engine's file-system seam: every file the engine opens,
// writes, syncs, renames or removes goes through an FS, so that tests can
// inject faults (package errorfs) and simulate power loss (NewCrashFS,
// OpenJournal) under the same code that runs in production on Default, the
// operating system's file system.
//
// The interface is small on purpose (in the manner of cockroachdb/pebble's
// vfs): what the engine needs and no more. Every implementation in this tree
// wraps real files, so a File always has a real descriptor (Fd) that the
// engine may mmap, fallocate or hand to sendfile; OSFile returns the *os.File
// underneath for the callers (the fetch path) that need one.
//
// Who owns what: a File is used by one owner at a time for Close; ReadAt,
// WriteAt, Datasync, Sync and Stat are safe for concurrent use, as on *os.File.
// Write, Truncate and Close are not ordered against other calls on the same
// File: the caller orders them.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	io.Closer
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Sync makes the file's data and metadata durable (fsync).
	Sync() error
	// Datasync makes the file's data, and the metadata needed to read it
	// back (its size), durable (fdatasync).
	Datasync() error
	Stat() (os.FileInfo, error)
	// Fd is the file's descriptor, valid until Close, for mmap, fallocate,
	// flock and sendfile. What is done through it bypasses the FS (a fault
	// injector does not see it; a crash model sees only its effect on the
	// file's size).
	Fd() uintptr
	// Name is the path the file was opened with.
	Name() string
}

// FS is a file system.
type FS interface {
	// OpenFile opens name with os.OpenFile's flags and permissions.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	// RemoveAll removes path and everything below it (os.RemoveAll).
	RemoveAll(path string) error
	MkdirAll(path string, perm os.FileMode) error
	ReadDir(name string) ([]os.DirEntry, error)
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the creations, renames and removals of entries of the
	// directory dir durable (fsync of the directory).
	SyncDir(dir string) error
}

// Default is the operating system's file system.
var Default FS = osFS{}

// Open opens name read-only.
func Open(fsys FS, name string) (File, error) { return fsys.OpenFile(name, os.O_RDONLY, 0) }

// ReadFile reads the whole file name.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := Open(fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// Read to EOF: the size is a hint (the file may grow or shrink).
	b := make([]byte, 0, fi.Size()+512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.ReadAt(b[len(b):cap(b)], int64(len(b)))
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// Exists reports whether name exists (false on any error).
func Exists(fsys FS, name string) bool {
	_, err := fsys.Stat(name)
	return err == nil
}

// Unwrapper is implemented by Files that wrap another File.
type Unwrapper interface{ Unwrap() File }

// OSFile returns the *os.File underneath f (through every wrapper), or nil
// when f is not backed by one. Bytes read or sent through it bypass the FS.
func OSFile(f File) *os.File {
	for f != nil {
		switch t := f.(type) {
		case *osFile:
			return t.File
		case Unwrapper:
			f = t.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// IsNotExist reports whether err says a file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
