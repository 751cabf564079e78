package replication

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/internal/invariants"
)

// Role is a replica's part in its partition (see the state diagram in the package doc).
type Role int8

const (
	// RoleNone: created, no metadata applied yet.
	RoleNone Role = iota
	// RoleLeader: this node leads the partition in its leader epoch.
	RoleLeader
	// RoleFollower: this node follows the leader (a fetcher copies from it), or waits
	// for one (Leader -1).
	RoleFollower
	// RoleStopped: the replica was stopped; the Partition is no longer the Manager's.
	RoleStopped
)

func (r Role) String() string {
	switch r {
	case RoleNone:
		return "none"
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	case RoleStopped:
		return "stopped"
	}
	return "role(?)"
}

// followerState is the leader's view of one remote replica (Kafka's ReplicaState). It
// is reset whenever this node becomes leader in a new epoch, so nothing learnt under
// another leadership counts.
type followerState struct {
	id           int32
	fetchOffset  int64 // its log end offset as its last valid fetch gave it; -1 unknown
	logStart     int64 // its log start offset, as its last fetch gave it
	brokerEpoch  int64 // from its fetches (KIP-903); -1 unknown
	lastFetch    time.Time
	lastFetchLEO int64 // this leader's log end offset at that fetch; -1 unknown
	lastCaughtUp time.Time

	// While quiet is set (FollowerQuiet), the follower's fetches leave this partition
	// out because nothing changed: each of them is a fetch at quietOffset, which was
	// the log end when it went quiet, and quiet holds the time of the latest (Unix
	// nanoseconds on the Manager's clock). A recorded fetch folds it in and clears it.
	quiet       *atomic.Int64
	quietOffset int64
}

// quietAt is the time of the follower's latest fetch while quiet at its recorded
// fetch offset (zero: not quiet).
func (f *followerState) quietAt() time.Time {
	if f.quiet == nil || f.fetchOffset != f.quietOffset {
		return time.Time{}
	}
	return time.Unix(0, f.quiet.Load())
}

// caughtUpAt is when the follower was last caught up: as its last recorded fetch
// found it, or at its latest quiet fetch.
func (f *followerState) caughtUpAt() time.Time {
	return later(f.lastCaughtUp, f.quietAt())
}

// foldQuiet turns the quiet fetches into the recorded state (the latest of them was a
// caught-up fetch at quietOffset) and ends quiet.
func (f *followerState) foldQuiet() {
	if t := f.quietAt(); !t.IsZero() {
		f.lastFetch = later(f.lastFetch, t)
		f.lastCaughtUp = later(f.lastCaughtUp, t)
	}
	f.quiet = nil
}

// caughtUp reports Kafka's isCaughtUp: at the leader's end, or caught up within lag.
func (f *followerState) caughtUp(leo int64, now time.Time, lag time.Duration) bool {
	return f.fetchOffset == leo || now.Sub(f.caughtUpAt()) <= lag
}

// isrChange is an AlterPartition this leader has proposed and not yet seen resolved:
// while it exists the HW is computed over maximal, the larger of the committed and the
// proposed ISR (Kafka's PendingExpandIsr / PendingShrinkIsr).
type isrChange struct {
	proposed    []int32
	maximal     []int32
	base        int32 // the partition epoch the proposal is based on
	leaderEpoch int32
	expand      bool
	inflight    bool      // sent, no answer yet
	answered    bool      // answered (committed or superseded): resolved by Apply, never resent
	retryAt     time.Time // when unsent: not before
}

