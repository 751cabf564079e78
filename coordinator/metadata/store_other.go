//go:build !linux

package metadata

import (
	"errors"
	"os"
)

// ErrLocked: another Store has the directory open (only detected on Linux).
var ErrLocked = errors.New("metadata: directory in use")

// lockDir does not lock off Linux.
func lockDir(dir string) (func() error, error) { return func() error { return nil }, nil }

func fdatasync(f *os.File) error { return f.Sync() }
