//go:build !linux

package engine

import (
	"io"

	"github.com/samsa-broker/samsa/engine/vfs"
)

func preallocate(f vfs.File, size int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() >= size {
		return nil
	}
	return f.Truncate(size)
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

func lockDir(fsys vfs.FS, dir string) (unlock io.Closer, err error) { return nopCloser{}, nil }

func diskSpace(path string) (total, usable int64) { return -1, -1 }

// FileLimit is 0 (unknown) off Linux.
func FileLimit() uint64 { return 0 }

// OpenFiles is -1 (unknown) off Linux.
func OpenFiles() int { return -1 }

// MapCount is -1 (unknown) off Linux.
func MapCount() int64 { return -1 }

// MapLimit is 0 (unknown) off Linux.
func MapLimit() int64 { return 0 }

// startWriteback does nothing off Linux: the fdatasync writes the zeros back.
func startWriteback(f vfs.File, off, n int64) {}
