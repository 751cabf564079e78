package vfs

// Writing back without a cache flush.
//
// sync_file_range(2) with SYNC_FILE_RANGE_WAIT_BEFORE|WRITE|WAIT_AFTER writes a
// file's dirty pages to the device and waits for them, and reports the file's
// write-back errors as fdatasync does (Linux 4.13 on), but it neither commits the
// file's metadata nor flushes the device's volatile write cache. On ext4 and XFS
// every fdatasync and fsync ends with a flush of the device's cache (ext4_sync_file
// issues it when no journal commit will, xfs_file_fsync when its log force did
// not), and a cache flush covers every write the device completed before it, not
// only the synced file's. So data written back and waited for becomes durable at
// the next fdatasync of any file of that file system that begins afterwards, as
// long as the metadata needed to read it (the file's size, its blocks' allocation)
// was already durable: an overwrite of blocks a completed fdatasync covered.

// Writeback is implemented by a File that can be written back without a cache
// flush.
type Writeback interface {
	// WaitWriteback writes every dirty page of the file to the device and waits
	// for it and for every write-back already under way; an error is the file's
	// write-back error, as Datasync's.
	WaitWriteback() error
}

// CacheFlusher is implemented by an FS that can say whether every Datasync and
// Sync of a file under dir flushes the write cache of the device holding dir
// (see above).
type CacheFlusher interface {
	SyncFlushesCache(dir string) bool
}

// SyncFlushesCache reports whether fsys says that a Datasync of any file under dir
// flushes the device's write cache, so that a round of files written back
// (Writeback) needs one Datasync, not one per file. False when fsys cannot say.
func SyncFlushesCache(fsys FS, dir string) bool {
	c, ok := fsys.(CacheFlusher)
	return ok && c.SyncFlushesCache(dir)
}
