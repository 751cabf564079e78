package vfs

import "errors"

// ErrFSSyncUnsupported is OpenFSSync's error when the file system cannot
// sync itself in one call with an error report that can be trusted (an FS
// without FSSyncer, an OS other than Linux, a Linux kernel before 5.8).
var ErrFSSyncUnsupported = errors.New("vfs: syncfs with write-back error reporting is not supported here")

// FSSyncer is implemented by an FS that can make everything written to the
// file system holding a directory durable in one call (Linux's syncfs(2)).
type FSSyncer interface {
	// OpenFSSync opens a handle on the file system that holds dir.
	OpenFSSync(dir string) (FSSync, error)
}

// FSSync is a handle on one file system, from OpenFSSync.
//
// Sync writes back and makes durable every file of the file system, data and
// metadata (names included), other processes' files too, so its time is
// theirs as well. It reports a write-back error of any file of the file
// system that happened since the handle was opened or since the Sync that
// last reported one: the error names no file. Sync is safe for concurrent use.
type FSSync interface {
	Sync() error
	Close() error
}

// OpenFSSync opens fsys's FSSync of the file system holding dir, or returns
// ErrFSSyncUnsupported when fsys has none.
func OpenFSSync(fsys FS, dir string) (FSSync, error) {
	s, ok := fsys.(FSSyncer)
	if !ok {
		return nil, ErrFSSyncUnsupported
	}
	return s.OpenFSSync(dir)
}
