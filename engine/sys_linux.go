package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

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

// FileLimit returns the process's open-file limit: RLIMIT_NOFILE's soft value,
// which `ulimit -n` shows (Go raises it to the hard value at start-up), or 0
// when unknown or unlimited.
func FileLimit() uint64 {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur == unix.RLIM_INFINITY {
		return 0
	}
	return r.Cur
}

// OpenFiles returns how many descriptors the process holds (/proc/self/fd),
// or -1 when unknown.
func OpenFiles() int {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return -1
	}
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(4096)
		n += len(names)
		if err != nil {
			break
		}
	}
	return n - 1 // the descriptor reading the directory
}

// MapCount returns the process's memory mappings (/proc/self/maps lines), or
// -1 when unknown.
func MapCount() int64 {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return -1
	}
	return int64(bytes.Count(b, []byte{'\n'}))
}

// MapLimit returns vm.max_map_count, or 0 when unknown.
func MapLimit() int64 {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// startWriteback starts the write-back of f's [off, off+n) without waiting
// for it (sync_file_range SYNC_FILE_RANGE_WRITE: no durability, no metadata),
// so that the fdatasync after it finds the pages on their way. A failure is
// ignored: the fdatasync writes them back anyway.
func startWriteback(f vfs.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
