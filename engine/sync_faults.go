//go:build samsa_faults

package engine

import (
	"os"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// A planted bug, for proving that an outside checker detects lost writes
// after a power loss: in a binary built with -tags samsa_faults, the
// environment variable SAMSA_FAULT_SKIP_FDATASYNC=1 makes the flusher skip
// the fdatasync of segment files while reporting success. The default build
// has no such switch (sync_default.go).
//
// The variable is read at every sync, so that a test can set it for a while.
func skipFdatasync() bool { return os.Getenv("SAMSA_FAULT_SKIP_FDATASYNC") == "1" }

// flushSync is the flusher's fdatasync of a segment file.
func flushSync(f vfs.File) error {
	if skipFdatasync() {
		return nil
	}
	return f.Datasync()
}
