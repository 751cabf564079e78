// Package engine owns every partition's records on local disk: segmented
// partition logs in Apache Kafka's own on-disk layout, memory-mapped sparse
// indexes, a group-commit flusher per log directory, crash recovery,
// retention, log compaction (the cleaner), idempotent and transactional
// producer state (the last stable offset, the aborted-transaction index)
// and the leader-epoch cache.
//
// It is a leaf package: it imports only the standard library,
// golang.org/x/sys/unix, mmap-go, hdrhistogram-go, the codecs
// klauspost/compress (gzip, snappy, zstd) and pierrec/lz4 (in compress.go
// only, for the cleaner) and its own subpackages: engine/vfs (the
// file-system seam, and the power-loss model CrashFS) and, in tests,
// engine/vfs/errorfs (fault injection). Of the project it imports only
// internal/invariants, a leaf of constants: built with -tags invariants, the
// engine checks what costs on a hot path (a segment's reference count never
// below zero, the offsets of an append dense and increasing, the high
// watermark at or below the log end offset when set) and panics, naming the
// invariant, when one is broken.
//
// # Layout
//
//	<log.dir>/
//	  .kafka_cleanshutdown               present only while no Manager has the dir open after a clean Close;
//	                                     {"version":0,"brokerEpoch":N} (Manager.SetBrokerEpoch; empty before)
//	  recovery-point-offset-checkpoint   "0\n<n>\n<topic> <partition> <offset>\n"...
//	  replication-offset-checkpoint      (high watermarks, same format)
//	  log-start-offset-checkpoint        (same format)
//	  cleaner-offset-checkpoint          first dirty offset of each cleaned log (same format)
//	  <topic>-<partition>/
//	    00000000000000000000.log         record batches, exactly as Kafka stores them
//	    00000000000000000000.index       offset index
//	    00000000000000000000.timeindex   time index
//	    00000000000000000000.txnindex    aborted transactions whose markers the segment holds (once it has one)
//	    00000000000000001234.snapshot    producer state at offset 1234
//	    leader-epoch-checkpoint          "0\n<n>\n<epoch> <start offset>\n"...
//	    <name>.cleaned                   a cleaned segment being written (log, index, timeindex, txnindex)
//	    <name>.swap                      ... written and synced, being swapped in
//	    <name>.deleted                   a deleted or cleaned-away segment's file
//	  <topic>-<partition>.<32 hex>-delete/   a deleted log, removed in the background
//
// File names carry the segment's base offset in 20 decimal digits. A file
// renamed to "<name>.deleted" belongs to a deleted segment (or one the
// cleaner replaced) and is removed once no reader pins it (or at the next
// Open). ".cleaned" and ".swap" are the cleaner's (see Compaction); Open
// finishes or undoes a swap they show was cut. With Options.PowerLossJournal
// (tests only) one more file, outside the log directories, journals what
// fdatasync made durable (see "Power loss" below).
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
// (O_TRUNC), which holds nothing acknowledged. Under the fsync policy the
// active segment of a log of small flushes is written ahead of its appends
// with zeros, which the appends then overwrite (prealloc.go), so the file is
// longer than its batches; a roll, a clean close and recovery cut it back.
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
// CRC-32C (Castagnoli) covers attrs..end. attrs: codec (bits 0-2: none,
// gzip, snappy, lz4, zstd), timestamp type (3), transactional (4), control
// (5), delete horizon (6: baseTimestamp is the batch's delete horizon,
// KIP-534). The engine stamps baseOffset and the partition leader epoch in
// place (both outside the CRC); with message.timestamp.type=LogAppendTime it
// also sets the timestamp-type bit and maxTimestamp and recomputes the CRC,
// as Kafka does. Records are never decoded on the append or read path,
// except the single record of a control batch (a transaction marker, read
// on append and replay): the log cleaner alone decodes data records
// (records.go draws their format).
//
// A producer's batch has count = lastOffsetDelta+1 (ValidateBatch holds a
// leader's appends to it). A stored batch may have fewer records once
// compacted, down to none (an empty batch: the header of a batch whose
// records the cleaner removed but whose offsets and producer fields it
// keeps): offsets have holes, inside batches and between them, and every
// reader, recovery, the scrubber and a follower's append take them.
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
// closed. Both are strictly increasing. The active segment's indexes grow on
// demand (fallocated a page, then by doubling, up to segment.index.bytes) and
// are mapped read-write; on roll and close they are trimmed to their entries,
// and fsynced at close only when their entries changed. Indexes of older segments
// are mapped read-only on first use and checked then; an index found
// inconsistent is rebuilt from the log. An index entry is also checked at every
// use against the batch header it points at, so a damaged index costs a scan,
// never a wrong answer.
//
// # Concurrency
//
// Lock order: Log.segMu → Log.appendMu → Log.flushMu → Log.mu →
// segment.idxMu, and logDir.ckptMu → Manager.mu → logDir.mu; Log.segMu
// and Log.appendMu (and flushMu) → logDir.ckptMu, as a truncation,
// DeleteRecordsBefore or a cleaning pass checkpoints (Manager.delMu, the
// cleaner's mutex, the failure log's mutex, a segment's txnIndex.mu, the
// log's txnTracker.mu and a CrashFS's locks are leaves; a truncation and
// DeleteLog wait on the cleaner's condition holding no other lock).
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
//  8. The segment list changes only under appendMu and Log.mu (the append
//     path reads it under appendMu alone); every change but an append's
//     roll also holds Log.segMu: retention, DeleteRecordsBefore,
//     truncation, Close and the cleaner's swap. So a cleaning pass, which
//     reads and writes with no lock, meets no other change to the
//     segments it replaces: its swap, under segMu, checks that they are
//     still the log's (retention may have removed them since), and takes
//     appendMu only for the instant of the list's replacement.
//  9. The cleaner goroutines (Options.Cleaner.Threads) and Manager.Compact
//     clean a log one at a time (cleaner.mu keeps its state: in progress,
//     aborted, paused). A truncation and DeleteLog abort the log's pass and
//     pause its cleaning before they take segMu (waiting for the pass to
//     stop at its next batch), and resume it after.
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
// syncs every segment from the recovery point on before moving it). For
// that rule, segments stay contiguous in offsets through compaction (a
// cleaned segment keeps the header of its last batch, so that it ends
// where the segments it replaced ended) and on followers of a compacted
// leader (a follower rolls at its log end, not at the next batch's base).
//
// The leader-epoch checkpoint of a new epoch is written (atomically, synced)
// by the flush that makes its first record durable, before the recovery
// point passes it, not on the append path; recovery assigns the epochs of
// the batches it keeps, so a process that died before that write loses no
// epoch.
//
// # Many partitions
//
// What a log costs while idle, so that 10,000 partitions fit one broker
// (BENCHMARKS.md, "10,000 partitions per node"):
//   - one descriptor (its active segment's .log; indexes hold a mapping, and
//     none while empty) and about 7 KiB of memory; the directory and its
//     empty .log, one 4 KiB block (a segment's index files are created with
//     its first batch: creating a partition is two file creations);
//   - no goroutine and no timer: the flusher, retention, checkpoints and the
//     cleaner are per directory or per Manager, and the flusher touches
//     only the logs appended to;
//   - a clean Close of a log that changed nothing since it was opened (or
//     last closed) writes and syncs nothing of it (no data sync, no index
//     fsync, no producer snapshot), and Close closes 8 logs at a time, as a
//     flusher round syncs 8 at a time;
//   - CreateLogs creates many logs with one sync of each log directory.
//
// The open file limit bounds the logs: CreateLog keeps 128 descriptors
// free under it, Open warns when the logs leave less than FileReserve,
// and EMFILE comes back as ErrTooManyOpenFiles naming ulimit -n.
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
//   - A failed fdatasync (any errno, ENOSPC included) or a failed
//     truncation takes the directory offline (ErrLogDirOffline) until the
//     Manager is reopened: after a failed sync the kernel may have dropped the
//     dirty pages, so a later success would prove nothing. Appends,
//     truncations and durability waits on it fail; reads go on.
//   - A failed syncfs of a round (Options.FlushSyncfsMinLogs) names no file
//     and may be another process's: the round's logs are flushed again the
//     usual way, whose fdatasyncs report their own files' write-back errors
//     (each descriptor samples its file's error sequence, which the syncfs
//     does not advance), and their checkpoints written again with fsyncs.
//     Only a failure of those takes the directory offline.
//   - EIO on a read fails that read; nothing is recorded as damage.
//   - A swap of a cleaned segment that fails past its commit point (the
//     directory sync of its .swap names) takes the directory offline: the
//     files are ahead of the segment list, and the next Open finishes the
//     swap. Before it, the cleaned files are removed and the log is as it
//     was.
//
// Manager.UnwritableDirs lists the directories that cannot take appends
// now: offline ones, and full ones (an append failed with ErrNoSpace) until
// statfs shows SpaceRecovered bytes usable again. A broker in a cluster asks
// to be fenced while the list is not empty (coordinator/controller's
// BrokerLifecycle), as Kafka moves the leaderships of a failed directory.
//
// Manager.Stats counts the failures by kind; each is logged once per
// partition (or directory) and kind per minute, with the number suppressed.
// Manager.Recovery (and Log.Recovery) say what Open did: logs clean and
// recovered, segments and bytes scanned, bytes truncated, segments
// deleted, indexes rebuilt, tail bytes verified, damage found, time taken;
// Open logs the same.
//
// # Compaction
//
// A log whose LogConfig.Compact is set (cleanup.policy=compact) is cleaned
// as Kafka's LogCleaner does: the last record of each key survives, at its
// offset. The log splits into a clean part (below its first dirty offset,
// the cleaner checkpoint) and a dirty part; the cleanable segments are the
// inactive ones wholly below the first uncleanable offset: the least of the
// last stable offset (at most the high watermark, and at most the first
// offset of a transaction still open), the active segment's base and the
// first dirty segment whose largest timestamp is within
// min.compaction.lag.ms. Its dirty ratio is the dirty cleanable bytes over
// all cleanable bytes.
//
// Each cleaner goroutine takes the compacted log with the highest dirty
// ratio among those past min.cleanable.dirty.ratio, or past
// max.compaction.lag.ms (its oldest dirty segment starts with a batch that
// old) with something dirty, or sleeps log.cleaner.backoff.ms. A pass:
//
//  1. builds a key → offset map of the dirty cleanable records (a fixed
//     table of 128-bit key hashes, its memory
//     log.cleaner.dedupe.buffer.size shared between the threads; full, it
//     ends the pass's range at the last batch mapped), skipping control
//     batches and aborted transactional data;
//  2. rewrites the cleanable segments below the map's end, from the log
//     start, in groups of consecutive segments that fit segment.bytes and
//     2^31 offsets; a group's cleaned segment takes its first segment's
//     base. A record stays if it is past the map, or its key's latest (a
//     record without a key goes), and, for a tombstone, while its batch's
//     delete horizon has not passed: the first pass that keeps a mapped
//     tombstone sets the horizon, now + delete.retention.ms. A batch that
//     keeps all its records (and needs no horizon) is copied as it is;
//     one thinned is rebuilt with its base offset, last offset delta,
//     leader epoch and producer fields, compressed again with its codec
//     (snappy in the framing it had); one emptied goes, unless it is its
//     producer's last batch (its sequence and epoch must survive) or its
//     group's last: then its header stays, with no records;
//  3. swaps each cleaned segment in as soon as it is written (see
//     cleaner_swap.go for the steps and what a crash at each leaves), and
//     writes the cleaner checkpoint at the end.
//
// Transactions (Kafka's rules): aborted data goes at the first pass; a
// marker stays while its transaction has data, then until its delete
// horizon. The aborted transactions come from the segments' .txnindex
// files, as in Kafka; a cleaned segment's .txnindex keeps the entries of
// the abort markers it keeps for data met in the pass (see
// cleaner_txn.go).
//
// The cleaner works below the high watermark only, where it may remove a
// record for a later one of its key: it relies on truncations staying
// above the high watermark (replication's rule), as a deeper cut could
// remove the later record too.
//
// Nothing of a pass blocks appends or reads: it reads pinned segments
// and writes new files with no lock held, and readers pinned to replaced
// segments read them (through their descriptors) until they release
// them. log.cleaner.io.max.bytes.per.second paces the threads' reads and
// writes together. A pass meeting a batch that fails its CRC or does not
// decode makes the log uncleanable (until it is truncated or reopened); an
// I/O error retries it after the backoff. cleanup.policy=compact,delete
// (Compact and Delete) applies retention as well; compact alone keeps
// every segment but those below the log start offset, and rolls the
// active segment once it is max.compaction.lag.ms old. Manager.CleanerStats
// gives the cleaner's figures (bytes read and written, passes, the dirty
// ratio, lag and compaction delay of each log); Manager.Compact cleans on
// demand.
//
// # Transactions
//
// The producer state keeps, per producer, the first offset of its open
// transaction and the coordinator epoch of its last marker; the log keeps
// the transactions that bound the last stable offset (txnTracker); each
// segment keeps the aborted transactions whose abort markers it holds
// (txnindex.go draws the .txnindex). Leader appends are checked for
// KIP-98's and KIP-890's rules (txn.go: the epoch bump per transaction,
// markers only from the producer's epoch or later and a coordinator epoch
// not below the last one, no non-transactional batch inside a
// transaction, and a verification before a transactional batch may open
// one); followers' appends and recovery apply them unchecked. Snapshots
// carry the transaction fields of Kafka's layout. Recovery after a crash
// rewrites the .txnindex of every segment it scans; truncation cuts it;
// retention deletes it with its segment; the cleaner writes the cleaned
// segment's.
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
// reporting success (the fdatasyncs of segments only: a round made durable by
// syncfs is not affected). The default build has no such switch.
//
// # Deviations from the written contract
//
//   - Producer state: a producer id unknown to the log is accepted at any
//     sequence number (Kafka >= 2.5 behaviour, since retention may have removed
//     its state). Snapshots keep Kafka's layout, which holds only the last
//     batch per producer; Open gives each producer back the batches before
//     it, up to five, from the batches replayed after the snapshot and the
//     headers of the active segment's last 256 KiB (Kafka loads the one
//     batch: a retry of an earlier batch whose answer a restart lost is
//     OUT_OF_ORDER_SEQUENCE_NUMBER there, which franz-go and Kafka's own
//     producer answer by writing the batch again under a new epoch). A
//     producer's batches further back stay unknown. A duplicate inside a
//     multi-batch append is reported as ErrOutOfOrderSequence. Transactions
//     completed by a marker not yet below the high watermark (Kafka's
//     unreplicated transactions) are known only from the batches replayed
//     after the snapshot, as in Kafka.
//   - OffsetForTimestamp decodes uncompressed batches only (the codecs are
//     the cleaner's); in a compressed batch it answers the batch's base
//     offset. It skips batches compaction emptied.
//   - segment.ms counts from the clock time of a segment's first append (after
//     a restart, from the time the log was opened).
//   - Read excludes a batch whose last offset is at or beyond upTo, as Kafka
//     does, so an upTo inside a batch hides that whole batch.
//   - Compaction. A pass cleans whole segments: Kafka may clean part of the
//     segment holding the last stable offset. A cleaned segment keeps the
//     header of its last batch (empty if need be); Kafka keeps the last
//     batch of the whole pass only. A tombstone past the offset map of a
//     pass whose map filled gets no delete horizon in that pass (Kafka sets
//     one, which can let the tombstone go in the pass that removes its
//     key's older values). A rebuilt batch keeps its baseTimestamp unless
//     it gets a delete horizon (Kafka rebases it on the first record kept).
//     Groups are bounded by segment.bytes and offsets, not by index size
//     (inactive indexes have no fixed capacity here). The cleaned segment's
//     modification time is its own (Kafka copies the replaced segment's):
//     it matters only to time retention of batches without timestamps.
//     Key hashes are two 64-bit maphash values (Kafka: MD5). The map counts
//     a batch as taking its record count of slots. A batch that
//     decompresses past CleanerOptions.MaxDecompressedBytes (64 MiB) makes
//     its log uncleanable (Kafka has no bound).
//   - Transactions. The engine cannot tell a client's leader append from
//     the coordinator's: the produce handler must refuse control batches
//     from clients (Kafka does it in the log). A .txnindex that does not
//     hold together is rebuilt at Open from the producer state as of its
//     segment (Kafka rebuilds the whole segment's indexes); a recovery
//     fdatasyncs the indexes it rewrote before it returns (Kafka leaves
//     them to the next flush). The entries of every segment are kept in
//     memory. Logs written before the .txnindex existed (only followers
//     could write transactional batches then) have no entries for the
//     aborts they hold until a recovery rescans them. A compressed marker
//     is read only from a follower's append or the log (Kafka writes them
//     uncompressed; a leader append of one is refused). An append whose
//     .txnindex write fails is undone whole (its batches cut off again,
//     the producer state rebuilt from the log); Kafka takes the directory
//     offline with the batches in the log.
//   - A record without a key in a compacted log is removed by the cleaner.
//     The broker's produce handler refuses such records, as Kafka does
//     (net/kafka, KIP-467); the engine decodes no record on append, so a
//     follower's or an internal writer's keyless record still lands.
//   - Retention applies to a log without Compact, or with Compact and
//     Delete (compact,delete); a compacted log without Delete is never
//     deleted by time or size.
//   - TruncateTo is durable when it returns (the cut segment fdatasynced, the
//     removal of later segments synced in the directory, the lowered
//     recovery point checkpointed); Kafka checkpoints the recovery point but
//     leaves the rest to the next flush.
//   - Kafka takes a log directory offline on any I/O error; here ENOSPC on a
//     write is undone and the directory stays online, and a read error fails
//     only that read.
//   - Segments are taken as contiguous in offsets after a crash (see
//     Durability). A follower's batch more than 2^31 offsets past its log
//     end (a compacted leader's hole that large) starts a segment at its
//     own base, leaving a gap between segments: the segments past it are
//     lost if a crash cuts the segment before it.
//   - Additions (transactions): Log.LastStableOffset,
//     Log.AbortedTransactions, Log.Producers, Log.OpenTransaction,
//     Log.StartTxnVerification / CompleteTxnVerification (KIP-890 part 1;
//     Kafka passes the guard along the append instead, which replication's
//     append path here does not carry), Log.AppendMarker,
//     AppendMarkerBatch, DecodeMarker, Marker, AbortedTxn, ProducerInfo,
//     VerificationGuard, Options.DisableTxnVerification,
//     ErrInvalidTxnState, ErrTransactionCoordinatorFenced; for the
//     coordinators' internal topics, Record, ForEachRecord,
//     ForEachRecordInBatches, ForEachBatch, AppendRecords and
//     AppendProducerRecords with BatchProducer (records_api.go; they decode and
//     build records off the data path; coordinator/group frames
//     __consumer_offsets with them).
//   - Additions: Manager.Compact, Manager.CleanerStats, Options.Cleaner
//     (CleanerOptions), LogConfig.Delete, Stats.Cleaner*, Stats.UncleanableLogs,
//     RecoveryStats.SwapsCompleted/SwapsDiscarded, BatchHeader.DeleteHorizon
//     and LastSequence, DirStat.TotalBytes/UsableBytes, Manager.EnforceRetention,
//     Log.Dir, Log.RecoveryPoint, Log.Flush, ErrUnexpectedAppendOffset (a
//     follower batch below the log end), ErrNoLog, ErrLogDirOffline, ErrIO,
//     ErrNoSpace, ErrInvalidConfig, ErrDumpMismatch, ValidateBatch,
//     BatchHeaderSize, Options.FS / PowerLossJournal / ScrubBytesPerSecond /
//     ScrubInterval, Manager.Stats / Recovery / Scrub / Damaged, Log.Scrub /
//     Damage / FirstDamagedOffset / Recovery.
package engine
