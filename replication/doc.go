// Package replication owns a broker's replicas: for every partition it hosts, its
// role (leader or follower), the leader and partition epochs, the ISR and a change of
// it in flight, every follower's fetch offset and last caught-up time, the high
// watermark, the acks=all produces waiting for it, and the fetchers that copy other
// leaders' partitions here. It is Kafka's ReplicaManager, Partition,
// ReplicaFetcherThread and AlterPartitionManager, for the cluster the controller
// describes (docs/CLUSTER.md, "replication").
//
// It imports engine and purgatory of the project only. The cores are I/O-free: they
// take a Clock, a Log per partition (*engine.Log implements it), a FetchClient per
// fetcher and an ISRClient, and with Config.Manual they start no goroutine, so the
// deterministic simulation in this package's tests steps them exactly.
//
// # States
//
//	    ┌───────────────── Apply: Leaders ────────────────┐
//	    │                                                 ▼
//	┌──────┐                                         ┌────────┐ ◀─┐ Leaders, new epoch: a new
//	│ none │                                         │ leader │   │ leadership (follower
//	└──────┘                                         └────────┘ ──┘ states reset); same epoch:
//	    │                                              ▲    │       ISR and assignment
//	    │                               Apply: Leaders │    │ Apply: Followers
//	    │                                              │    ▼
//	    │           Apply: Followers               ┌──────────┐ ◀─┐ Followers, new leader or
//	    └────────────────────────────────────────▶ │ follower │   │ epoch: to that leader's
//	                                               └──────────┘ ──┘ fetcher, truncating first
//
//	any state ── Apply: Stopped (Delete: the log too) ──▶ stopped (the Partition is dropped)
//
// A state older than the one applied (lower leader epoch, or the same with a lower
// partition epoch) is ignored. Losing leadership settles the produces still waiting
// (NOT_LEADER_OR_FOLLOWER).
//
// # The high watermark (Kafka's classic ISR rule)
//
//	HW = min( leader's own end, fetch offset of every follower in the maximal ISR )
//	     moved only forward, only while this node leads
//
//	leader's own end:  how far Log.OnDurable has reported: the fdatasynced end under
//	                   the engine's fsync policy, the log end under the others
//	                   (`replicated`, interval, none), where OnDurable answers at once
//	follower's offset: the FetchOffset of its last valid fetch in this leader epoch (its
//	                   log end; under fsync also its durable end: a follower sends its
//	                   next fetch only once what it appended is fdatasynced)
//	maximal ISR:       the committed ISR, or while an AlterPartition is unresolved the
//	                   larger of it and the proposed one (expanding: with the newcomer;
//	                   shrinking: still with the laggards)
//	with eligible leader replicas (PartitionState.StrictMinISR, the cluster at
//	eligible.leader.replicas.version 1, KIP-966): no move at all while the committed
//	ISR has fewer than min(min.insync.replicas, replicas) members (Kafka's
//	isUnderMinIsr), so a replica that leaves such an ISR holds every committed record
//	and the controller may elect it
//
// ISR changes (isr.go): a follower not in the ISR that fetches at or past the HW and the
// start of this leader epoch is proposed in; one that has not caught up for
// replica.lag.time.max.ms (a follower at the leader's log end is caught up however long
// ago it fetched, as in Kafka) is proposed out; one in the ISR that fetches below the
// HW has lost records it held (a damaged range cut, unsynced writes lost) and is
// proposed out at that fetch. A follower whose fetch session leaves an unchanged
// partition out (FollowerQuiet: in the ISR, at the log end) is caught up as of its
// latest fetch, through the session's clock, until its next recorded fetch. One proposal per partition at a time,
// sent through the ISRClient with the partition epoch; the leader never applies the
// answer, only what Apply brings from the committed metadata. The ISR a leader
// proposes never becomes empty (the leader stays in its own); what the controller does
// when it fences the last member (keep it there, or, with eligible leader replicas,
// empty the ISR and elect from the ELR) is coordinator/controller's.
//
// Damage (fetcher.go): before each fetch a follower whose log records a damaged range
// (engine: found at open or by the scrubber) truncates to its first damaged offset and
// fetches the rest again from the leader. A leader with damage keeps leading (its
// damaged range is refused with CORRUPT_MESSAGE): giving up leadership for it is not
// built. Without eligible leader replicas the HW keeps moving below
// min.insync.replicas; acks=all is refused there instead (below).
//
// acks (produce.go): acks=0 and 1 are settled once the leader's append is durable by
// the policy; acks=-1 is refused with NOT_ENOUGH_REPLICAS, before anything is
// appended, when the committed ISR is smaller than min.insync.replicas, and otherwise
// settles when the HW passes the records: NOT_ENOUGH_REPLICAS_AFTER_APPEND if the
// maximal ISR is then below min.insync.replicas, NOT_LEADER_OR_FOLLOWER if this node no
// longer leads in the epoch it appended in, REQUEST_TIMED_OUT after the request's
// timeout. The HWs of a request's partitions all move before any is announced, so a
// consumer long poll is woken once per produce request.
//
// Followers (fetcher.go): one Fetcher per source broker and index (Kafka's
// getFetcherId over num.replica.fetchers), batching that broker's partitions through
// an incremental fetch session (KIP-227, fetcher_session.go). A follower appends the
// leader's batches at the leader's offsets and epochs, takes its HW and log start,
// truncates where its epochs and the leader's part (the diverging epoch of Fetch v12+,
// or OffsetForLeaderEpoch first with FetcherConfig.UseOffsetForLeaderEpoch; in as many
// rounds as its epochs take, KIP-279), starts over empty at the leader's log start
// when its log ends below it (full sync), or, on a tiered partition whose leader
// answers OFFSET_MOVED_TO_TIERED_STORAGE (its log ends in what the leader holds in
// remote storage only), at the leader's earliest local offset, asked by ListOffsets,
// with the producer state and leader epoch rebuilt from remote storage
// (fetcher_tiered.go, Kafka's TierStateMachine; the leader answers it to Fetch v16+,
// MinTieredFetchVersion), and throttles replicas being added by a
// reassignment to follower.replication.throttled.rate while they are behind.
//
// # Invariants
//
//  1. Roles change only in Apply, in metadata order, per partition; no stale state is
//     applied, and a replica follows or leads in exactly one leader epoch at a time.
//  2. While this node leads, the HW only moves forward, and only to the smallest of the
//     leader's own end and the maximal ISR's fetch offsets (above); with StrictMinISR
//     only while the committed ISR holds min.insync.replicas (capped) members.
//  3. A follower's fetch offset counts only if its fetch was made in this leader epoch,
//     carried no diverging epoch, lay within [log start, log end], and came from the
//     broker's newest incarnation seen (KIP-903: an older broker epoch is refused).
//     It is recorded once, when the fetch arrives (FollowerFetch): a long poll
//     completing from the purgatory is answered with FollowerReread, which records
//     nothing, as its offset may predate the replica's removal and re-addition by a
//     reassignment within this leader epoch. Follower states are reset on every new
//     leadership, and a replica's when it leaves the replicas.
//  4. An acks=all produce is answered OK only while this node leads in the epoch it
//     appended in and the HW has passed its records.
//  5. The ISR the HW is computed over is never smaller than the committed one: a
//     proposal is resolved only by Apply bringing a newer partition epoch, or by an
//     answer saying nothing was committed (INELIGIBLE_REPLICA, INVALID_REQUEST,
//     OPERATION_NOT_ATTEMPTED); a lost answer is retried.
//  6. A follower writes its log only while it follows in the epoch its fetcher fetches
//     in, at the leader's offsets, and truncates only where its epochs and the
//     leader's agree (or, when behind the leader's log start, starts over there, or
//     at the leader's local log start when its offset moved to tiered storage).
//  7. No leader epoch is written to a log's epoch cache without a record: a new
//     leader answers as if its epoch started where it became leader
//     (Partition.EndOffsetForEpoch), and the engine adds the epoch with its first
//     append. (An epoch left in the cache without records would make a replica that
//     then follows name an epoch its records do not have.)
//
// The simulation (sim_test.go) checks, at every step, that no acknowledged record is
// lost or changes offset, that two replicas agree below both their HWs, that a leader's
// HW never goes backwards and that no replica truncates below its HW; and at the end
// that no log diverges.
//
// # Goroutines and locks
//
// Every exported method is safe for concurrent use; Apply calls are made one at a time.
// Without Manual a Manager runs: the produce purgatory's reaper; with an ISRClient the
// ISR goroutine (shrink checks every lag/2, AlterPartition one request at a time); one
// goroutine per fetcher, started when a partition first needs it and stopped when it
// has none (Apply) or at Close. Hooks and Produce's done run on the goroutine that made
// the change (a produce handler, the engine's flusher, a follower's fetch, Apply, the
// reaper) with no lock of this package held, and must not block.
//
// Lock order: Manager.applyMu → Manager.fetchMu → Fetcher.mu → Partition.mu →
// Partition.hwMu → the engine's locks. A delayed produce's lock (purgatory) comes
// before Partition.mu. Manager.partsMu and Manager.isrMu are leaves. Partition.mu is
// held shared across a leader append, so Apply's role change waits for appends in
// progress.
//
// # Planted bugs
//
// Built with the tag samsa_faults, environment variables switch on bugs the tests
// must catch (faults_on.go): SAMSA_FAULT_ACK_BEFORE_ISR=1 (acks=all answered after the
// leader's own append, before the ISR holds it), SAMSA_FAULT_FENCED_LEADER_ACKS=1
// (a leader that learns of a newer epoch acknowledges what was waiting) and
// SAMSA_FAULT_EARLY_ISR_JOIN=1 (a follower behind the HW is proposed into the ISR).
// A Manager created with any on logs "fault switches active" with the key switches.
// The default build has none.
//
// # Differences from Apache Kafka
//
//   - acks=all waits for the leader's own durability (under fsync) before it enters the
//     purgatory, so the local fsync is not bounded by the request's timeout; the
//     remaining timeout bounds the wait for the ISR.
//   - The leader applies an ISR change when Apply brings it, not from the
//     AlterPartition answer (until then the maximal ISR counts).
//   - No leader-side replication throttle (leader.replication.throttled.rate), no
//     fetching from followers (KIP-392), no delayed DeleteRecords waiting for the
//     followers' log starts; ISR eligibility of a broker (fenced, shutting down) is the
//     controller's to refuse (INELIGIBLE_REPLICA).
//   - ISRShrinks/ISRExpands count accepted proposals, not applied ISR changes.
package replication
