package engine

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync is the raw baselines' sync, outside the engine's FS.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
