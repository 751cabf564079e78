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
