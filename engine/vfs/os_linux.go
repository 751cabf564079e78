package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// datasync is fdatasync(2), retried on EINTR.
func datasync(f *os.File, fd uintptr) error {
	for {
		err := unix.Fdatasync(int(fd))
		if err == nil {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
}
