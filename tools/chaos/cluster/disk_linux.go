package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// BallastName is the file in a node's disk directory that fills it.
const BallastName = "ballast"

// MountTmpfs mounts a tmpfs of size bytes on dir.
func MountTmpfs(dir string, size int64) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)); err != nil {
		return fmt.Errorf("cluster: mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// Unmount detaches the mount on dir (lazily: a process still holding a file does not
// keep it mounted).
func Unmount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("cluster: unmount %s: %w", dir, err)
	}
	return nil
}

// Fill writes dir/ballast until the file system is full and returns the bytes
// written. A full disk is the point: ENOSPC ends it without error.
func Fill(dir string) (int64, error) {
	f, err := os.OpenFile(filepath.Join(dir, BallastName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("cluster: ballast: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("cluster: ballast: %w", err)
		}
		if n > 1<<40 {
			return n, fmt.Errorf("cluster: ballast: %s never fills (not a small file system?)", dir)
		}
	}
	// Whatever is left (under a page) goes too.
	for _, sz := range []int{64 << 10, 4 << 10, 512, 1} {
		for {
			w, err := f.Write(buf[:sz])
			n += int64(w)
			if err != nil {
				break
			}
		}
	}
	return n, nil
}

// Free removes the ballast.
func Free(dir string) error {
	if err := os.Remove(filepath.Join(dir, BallastName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cluster: ballast: %w", err)
	}
	return nil
}

// CleanupMounts unmounts the tmpfs mounts under run directories whose harness process
// is gone, and returns them.
func CleanupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	defer f.Close()
	var removed []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 || fs[2] != "tmpfs" || filepath.Base(fs[1]) != "disk" {
			continue
		}
		mark := filepath.Join(filepath.Dir(filepath.Dir(fs[1])), ownerMark)
		b, err := os.ReadFile(mark)
		if err != nil {
			continue
		}
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pidAlive(pid) {
			continue
		}
		if Unmount(fs[1]) == nil {
			removed = append(removed, "tmpfs "+fs[1])
		}
	}
	return removed, nil
}