// Partition is this node's replica of one partition: its role, epochs, ISR and, while
// it leads, every follower's state and the high watermark.
//
// Goroutines: any. mu guards the role, the epochs, the assignment and the ISR: Apply
// and ISR answers write it; appends, follower fetches and ack checks read it (an
// append holds it shared across the log append, so a role change waits for appends in
// progress and none starts in the old role after it). hwMu, taken inside mu, guards
// the follower states and the leader's durable end, and orders HW computations. No
// lock is held while a hook runs.
//
// Invariants kept here (numbered as in the package doc):
//
//	(2) the HW moves only forward while this node leads, and only to the smallest of
//	    the leader's durable end and the fetch offsets of the maximal ISR; with
//	    strictMinISR, never while the committed ISR is under min.insync.replicas;
//	(3) a follower fetch offset counts only if the fetch was made in this leader epoch,
//	    carried no diverging epoch, was within [log start, LEO] and came from the
//	    broker's newest incarnation seen, and only when it arrives (FollowerFetch,
//	    not FollowerReread);
//	(4) an acks=all produce is answered OK only while this node still leads in the
//	    epoch it appended in, with the HW past the records.
type Partition struct {
	m       *Manager
	tp      engine.TopicPartition
	topicID [16]byte
	log     Log
	elog    *engine.Log // log, when it is the engine's (EngineLog)

	mu             sync.RWMutex
	role           Role
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32 // committed
	adding         []int32
	removing       []int32
	minISR         int
	strictMinISR   bool // PartitionState.StrictMinISR
	recovering     bool
	epochStart     int64      // log end offset when this node became leader in leaderEpoch
	pending        *isrChange // leader: an ISR change not yet resolved
	throttled      bool       // follower: this replica is being added (reassignment): throttle it

	hwMu      sync.Mutex
	followers []followerState // leader: one per remote replica, in replica order
	durable   int64           // leader: its own end as far as OnDurable has reported

	// Copies readable without mu.
	epochA   atomic.Int32
	roleA    atomic.Int32
	leaderA  atomic.Int32
	remotesA atomic.Int32 // leader: remote replicas (the append hook runs only if > 0)
	waiting  atomic.Int32 // acks=all produces parked on this partition
	fetcherA atomic.Pointer[Fetcher]
}

func newPartition(m *Manager, tp engine.TopicPartition, id [16]byte, l Log) *Partition {
	p := &Partition{m: m, tp: tp, topicID: id, log: l, leader: -1, leaderEpoch: -1, partitionEpoch: -1}
	p.elog, _ = l.(*engine.Log)
	p.epochA.Store(-1)
	p.leaderA.Store(-1)
	return p
}

// TopicPartition is the partition's name.
func (p *Partition) TopicPartition() engine.TopicPartition { return p.tp }

// TopicID is the topic's id as the metadata gave it.
func (p *Partition) TopicID() [16]byte { return p.topicID }

// Log is the replica's log.
func (p *Partition) Log() Log { return p.log }

// EngineLog is the replica's log as the engine's (nil when it is another Log: the
// simulation's): what the protocol layer reads, appends and verifies through. The
// Manager created it from a metadata delta; nothing else creates a partition's log.
func (p *Partition) EngineLog() *engine.Log { return p.elog }

// Role is the replica's current role.
func (p *Partition) Role() Role { return Role(p.roleA.Load()) }

// LeaderEpoch is the leader epoch last applied (-1 before any).
func (p *Partition) LeaderEpoch() int32 { return p.epochA.Load() }

// Leader returns the leader and leader epoch last applied (-1, -1 before any; leader
// -1 when the partition has none).
func (p *Partition) Leader() (id, epoch int32) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.leader, p.leaderEpoch
}

// State is a snapshot of the replica's metadata state.
type State struct {
	Role           Role
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas, ISR  []int32
	MaximalISR     []int32 // the ISR the HW is computed over (ISR plus a pending change)
	PendingISR     []int32 // a proposed ISR not yet resolved (nil: none)
	MinISR         int
	StrictMinISR   bool
	HighWatermark  int64
	LogEndOffset   int64
}

