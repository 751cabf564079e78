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

// OpenFSSync implements FSSyncer with syncfs(2) on a descriptor of dir, held
// open until Close so that every write-back error from then on is reported
// (the file system's error sequence is sampled when the descriptor is
// opened). Before Linux 5.8 syncfs returned no write-back error at all, so
// there it is ErrFSSyncUnsupported.
func (osFS) OpenFSSync(dir string) (FSSync, error) {
	if !kernelAtLeast(5, 8) {
		return nil, ErrFSSyncUnsupported
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &osFSSync{d: d}, nil
}

type osFSSync struct{ d *os.File }

func (s *osFSSync) Sync() error {
	for {
		err := unix.Syncfs(int(s.d.Fd()))
		if err == nil {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return &os.PathError{Op: "syncfs", Path: s.d.Name(), Err: err}
	}
}

func (s *osFSSync) Close() error { return s.d.Close() }

// kernelAtLeast reports whether the running kernel's release is at least
// major.minor (false when it cannot be read).
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	maj, min, ok := parseRelease(unix.ByteSliceToString(u.Release[:]))
	return ok && (maj > major || maj == major && min >= minor)
}

// WaitWriteback implements Writeback with sync_file_range(2) over the whole file.
func (f *osFile) WaitWriteback() error {
	for {
		err := unix.SyncFileRange(int(f.fd), 0, 0,
			unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
		if err == nil {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: err}
	}
}

// File systems whose every fdatasync ends with a flush of the device's write cache
// (writeback.go); tmpfs has no device, and nothing there survives a power loss
// whatever is synced.
const (
	ext4Magic  = 0xEF53 // ext2, ext3 and ext4
	xfsMagic   = 0x58465342
	tmpfsMagic = 0x01021994
)

// SyncFlushesCache implements CacheFlusher for the file systems named above, on
// Linux 4.13 or later (where sync_file_range reports write-back errors).
func (osFS) SyncFlushesCache(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil || !kernelAtLeast(4, 13) {
		return false
	}
	switch st.Type {
	case ext4Magic, xfsMagic, tmpfsMagic:
		return true
	}
	return false
}
