package quorum

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// lockDir takes an exclusive flock on dir/LOCK and returns its release.
func lockDir(fsys vfs.FS, dir string) (func() error, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("quorum: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("quorum: lock %s: %w", dir, err)
	}
	return f.Close, nil
}