// State returns a snapshot; its slices are copies.
func (p *Partition) State() State {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s := State{Role: p.role, Leader: p.leader, LeaderEpoch: p.leaderEpoch, PartitionEpoch: p.partitionEpoch,
		Replicas: slices.Clone(p.replicas), ISR: slices.Clone(p.isr), MaximalISR: slices.Clone(p.maximalISRLocked()),
		MinISR: p.minISR, StrictMinISR: p.strictMinISR, HighWatermark: p.log.HighWatermark(), LogEndOffset: p.log.LogEndOffset()}
	if p.pending != nil {
		s.PendingISR = slices.Clone(p.pending.proposed)
	}
	return s
}

// maximalISRLocked is the ISR the HW is computed over. Caller holds mu.
func (p *Partition) maximalISRLocked() []int32 {
	if p.pending != nil {
		return p.pending.maximal
	}
	return p.isr
}

// publishLocked publishes the role, epoch and leader to the copies read without mu.
// It follows every change of the assignment (setAssignmentLocked): invariants builds
// check there that the ISR lies within the replicas. Caller holds mu (exclusive).
func (p *Partition) publishLocked() {
	if invariants.Enabled {
		p.checkISRLocked()
	}
	p.roleA.Store(int32(p.role))
	p.epochA.Store(p.leaderEpoch)
	p.leaderA.Store(p.leader)
}

// checkISRLocked panics unless every member of the committed ISR is a replica
// (ISR ⊆ replicas). Caller holds mu.
func (p *Partition) checkISRLocked() {
	for _, r := range p.isr {
		if !slices.Contains(p.replicas, r) {
			panic(fmt.Sprintf("replication: invariant broken: ISR ⊆ replicas: partition %s: ISR %v, replicas %v", p.tp, p.isr, p.replicas))
		}
	}
}

// checkHW panics unless the log's high watermark lies at or below its end (HW ≤
// LEO); where names the change that moved it. The caller holds mu and leads: the
// log end then moves only forward (by appends), so that the high watermark read
// first cannot pass a log end read after it but by a broken invariant.
func (p *Partition) checkHW(where string) {
	if hw, leo := p.log.HighWatermark(), p.log.LogEndOffset(); hw > leo {
		panic(fmt.Sprintf("replication: invariant broken: HW ≤ LEO: partition %s, %s: high watermark %d, log end %d", p.tp, where, hw, leo))
	}
}

// maybeIncrementHWLocked moves the HW to the smallest of the leader's durable end and
// the fetch offsets of the maximal ISR, if that is above it, and, with strictMinISR
// (eligible leader replicas, Kafka's maybeIncrementLeaderHW), only while the committed
// ISR is not under min.insync.replicas. It reports whether the HW moved. Caller holds
// mu (shared or exclusive) and hwMu.
func (p *Partition) maybeIncrementHWLocked() bool {
	if p.role != RoleLeader || p.underMinISRLocked() {
		return false
	}
	hw := p.durable
	if leo := p.log.LogEndOffset(); hw > leo {
		hw = leo
	}
	maximal := p.maximalISRLocked()
	for i := range p.followers {
		f := &p.followers[i]
		if f.fetchOffset < hw && slices.Contains(maximal, f.id) {
			hw = f.fetchOffset
		}
	}
	old := p.log.HighWatermark()
	if hw <= old {
		return false
	}
	p.log.SetHighWatermark(hw)
	if invariants.Enabled {
		p.checkHW("leader's high watermark moved")
	}
	return p.log.HighWatermark() > old
}

// underMinISRLocked reports whether strictMinISR holds the HW: the committed ISR
// has fewer members than min(min.insync.replicas, replicas) (Kafka's isUnderMinIsr
// over its effectiveMinIsr). Caller holds mu.
func (p *Partition) underMinISRLocked() bool {
	return p.strictMinISR && len(p.isr) < min(p.minISR, len(p.replicas))
}

// localDurable records that the leader's log is durable below end (its OnDurable
// reported) and moves the HW if it can. It reports whether the HW moved; the caller
// announces the move (Manager.announce), after moving the HWs of every partition of
// its request.
func (p *Partition) localDurable(end int64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != RoleLeader {
		return false
	}
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	if end > p.durable {
		p.durable = end
	}
	return p.maybeIncrementHWLocked()
}

