//go:build !linux

package vfs

import "os"

func datasync(f *os.File, fd uintptr) error { return f.Sync() }
