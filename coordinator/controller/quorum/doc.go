// Package quorum is one voter of Samsa's metadata quorum: etcd raft's RawNode
// (go.etcd.io/raft/v3), the durable raft log and snapshots under metadata.log.dir,
// and the committed metadata Image the log's entries build. It owns consensus and
// storage only; what to propose is coordinator/controller's, carrying messages
// between voters and serving brokers is net's, building a Quorum from the
// configuration is cmd/samsa's (docs/CLUSTER.md, "coordinator/controller/quorum").
//
// # Offsets and entries
//
// A metadata offset is a raft index. A raft entry of type EntryNormal with data holds
// one metadata.EncodeEntry frame, whose records apply all or none; other entries
// (raft's empty entry of a new term) hold no records and still take an offset. The
// image at offset k has applied every committed entry up to k. A fresh storage is
// bootstrapped with a snapshot at offset 1, term 1, that holds the voter set and
// the image of Config.BootstrapRecords (empty, or a single-node store imported by
// ImportLegacyStore); the first entry of the log is offset 2. A raft snapshot's data
// is metadata.EncodeSnapshot of the image at its offset. A configuration change
// (EntryConfChangeV2) carries in its context an entry frame too: the
// metadata.VotersRecord of the members after it, applied with it (membership.go).
//
// # Goroutines
//
// The core — Tick and HandleReady — runs on one goroutine: Run's in a process, the
// test's in a simulation. Step, ReportUnreachable and Propose may be called from any
// goroutine: they queue for the core's next HandleReady and never block. The readers
// (Committed, Leader, IsLeader, ReadyForWrites, CurrentLeadership, ReadCommitted,
// Snapshot, WaitCommitted, Status) may be called from any goroutine and see what the
// core last published. Subscribers (Subscribe, SubscribeLeadership) are called on
// the core's goroutine and must not block; they may call any method but Tick and
// HandleReady. Storage methods are safe for concurrent use; only the core writes.
// Locks: the queue's (inbox), the published state's (pub) and the storage's are
// never held together — each is taken and released in turn — and no lock is held
// while a subscriber or the transport runs.
//
// # The core's cycle (etcd raft's contract, README "Usage")
//
// HandleReady steps the queued messages, then for every Ready, in order:
//
//  1. A snapshot from the leader is decoded first (corrupt data stops the voter
//     before anything is written), then persisted (Storage.ApplySnapshot: durable).
//  2. Entries and hard state are persisted (Storage.Save, fdatasync'ed when raft
//     says MustSync: entries, a new term or vote; a commit-index-only change is
//     written without sync, as raft allows).
//  3. Only then are the Ready's messages sent (Transport.Send). A MsgSnap is
//     reported to raft as sent; one that was lost is sent again when the follower
//     rejects the next append.
//  4. The snapshot, then the committed entries, are applied; every SnapshotEntries
//     applied entries a snapshot is taken (Storage.CreateSnapshot).
//  5. Advance; then the new offset and image are published, subscribers called,
//     and the proposals the applied entries decide resolved.
//
// Then the queued proposals are appended (leader only) and their Readys handled the
// same way. A Storage error, or corrupt stored or received state, is fatal: the voter
// stops (every proposal and later call fails with ErrStopped wrapping the cause); a
// restart recovers from the disk.
//
// Raft runs with CheckQuorum (a leader that has not heard from a majority for an
// election timeout steps down) and PreVote (a voter that was cut off campaigns only
// if it could win, so its return does not disrupt the quorum), and proposal
// forwarding off (only the leader's controller proposes). The election timeout is
// counted in ticks: while the leader a voter followed is known gone (its process's
// connections closed and its listener refuses: Config.LeaderLost), the voter ticks
// ten times as often (NextTick), so a killed leader is replaced in about a tenth of
// the timeout, for at most three elections. A quorum of one voter
// campaigns in New: its first HandleReady makes it leader, ready for writes, in one
// fdatasync, with no election timeout.
//
// # Invariants
//
//  1. Entries, hard state and snapshots of a Ready are durable before any message
//     of that Ready is sent.
//  2. Only committed entries are applied, in index order, each once.
//  3. The image at offset k is the same on every voter: every voter applies the same
//     bytes to the same image; a committed entry whose records metadata.Image.Apply
//     rejects (or that does not decode) is logged and skipped on every voter alike
//     (it is a bug of the proposer's validation), and its proposal gets ErrRejected.
//  4. The published (offset, image) only moves forward, and is published before the
//     proposals it resolves.
//  5. A proposal resolves exactly once, with success only if the entry committed at
//     its index has its term and data. Leadership lost fails the pending proposals
//     with ErrLost (they may still commit: read the log to know).
//  6. ReadyForWrites: this voter leads and has applied its term's first entry, hence
//     every entry of earlier terms.
//  7. A static quorum's voter set is fixed at bootstrap (controller.quorum.voters)
//     and stored with every snapshot; New refuses another set (ErrVotersChanged),
//     and a committed conf change — which no voter proposes — is cancelled and
//     logged. A dynamic quorum's members change only through raft's configuration
//     changes (membership.go, voterops.go): one at a time, a controller added as a
//     learner that votes only once caught up, voters added and removed in a joint
//     configuration, a member's raft id a function of its node id and directory id,
//     and the configuration and the image's VotersRecord changed by the same entry.
//  8. A leader leads (IsLeader, proposals) only while it is a voter of its applied
//     configuration; one that is not moves leadership to a voter (handOver), and
//     one asked to remove itself moves it first.
//
// # Storage
//
// Storage (interface) is raft.Storage plus the writes of the cycle. DiskStorage
// keeps it under a directory; MemStorage keeps it in memory for simulations, with a
// crash model: Save without sync is written but not durable, Crash keeps the durable
// state plus a prefix of the unsynced writes (an append-only file's behaviour), and
// snapshots are durable at once. Both keep the whole retained log in memory: entries
// from the previous snapshot on (one to two snapshot intervals), so a follower or
// broker a little behind catches up from the log rather than a snapshot.
//
// Directory (metadata.log.dir):
//
//	LOCK                          flock'd while a DiskStorage has the directory open
//	00000000000000000001.snap     a snapshot, named by its index (only the newest is kept)
//	00000000000000000001.wal      a log segment, named by its base: its entries follow it
//	00000000000000012040.wal      the active segment (the last)
//	*.snap.tmp, *.wal.tmp         a file being written; removed at open
//
// A metadata.Store of the single-node layout (NNN.log, NNN.snapshot) in the same
// directory is not read here: ImportLegacyStore reads it into the bootstrap snapshot,
// and a fresh directory holding one is refused (ErrLegacyStore) unless the caller
// says it was imported. Integers are big-endian; uvarint is encoding/binary's.
//
// Segment: a header, then one frame per Save, appended:
//
//	+------------+---------+-----------+---------+--------+
//	| "SMRWAL01" | base    | base term | flags   | crc32c |   header, 32 bytes
//	| 8 bytes    | u64     | u64       | u32     | u32    |
//	+------------+---------+-----------+---------+--------+
//	base:  the index of the entry before the segment's first (a snapshot's index)
//	flags: 1 = reset: the log before base is discarded (a snapshot from the leader)
//	crc32c: Castagnoli CRC of the 28 bytes before it
//
//	+--------+------------+------------+------+-------+------------+-------+---------+
//	| length | length crc | body crc   | kind | flags | hard state | count | entries |
//	| u32    | u32        | u32        | 1    | u8    | 24 bytes   | uvar  |         |
//	+--------+------------+------------+------+-------+------------+-------+---------+
//	length:     bytes of the body (kind to the end)
//	length crc: crc32c of the 4 length bytes (a length is trusted only if it checks)
//	body crc:   crc32c of the body
//	flags:      1 = a hard state follows: term u64, vote u64, commit u64
//	entry:      index u64 | term u64 | type u8 | data length uvarint | data
//
// Entries of a frame are consecutive; an entry at index i replaces every entry at
// i or above (raft's suffix replacement), never one at or below the commit index.
// A new segment is written to a temporary name, fdatasync'ed and renamed, and its
// first frame always holds the hard state, so no segment exists half written and the
// hard state survives the removal of older segments.
//
// Snapshot file, written to a temporary name, synced, renamed, the directory synced:
//
//	+------------+-------+------+---------------+-----------------+-------------+------+--------+
//	| "SMRSNP01" | index | term | voters        | learners        | data length | data | crc32c |
//	|            | u64   | u64  | uvar n, n u64 | uvar n, n u64   | u64         |      | u32    |
//	+------------+-------+------+---------------+-----------------+-------------+------+--------+
//	crc32c covers everything before it; data is metadata.EncodeSnapshot's
//
//	"SMRSNP02", written only for a joint configuration (a voter change in
//	progress): after learners, voters outgoing and learners next (uvar n, n u64
//	each) and auto-leave (u8 0 or 1), then data length, data, crc32c as above
//
// Writes. Bootstrap: the snapshot at 1, then segment 1 (reset) with the hard state.
// Save: one frame, fdatasync'ed if sync. CreateSnapshot at i (an applied index): the
// snapshot file; then, after syncing the active segment, a new segment based at i
// holding the hard state and the entries after i; then the segments the previous
// snapshot covers (a segment whose successor's base is at or before the previous
// snapshot's index) and older snapshot files are removed. ApplySnapshot (from the
// leader): the snapshot file, then a reset segment at its index, then every other
// segment and snapshot is removed. A crash between any two steps recovers to the
// state before or after the operation.
//
// Recovery (OpenDiskStorage). The newest snapshot must read back intact (else
// ErrCorrupt; older snapshots are not a fallback, since the log behind them is gone).
// Segments are replayed in base order: a segment continues the log (its base within
// it, with that term) or, flagged reset, restarts it after the snapshot. In the last
// segment a torn tail — what a crash left of the last, unacknowledged write — is
// truncated and logged: a frame header cut short, a checked length that runs past the
// end of the file, a zero-filled tail, or a last frame whose body fails its checksum
// with nothing but zeros after it. Anything else is ErrCorrupt, an error the operator
// sees and nothing repaired: a bad frame with data after it, any bad frame in an
// earlier segment, a length that fails its own checksum, a segment that does not
// continue the log, a commit index past the last entry, segments without a snapshot
// that hold more than a hard state from offset 0 (what a controller not yet added to
// a dynamic quorum saves before the leader's snapshot).
// (A damaged byte in the last frame of the last segment is indistinguishable from a
// torn write and is truncated; with fdatasync before every acknowledgement that frame
// is the only one a crash can tear.) If the log does not hold the snapshot's index
// with its term (a snapshot from the leader whose reset segment a crash prevented),
// the log restarts after the snapshot. The commit index recovered is at least the
// snapshot's index.
//
// # Brokers and DescribeQuorum
//
// ReadCommitted serves a broker's metadata fetch: committed (and locally applied)
// entries from an offset, or SnapshotNeeded when the offset is compacted, with the
// snapshot's offset and term; Snapshot returns its data; WaitCommitted long-polls.
// Status is DescribeQuorum's: leader, term, commit index (the high watermark is
// commit+1) and, on the leader, each voter's and each learner's match index, lag,
// last contact and last time caught up, with its directory id; Members the
// configuration's members with their endpoints (SubscribeMembers follows them, so
// that the transport knows a new member's address before raft sends to it).
//
// # Not in scope
//
// Brokers as raft learners (they follow the committed log by fetching it, KRaft's
// way; learners are controllers being added), raft's
// asynchronous storage writes and the leader's parallel append (thesis §10.2.1),
// ReadIndex reads, and snapshots sent in chunks by raft (a MsgSnap carries the whole
// snapshot; brokers read snapshots with FetchSnapshot's chunks at the net layer).
// Snapshots are encoded on the core's goroutine: at 100 brokers and 200,000
// partition replicas (a 4.8 MB snapshot) that takes about 16 ms, and installing one
// from the leader about 30 ms, well inside an election timeout.
//
// # How it is shown
//
// sim_test.go: a deterministic simulation of 3 and 5 voters (MemStorage, a seeded
// network that drops, delays, duplicates and reorders, partitions, crashes that lose
// unsynced writes, restarts, clients proposing throughout) checking at every step:
// one leader per term, every voter's applied log a prefix of one history, every
// voter's image that history's image, acknowledged proposals at their offsets, and
// convergence within a bound after heal. sim_members_test.go: the same checks on a
// dynamic quorum whose voters are added, removed and whose disks are wiped during
// the chaos (TestSimMembership), and the operator's story, one controller grown
// to three, the leader removed, a lost disk replaced, shrunk back to one
// (TestSimGrowShrinkReplace). storage_test.go: the disk against the
// memory model across power losses (engine/vfs.CrashFS), torn tails, corruption,
// compaction; FuzzStorageRecovery. realtime_test.go: three Run loops, the leader
// killed, a new one committing within 3 s. bench_test.go: propose→commit latency on
// disk, and the scale of 100 brokers and 200,000 partition replicas.
//
//	go test -race ./coordinator/controller/quorum                  # 250 seeds
//	SAMSA_LONG=1 go test ./coordinator/controller/quorum           # thousands (make test-long-quorum)
//	go test ./coordinator/controller/quorum -run '^TestSim$/voters=3' -seed N -simtrace -v
package quorum