// appendAsLeader appends records in the current leader epoch and returns that epoch.
// acks=-1 is refused below min.insync.replicas before anything is written.
func (p *Partition) appendAsLeader(records []byte, acks int16, hold *engine.FlushHold) (engine.AppendResult, int32, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != RoleLeader {
		return engine.AppendResult{}, -1, ErrNotLeader
	}
	if acks == -1 && len(p.isr) < p.minISR {
		return engine.AppendResult{}, -1, ErrNotEnoughReplicas
	}
	res, err := p.log.Append(records, engine.AppendOptions{LeaderEpoch: p.leaderEpoch, Hold: hold})
	return res, p.leaderEpoch, err
}

// checkAck reports whether an acks=all produce of records ending below required,
// appended in leader epoch epoch, is settled, and with which outcome (Kafka's
// checkEnoughReplicasReachOffset, plus the epoch check).
func (p *Partition) checkAck(required int64, epoch int32) (bool, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != RoleLeader || p.leaderEpoch != epoch {
		if p.m.faults.fencedLeaderAcks() {
			return true, nil // planted bug: acknowledge what a newer leader may not have
		}
		return true, ErrNotLeader
	}
	if p.m.faults.ackBeforeISR() {
		return true, nil // planted bug: the leader's own append is enough
	}
	if p.log.HighWatermark() < required {
		return false, nil
	}
	if len(p.maximalISRLocked()) < p.minISR {
		return true, ErrNotEnoughReplicasAfterAppend
	}
	return true, nil
}

// FetchResult is what the leader tells the net layer to answer a follower's fetch of
// one partition with.
type FetchResult struct {
	HighWatermark  int64 // after this fetch updated the follower's state
	LogStartOffset int64
	LogEndOffset   int64 // read up to here (followers read past the HW)
	// Diverging: the follower's log diverges from this leader's; answer DivergingEpoch
	// {Epoch: DivergingEpoch, EndOffset: DivergingEndOffset} and no records.
	Diverging          bool
	DivergingEpoch     int32
	DivergingEndOffset int64
}

// FollowerFetch serves one partition of a follower's fetch on the leader (Kafka's
// Partition.fetchRecords for a follower): it checks leadership and the follower's
// CurrentLeaderEpoch (-1: unchecked), answers a diverging epoch when the follower's
// LastFetchedEpoch (-1: none) contradicts this log, else records the follower's fetch
// offset (its log end; under fsync, also its durable end, since a follower fetches again
// only after its appends are durable), which may move the HW and propose an ISR
// expansion. brokerEpoch is the ReplicaState's (-1: unknown).
//
// Errors: ErrNotLeader, ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch, ErrUnknownReplica,
// ErrStaleBrokerEpoch, ErrOffsetOutOfRange (the result then still carries the log
// start, HW and log end, so the follower can tell whether to start over at the log
// start), ErrOffsetMovedToTieredStorage (below the local log start of a tiered log,
// in remote storage: the result carries the whole log's start; only to a fetch of
// version >= MinTieredFetchVersion). The net layer sends the bytes from fetchOffset
// up to LogEndOffset. version is the Fetch request's.
//
// Call it once per fetch, when the request arrives; a fetch parked in the purgatory
// (a long poll) is answered with FollowerReread.
func (p *Partition) FollowerFetch(replicaID int32, brokerEpoch, fetchOffset int64, lastFetchedEpoch, currentLeaderEpoch int32, version int16) (FetchResult, error) {
	return p.withWholeLogStart(p.followerFetch(replicaID, brokerEpoch, fetchOffset, lastFetchedEpoch, currentLeaderEpoch, version, true))
}

// withWholeLogStart gives a fetch answer that is not OFFSET_OUT_OF_RANGE the
// whole log's start (followerLogStart).
func (p *Partition) withWholeLogStart(res FetchResult, err error) (FetchResult, error) {
	if err == nil {
		res.LogStartOffset = p.followerLogStart()
	}
	return res, err
}

