// Package engine owns every partition's records on local disk: segmented
// partition logs in Apache Kafka's own on-disk layout, memory-mapped sparse
// indexes, a group-commit flusher per log directory, crash recovery,
// retention, idempotent-producer state and the leader-epoch cache.
//
// It is a leaf package: it imports only the standard library,
// golang.org/x/sys/unix, mmap-go and hdrhistogram-go.
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
// reader pins it (or at the next Open).
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
// logDir.ckptMu → Manager.mu → logDir.mu (Manager.delMu is a leaf).
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
//
// # Durability and recovery
//
// The recovery point of a log is the offset below which every byte is
// fdatasynced; it only moves after a flush, and is checkpointed every few
// seconds and at Close. Open after a clean Close (marker present) scans
// nothing; after a crash it scans every segment from the one holding the
// checkpointed recovery point, cuts a torn or corrupt tail, deletes any later
// segment, and rebuilds the scanned indexes. The recovery point then stays
// at the checkpoint until the flusher has synced the recovered bytes. Each
// log directory is locked (flock on <dir>/.lock) while a Manager has it open.
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
//   - Additions: DirStat.TotalBytes/UsableBytes, Manager.EnforceRetention,
//     Log.Dir, Log.RecoveryPoint, ErrUnexpectedAppendOffset (a follower batch
//     below the log end), ErrNoLog, ErrLogDirOffline, ErrInvalidConfig,
//     ErrDumpMismatch, ValidateBatch, BatchHeaderSize.
package engine
