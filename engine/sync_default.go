//go:build !samsa_faults

package engine

import "github.com/samsa-broker/samsa/engine/vfs"

// flushSync is the flusher's fdatasync of a segment file.
func flushSync(f vfs.File) error { return f.Datasync() }