// FollowerReread serves a follower's fetch again when it completes from the purgatory
// (a long poll woken by an append or its MaxWait): the checks of FollowerFetch, and the
// HW, log start and log end of now, but it records nothing. The fetch offset it
// carries is the follower's log end when the request arrived, possibly before the
// replica was removed and added again by a reassignment within this leader epoch (its
// log deleted meanwhile); counting it would put the replica in the ISR without the
// records (Kafka's readFromLog with updateFetchState false, for the same reason). The
// follower's state moves on with its next fetch.
func (p *Partition) FollowerReread(replicaID int32, brokerEpoch, fetchOffset int64, lastFetchedEpoch, currentLeaderEpoch int32, version int16) (FetchResult, error) {
	return p.withWholeLogStart(p.followerFetch(replicaID, brokerEpoch, fetchOffset, lastFetchedEpoch, currentLeaderEpoch, version, false))
}

func (p *Partition) followerFetch(replicaID int32, brokerEpoch, fetchOffset int64, lastFetchedEpoch, currentLeaderEpoch int32, version int16, record bool) (FetchResult, error) {
	now := p.m.clock.Now()
	p.mu.RLock()
	if p.role != RoleLeader {
		p.mu.RUnlock()
		return FetchResult{HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}, ErrNotLeader
	}
	if err := checkEpoch(currentLeaderEpoch, p.leaderEpoch); err != nil {
		p.mu.RUnlock()
		return FetchResult{HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}, err
	}
	l := p.log
	res := FetchResult{HighWatermark: l.HighWatermark(), LogStartOffset: l.LogStartOffset(), LogEndOffset: l.LogEndOffset()}
	fi := -1
	for i := range p.followers {
		if p.followers[i].id == replicaID {
			fi = i
			break
		}
	}
	if fi < 0 {
		p.mu.RUnlock()
		return res, ErrUnknownReplica
	}
	if lastFetchedEpoch >= 0 {
		fe, end := p.endOffsetForEpochLocked(lastFetchedEpoch)
		if fe >= 0 && (fe < lastFetchedEpoch || end < fetchOffset) {
			p.mu.RUnlock()
			res.Diverging, res.DivergingEpoch, res.DivergingEndOffset = true, fe, end
			return res, nil
		}
	}
	if fetchOffset < res.LogStartOffset || fetchOffset > res.LogEndOffset {
		p.mu.RUnlock()
		return p.outOfRange(res, fetchOffset, version)
	}
	p.hwMu.Lock()
	f := &p.followers[fi]
	if brokerEpoch >= 0 && f.brokerEpoch > brokerEpoch {
		p.hwMu.Unlock()
		p.mu.RUnlock()
		return res, ErrStaleBrokerEpoch
	}
	if !record {
		p.hwMu.Unlock()
		p.mu.RUnlock()
		return res, nil
	}
	f.foldQuiet()
	leo := res.LogEndOffset
	// An in-sync replica fetching below the HW has lost records it held (the HW
	// counts only what every ISR member reported): a follower that cut a damaged
	// range or lost unsynced writes in a power cut. It leaves the ISR at once rather
	// than after replica.lag.time.max.ms, so it is not elected with a shorter log.
	lost := fetchOffset < res.HighWatermark && slices.Contains(p.isr, replicaID) && replicaID != p.m.cfg.NodeID
	if lost {
		f.lastCaughtUp = time.Time{}
	}
	switch {
	case lost:
	case fetchOffset >= leo:
		f.lastCaughtUp = later(f.lastCaughtUp, now)
	case f.lastFetchLEO >= 0 && fetchOffset >= f.lastFetchLEO:
		f.lastCaughtUp = later(f.lastCaughtUp, f.lastFetch)
	}
	f.fetchOffset, f.lastFetch, f.lastFetchLEO = fetchOffset, now, leo
	if brokerEpoch >= 0 {
		f.brokerEpoch = brokerEpoch
	}
	moved := p.maybeIncrementHWLocked()
	res.HighWatermark = l.HighWatermark()
	caughtUp := fetchOffset >= res.HighWatermark && fetchOffset >= p.epochStart
	if p.m.faults.earlyISRJoin() {
		caughtUp = true // planted bug: a replica behind the HW joins the ISR
	}
	expand := p.pending == nil && !slices.Contains(p.isr, replicaID) && slices.Contains(p.replicas, replicaID) &&
		caughtUp && p.m.proposesISR()
	epoch := p.leaderEpoch
	p.hwMu.Unlock()
	p.mu.RUnlock()
	if moved {
		p.m.announce(p)
	}
	if lost && p.m.proposesISR() {
		p.m.log.Warn("an in-sync replica fetches below the high watermark; removing it from the ISR",
			"partition", p.tp.String(), "replica", replicaID, "fetch_offset", fetchOffset, "hw", res.HighWatermark)
		p.m.maybeShrink(p, now)
	}
	if expand {
		p.m.proposeExpand(p, epoch, replicaID)
	}
	return res, nil
}

