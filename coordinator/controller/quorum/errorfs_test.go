package quorum

import (
	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/engine/vfs/errorfs"
)

func newErrorFS() *errorfs.FS { return errorfs.New(vfs.Default, 1) }

// failSyncs makes every later fdatasync and fsync of efs fail with EIO.
func failSyncs(efs *errorfs.FS) { efs.Add(errorfs.Rule{Ops: errorfs.OpSync}) }
