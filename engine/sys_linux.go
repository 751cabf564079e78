package engine

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// preallocate reserves disk blocks for f up to size bytes (and extends it),
// so that a write through a shared mapping never hits a hole on a full disk.
// File systems without fallocate fall back to ftruncate.
func preallocate(f vfs.File, size int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, 0, size)
		if err == nil {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
			return f.Truncate(size)
		}
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
}

// lockDir takes an exclusive advisory lock on <dir>/.lock, so that two
// processes never open the same log directory.
func lockDir(fsys vfs.FS, dir string) (unlock io.Closer, err error) {
	f, err := fsys.OpenFile(dir+"/.lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s is locked by another process: %v", ErrInvalidConfig, dir, err)
	}
	return f, nil
}

// diskSpace returns the size of the file system holding path and the bytes
// an unprivileged writer may still use (-1, -1 when unknown).
func diskSpace(path string) (total, usable int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize
}