// FollowerQuiet tells the leader that replicaID's fetches will leave this partition
// out until something changes: its log end, HW or log start, or this node's metadata
// (KIP-227 lets an incremental fetch name only what changed; the net layer's session
// then skips the partition rather than serving it on every fetch). Until the next
// recorded fetch (FollowerFetch) or FollowerAwake, each value stored in clock, the
// time of one of the follower's fetches in Unix nanoseconds on the Manager's clock,
// counts as a fetch at fetchOffset caught up at the log end, for the ISR (Kafka's
// lastCaughtUpTime); nothing else of the follower's state moves, so the HW does not.
//
// It reports false, and nothing changes, unless this node leads, replicaID's last
// recorded fetch was at fetchOffset, that is the log end, the follower is in the ISR
// and no ISR change is pending: a follower outside the ISR keeps being served, so that
// each of its fetches can propose it again.
func (p *Partition) FollowerQuiet(replicaID int32, fetchOffset int64, clock *atomic.Int64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != RoleLeader || p.pending != nil || !slices.Contains(p.isr, replicaID) || fetchOffset != p.log.LogEndOffset() {
		return false
	}
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	for i := range p.followers {
		f := &p.followers[i]
		if f.id != replicaID {
			continue
		}
		if f.fetchOffset != fetchOffset || f.lastFetchLEO != fetchOffset {
			return false
		}
		f.foldQuiet()
		f.quiet, f.quietOffset = clock, fetchOffset
		return true
	}
	return false
}

