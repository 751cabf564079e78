// Package engine owns every partition's records on local disk: segmented
// partition logs in Apache Kafka's own on-disk layout, memory-mapped sparse
// indexes, a group-commit flusher per log directory, crash recovery,
// retention, idempotent-producer state and the leader-epoch cache.
//
// It is a leaf package: it imports only the standard library,
// golang.org/x/sys/unix, mmap-go, hdrhistogram-go and its own subpackages:
// engine/vfs (the file-system seam, and the power-loss model CrashFS) and,
// in tests, engine/vfs/errorfs (fault injection).
//
// # Layout
//
//	<log.dir>/
//	  .kafka_cleanshutdown               present only while no Manager has the dir open after a clean Close
//	  recovery-point-offset-checkpoint   "0\n<n>\n<topic> <partition> <offset>\n"...
//	  replication-offset-checkpoint      (high watermarks, same format)
//	  log-start-offset-checkpoint        (same format)
//	  <topic>-<partition>/
//	    00000000000000000000.log         record batches, exactly as Kafka stores them
//	    00000000000000000000.index       offset index
//	    00000000000000000000.timeindex   time index
//	    00000000000000001234.snapshot    producer state at offset 1234
//	    leader-epoch-checkpoint          "0\n<n>\n<epoch> <start offset>\n"...
//	  <topic>-<partition>.<32 hex>-delete/   a deleted log, removed in the background
//
// File names carry the segment's base offset in 20 decimal digits. A file
// renamed to "<name>.deleted" belongs to a deleted segment and is removed once no
// reader pins it (or at the next Open). With Options.PowerLossJournal (tests
// only) one more file, outside the log directories, journals what fdatasync
// made durable (see "Power loss" below).
//
// # File system
//
// Every file operation goes through Options.FS (a vfs.FS; nil is the
// operating system's). A vfs.File always has a real descriptor: indexes are
// mapped and preallocated (fallocate) through Fd, the directory lock is a
// flock on it, and Slice.File is the *os.File underneath (vfs.OSFile) for
// sendfile. What goes through a descriptor or a Slice bypasses the FS: a
// fault injector cannot fail it, and a crash model sees only its effect on
// file sizes. ReadCopy, the scanners, recovery and scrubbing read through
// the FS. The steady-state data path is one interface call more per write,
// read and fdatasync, and allocates nothing (TestAppendNoAllocs).
//
// Where the engine writes in place (all else is appended, or written whole
// to a temporary name, fdatasynced and renamed): the indexes (through their
// mapping, and rewritten with pwrite from position 0 when rebuilt), which
// are hints checked at every use; truncation of a segment (TruncateTo, a
// recovery cut, the undoing of a failed append), which is fdatasynced before
// anything is appended after it; and a segment file reused by name
// (O_TRUNC), which holds nothing acknowledged.
//
// # Record batch v2 (magic 2), as stored and as sent on the wire
//
//	 0               8       12      16 17      21    23      27             35
//	+---------------+-------+-------+--+-------+-----+-------+--------------+
//	| baseOffset    |length |leader |m | crc   |attrs|lastOff| baseTimestamp|
//	| int64         |int32  |epoch  |a | u32   |int16|Delta  | int64        |
//	+---------------+-------+-------+--+-------+-----+-------+--------------+
//	 35             43              51    53      57      61
//	+--------------+---------------+-----+-------+-------+---------------...
//	| maxTimestamp | producerId    |epoch|baseSeq|count  | records
//	| int64        | int64         |int16|int32  |int32  |
//	+--------------+---------------+-----+-------+-------+---------------...
//
// length counts the bytes after the length field (total size - 12). The
// CRC-32C (Castagnoli) covers attrs..end. The engine stamps baseOffset and the
// partition leader epoch in place (both outside the CRC); with
// message.timestamp.type=LogAppendTime it also sets the timestamp-type bit and
// maxTimestamp and recomputes the CRC, as Kafka does. Records are never decoded
// on the append or read path.
//
// # Indexes
//
//	offset index (.index), 8 bytes per entry:    time index (.timeindex), 12 bytes per entry:
//	+----------------+----------------+          +-------------------+----------------+
//	| relative offset| file position  |          | timestamp (ms)    | relative offset|
//	| uint32 (BE)    | uint32 (BE)    |          | int64 (BE)        | uint32 (BE)    |
//	+----------------+----------------+          +-------------------+----------------+
//
// An offset-index entry maps the last offset of a batch to the file position
// where that batch starts; one entry is added once more than
// index.interval.bytes have been written since the previous one. A time-index
// entry maps the largest timestamp seen so far in the segment to the last
// offset of the batch that carried it; it is added beside an offset-index entry
// when the largest timestamp grew, and once more when the segment is rolled or
// closed. Both are strictly increasing. The active segment's indexes are
// preallocated with fallocate to segment.index.bytes and mapped read-write; on
// roll and close they are trimmed to their entries. Indexes of older segments
// are mapped read-only on first use and checked then; an index found
// inconsistent is rebuilt from the log. An index entry is also checked at every
// use against the batch header it points at, so a damaged index costs a scan,
// never a wrong answer.
//
// # Concurrency
//
// Lock order: Log.appendMu → Log.flushMu → Log.mu → segment.idxMu, and
// logDir.ckptMu → Manager.mu → logDir.mu; Log.appendMu (and flushMu) →
// logDir.ckptMu, as a truncation or DeleteRecordsBefore checkpoints
// (Manager.delMu, the failure log's mutex and a CrashFS's locks are leaves).
//
//  1. Appends are serialised by Log.appendMu. Data is written with pwrite past
//     the segment's published size; the size and then the log end offset are
//     published with atomic stores; index entries are added afterwards under
//     the segment's idxMu. A reader that sees an index entry therefore sees the
//     bytes it points at.
//  2. Log.mu guards the segment list, and the log start offset's relation to
//     it. Readers take it shared only to find and pin a segment.
//  3. Index maps are remapped, truncated and unmapped only under the segment's
//     exclusive idxMu; lookups copy the values out under the shared lock.
//  4. A segment is reference counted: the log holds one reference while the
//     segment is in its list, and every Slice holds one until Release. Files
//     are closed and removed when the count reaches zero.
//  5. Partial truncation (TruncateTo) cuts the file at once: a reader still
//     sending bytes above the truncation point may send a short slice. Reads are
//     bounded by the high watermark, and replication truncates only above it.
//  6. TruncateTo and TruncateFullyAndStartAt hold flushMu as well as
//     appendMu: a flush never runs across a truncation (it would move the
//     recovery point to a log end read before the cut, over records
//     appended after it).
//  7. A log's damage list is guarded by Log.mu (damages.count mirrors its
//     length for the read path's one atomic load). A reader that meets a
//     bad batch, and the scrubber before it records a finding, take
//     appendMu (holding nothing else) to check that the bytes are still
//     the log's: a finding raced by a truncation is dropped.
//
// # Durability and recovery
//
// The recovery point of a log is the offset below which every byte is
// fdatasynced; it only moves after a flush, and is checkpointed every few
// seconds and at Close. Open after a clean Close (marker present) scans
// nothing but the tail of each active segment (see Damage); after a crash it scans every segment from the one holding the
// checkpointed recovery point, cuts a torn or corrupt tail, deletes any later
// segment, and rebuilds the scanned indexes. The recovery point then stays
// at the checkpoint until the flusher has synced the recovered bytes. Each
// log directory is locked (flock on <dir>/.lock) while a Manager has it open.
//
// The recovery point only moves down with a truncation, or with a recovery
// that cut a log: both write the checkpoints before anything is appended
// after them, so that a checkpointed recovery point never lies above data
// that is not durable (the next recovery would skip it).
//
// A flush syncs the directory of a log too when a segment file was created
// since its last flush, before the recovery point moves: a new segment's
// name is durable only with its directory. After a crash, a scanned segment
// that ends short of the next segment's base lost its tail: the segments
// after it go (nothing in them can have been acknowledged, since a flush
// syncs every segment from the recovery point on before moving it).
//
// # Damage
//
// Storage damaged from outside (a flipped bit, a file cut short) is looked
// for where it costs little, and is never served once found:
//
//   - Open, after a clean shutdown, CRC-checks every batch that starts in the
//     last 256 KiB of each active segment (from the index entry before them,
//     so at most index.interval.bytes more, and at least the last batch). A
//     batch whose framing holds but whose CRC or records do not is recorded
//     as damage and kept; broken framing (a torn tail) is cut as after a
//     crash. After a crash, recovery checks every scanned batch and cuts.
//   - The scrubber (Options.ScrubBytesPerSecond, one pass every
//     Options.ScrubInterval) and Manager.Scrub / Log.Scrub check every batch
//     of every segment, sealed or active (up to its size when reached).
//   - A read that meets a header that does not parse records it too.
//
// A damaged range is a batch (or, for broken framing, the rest of the
// segment file). Read and ReadCopy of a range reaching one return the
// batches before it, or, starting in it, an error wrapping ErrCorrupt.
// Log.Damage, Log.FirstDamagedOffset and Manager.Damaged report them; each
// finding is logged once. Truncation and retention drop the damage they
// remove, so a follower repairs itself with TruncateTo(FirstDamagedOffset)
// and a fetch. Damage is not persisted: the next Open finds the tail damage
// again, the scrubber the rest. The leader epoch and the base offset lie
// outside the CRC: a flipped bit there is seen only when it breaks the
// offsets' order.
//
// # Storage failures
//
// Errors of the data path wrap ErrIO (with the OS error in the chain):
//
//   - ENOSPC on an append's write (ErrNoSpace): the bytes written are cut off
//     again and the directory stays online; the log takes appends again once
//     space is freed. If the cut fails the directory goes offline.
//   - A failed fdatasync (any errno, ENOSPC included) or a failed truncation
//     takes the directory offline (ErrLogDirOffline) until the Manager is
//     reopened: after a failed fdatasync the kernel may have dropped the
//     dirty pages, so a later success would prove nothing. Appends,
//     truncations and durability waits on it fail; reads go on.
//   - EIO on a read fails that read; nothing is recorded as damage.
//
// Manager.Stats counts the failures by kind; each is logged once per
// partition (or directory) and kind per minute, with the number suppressed.
// Manager.Recovery (and Log.Recovery) say what Open did: logs clean and
// recovered, segments and bytes scanned, bytes truncated, segments
// deleted, indexes rebuilt, tail bytes verified, damage found, time taken;
// Open logs the same.
//
// # Power loss
//
// vfs.CrashFS keeps, beside real files, a model of what survives a power
// loss (its doc states the model: unsynced appended bytes are lost, unsynced
// creations and renames are undone, truncations and in-place writes count
// as durable at once). In tests, CrashFS.Crash applies it in process. With
// Options.PowerLossJournal the model is journaled (vfs.OpenJournal) and the
// next Open in that mode applies it before recovery, so that a SIGKILL of the
// broker stands for a power loss; the broker enables it from the test-only
// key samsa.test.power.loss.journal=<path>. A binary built with
// -tags samsa_faults carries a planted bug for the checkers:
// SAMSA_FAULT_SKIP_FDATASYNC=1 makes the flusher skip fdatasync while
// reporting success. The default build has no such switch.
//
// # Deviations from the written contract
//
//   - Producer state: a producer id unknown to the log is accepted at any
//     sequence number (Kafka >= 2.5 behaviour, since retention may have removed
//     its state). Snapshots keep Kafka's layout, which holds only the last
//     batch per producer; the last five batches are rebuilt only for batches
//     replayed from the log after the snapshot. A duplicate inside a
//     multi-batch append is reported as ErrOutOfOrderSequence.
//   - OffsetForTimestamp decodes uncompressed batches only (the engine carries
//     no codecs); in a compressed batch it answers the batch's base offset.
//   - segment.ms counts from the clock time of a segment's first append (after
//     a restart, from the time the log was opened).
//   - Read excludes a batch whose last offset is at or beyond upTo, as Kafka
//     does, so an upTo inside a batch hides that whole batch.
//   - LogConfig.Compact is kept but compaction is not implemented; retention
//     applies as configured (a compacted topic sets retention to -1).
//   - TruncateTo is durable when it returns (the cut segment fdatasynced, the
//     removal of later segments synced in the directory, the lowered
//     recovery point checkpointed); Kafka checkpoints the recovery point but
//     leaves the rest to the next flush.
//   - Kafka takes a log directory offline on any I/O error; here ENOSPC on a
//     write is undone and the directory stays online, and a read error fails
//     only that read.
//   - Offsets are taken as dense across segments after a crash (see
//     Durability): a follower append that leaves a gap between segments
//     (possible only against a compacted leader, and compaction is not
//     implemented) loses the segments past the gap if a crash cuts the
//     segment before it.
//   - Additions: DirStat.TotalBytes/UsableBytes, Manager.EnforceRetention,
//     Log.Dir, Log.RecoveryPoint, Log.Flush, ErrUnexpectedAppendOffset (a
//     follower batch below the log end), ErrNoLog, ErrLogDirOffline, ErrIO,
//     ErrNoSpace, ErrInvalidConfig, ErrDumpMismatch, ValidateBatch,
//     BatchHeaderSize, Options.FS / PowerLossJournal / ScrubBytesPerSecond /
//     ScrubInterval, Manager.Stats / Recovery / Scrub / Damaged, Log.Scrub /
//     Damage / FirstDamagedOffset / Recovery.
package engine
