//go:build !linux

package engine

import "os"

func preallocate(f *os.File, size int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() >= size {
		return nil
	}
	return f.Truncate(size)
}

func fdatasync(f *os.File) error { return f.Sync() }

func lockDir(dir string) (unlock func(), err error) { return func() {}, nil }

func diskSpace(path string) (total, usable int64) { return -1, -1 }