// FollowerAwake ends what FollowerQuiet started with clock, if it is still in force:
// the follower's fetches name the partition again (or no longer fetch it).
func (p *Partition) FollowerAwake(replicaID int32, clock *atomic.Int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	for i := range p.followers {
		if f := &p.followers[i]; f.id == replicaID && f.quiet == clock {
			f.foldQuiet()
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// checkEpoch applies KIP-320's fencing: a request's current leader epoch (-1: not
// checked) must equal the partition's.
func checkEpoch(current, actual int32) error {
	switch {
	case current < 0 || current == actual:
		return nil
	case current > actual:
		return ErrUnknownLeaderEpoch
	default:
		return ErrFencedLeaderEpoch
	}
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch for this replica's log: the largest
// epoch <= epoch that it knows and where the next one starts (its log end for the
// latest), or (-1, -1). While this node leads in an epoch it has not appended in yet,
// the answer counts that epoch as starting where this node became leader: what Kafka
// gets by writing the epoch into the cache on becoming leader. (This package does not
// write it: an epoch with no record left in the cache of a replica that then follows
// would make it name an epoch its records do not have; the engine adds the epoch with
// the leader's first append.)
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.endOffsetForEpochLocked(epoch)
}

// LatestEpoch is the latest leader epoch of the replica's log, counting (as
// EndOffsetForEpoch does) the epoch this node leads in.
func (p *Partition) LatestEpoch() int32 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	latest := p.log.LatestEpoch()
	if p.role == RoleLeader && p.leaderEpoch > latest {
		return p.leaderEpoch
	}
	return latest
}

func (p *Partition) endOffsetForEpochLocked(e int32) (int32, int64) {
	l := p.log
	latest := l.LatestEpoch()
	if p.role != RoleLeader || p.leaderEpoch <= latest {
		return l.EndOffsetForEpoch(e)
	}
	// The cache plus (leaderEpoch, epochStart), as Kafka's LeaderEpochFileCache answers.
	switch {
	case e < 0 || e > p.leaderEpoch:
		return -1, -1
	case e == p.leaderEpoch:
		return e, l.LogEndOffset()
	case latest < 0:
		return e, p.epochStart // below the first epoch: the requested one, where the first starts
	case e >= latest:
		return latest, p.epochStart
	}
	return l.EndOffsetForEpoch(e) // the next epoch is one of the cache's own
}

// CheckLeader returns nil when this node leads the partition and currentLeaderEpoch
// (-1: unchecked) is its epoch; else ErrNotLeader, ErrFencedLeaderEpoch or
// ErrUnknownLeaderEpoch. For requests served by the leader alone (consumer fetches,
// ListOffsets, DeleteRecords, OffsetForLeaderEpoch).
func (p *Partition) CheckLeader(currentLeaderEpoch int32) error {
	if Role(p.roleA.Load()) != RoleLeader {
		return ErrNotLeader
	}
	return checkEpoch(currentLeaderEpoch, p.epochA.Load())
}

// appendAsFollower appends a fetched chunk, if this replica still follows in epoch
// (the fetcher's view): a late answer of an old leader is dropped. Batches wholly
// below the log end (an overlap after a retry) are skipped; a batch straddling it means
// the two logs are batched differently there, which replication never produces: the
// log is cut back to that batch's base first.
func (p *Partition) appendAsFollower(epoch int32, records []byte, hold *engine.FlushHold) (appended bool, err error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != RoleFollower || p.leaderEpoch != epoch {
		return false, ErrNotLeader
	}
	leo := p.log.LogEndOffset()
	b := records
	for len(b) >= engine.BatchHeaderSize {
		h, err := engine.ParseBatchHeader(b)
		if err != nil || h.Size() > int64(len(b)) {
			break
		}
		if h.LastOffset() >= leo {
			if h.BaseOffset < leo {
				p.m.log.Warn("follower batch straddles the log end; cutting back to it",
					"partition", p.tp.String(), "base", h.BaseOffset, "leo", leo)
				if err := p.log.TruncateTo(h.BaseOffset); err != nil {
					return false, err
				}
			}
			break
		}
		b = b[h.Size():]
	}
	// Drop a partial batch at the end (a response cut at its byte limit).
	end := 0
	for end+engine.BatchHeaderSize <= len(b) {
		h, err := engine.ParseBatchHeader(b[end:])
		if err != nil || int64(end)+h.Size() > int64(len(b)) {
			break
		}
		end += int(h.Size())
	}
	if end == 0 {
		return false, nil
	}
	if _, err := p.log.Append(b[:end], engine.AppendOptions{Follower: true, Hold: hold}); err != nil {
		return false, err
	}
	return true, nil
}

// truncateAsFollower cuts the log to offset, if this replica still follows in epoch.
func (p *Partition) truncateAsFollower(epoch int32, offset int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != RoleFollower || p.leaderEpoch != epoch {
		return ErrNotLeader
	}
	return p.log.TruncateTo(offset)
}

// restartAsFollower empties the log and starts it at offset (full sync), if this
// replica still follows in epoch.
func (p *Partition) restartAsFollower(epoch int32, offset int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != RoleFollower || p.leaderEpoch != epoch {
		return ErrNotLeader
	}
	return p.log.TruncateFullyAndStartAt(offset)
}
