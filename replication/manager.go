package replication

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/purgatory"
)

// FetchClient sends one fetcher's requests to its source broker (net/peer's Fetcher on
// the wire, one connection per fetcher). Calls may block (a Fetch long-polls up to its
// MaxWaitMillis); they must return when ctx ends. The client may send at another
// version than the request's (the fetcher fills both the topic names and ids, and both
// ReplicaID and ReplicaState) and must set the response's Version to the one it read.
// The request belongs to the fetcher again once the call returns.
type FetchClient interface {
	Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error)
	OffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error)
	// ListOffsets asks for the leader's earliest local offsets (a follower whose
	// fetch offset moved to tiered storage).
	ListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error)
}

// ISRClient sends AlterPartition to the active controller and returns its answer once
// the change is committed or refused (a transport error or ctx's end says nothing about
// whether it committed; the Manager then retries the same proposal).
type ISRClient interface {
	AlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error)
}

// Hooks tell the layer above about changes it waits on. They run on the goroutine that
// made the change (a produce handler, the flusher, a follower fetch, Apply) with no
// lock of this package held, and must not block.
type Hooks struct {
	// HighWatermarkMoved: a leader's HW moved (consumer long polls may complete).
	HighWatermarkMoved func(*Partition)
	// LeaderAppended: a leader with followers appended (follower long polls may
	// complete). Not called for partitions without remote replicas.
	LeaderAppended func(*Partition)
}

// FetcherConfig are the follower fetch settings (Kafka's replica.fetch.* keys).
type FetcherConfig struct {
	MaxBytes         int32         // replica.fetch.max.bytes, per partition (1 MiB)
	ResponseMaxBytes int32         // replica.fetch.response.max.bytes (10 MiB)
	MaxWait          time.Duration // replica.fetch.wait.max.ms (500 ms)
	MinBytes         int32         // replica.fetch.min.bytes (1)
	Backoff          time.Duration // replica.fetch.backoff.ms (1 s)
	// Version is the Fetch version asked for (default 17, Kafka's followers' at
	// every metadata.version Samsa supports; 12..18). From v13 topics are named by
	// id, from v15 the replica by ReplicaState; from MinTieredFetchVersion the
	// leader answers OFFSET_MOVED_TO_TIERED_STORAGE.
	Version int16
	// UseOffsetForLeaderEpoch makes a follower find its divergence point with
	// OffsetForLeaderEpoch before fetching (Kafka before 2.7) instead of from Fetch's
	// diverging epoch. Either way it truncates at the same place.
	UseOffsetForLeaderEpoch bool
}

// Config configures a Manager.
type Config struct {
	NodeID int32
	// BrokerEpoch returns this broker's current registration epoch, sent in follower
	// fetches (ReplicaState) and AlterPartition; nil: -1.
	BrokerEpoch func() int64
	Logs        LogStore
	Clock       Clock        // nil: the wall clock
	Logger      *slog.Logger // nil: discard
	// ISR sends ISR changes; nil: none are proposed (a single node, ISR = {self}).
	ISR ISRClient
	// Fetch returns the client of fetcher index (< NumReplicaFetchers) of source
	// broker; nil: this node cannot follow (a Delta making it a follower of another
	// broker leaves the replica idle and is logged). Called once per fetcher.
	Fetch func(source int32, index int) FetchClient
	// ReplicaLagTimeMax is replica.lag.time.max.ms (30 s).
	ReplicaLagTimeMax time.Duration
	// NumReplicaFetchers is num.replica.fetchers: fetchers per source broker (1).
	NumReplicaFetchers int
	Fetcher            FetcherConfig
	// FollowerThrottleRate is follower.replication.throttled.rate in bytes/s (0 or
	// Kafka's default Long.MAX_VALUE: none):
	// it limits what the fetchers copy for throttled replicas (those being added by a
	// reassignment) that are not caught up.
	FollowerThrottleRate int64
	// AlterPartitionBackoff is the wait before a failed AlterPartition is retried (1 s).
	AlterPartitionBackoff time.Duration
	Hooks                 Hooks
	// Manual: no goroutines. The caller steps the fetchers (Fetchers, Fetcher.Next,
	// HandleFetch, HandleOffsetForLeaderEpoch, HandleListOffsets), the ISR (MaybeShrinkISR,
	// TakeAlterPartition, HandleAlterPartition) and produce timeouts (AdvanceClock):
	// the deterministic simulation.
	Manual bool
}

func (c *Config) defaults() {
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ReplicaLagTimeMax <= 0 {
		c.ReplicaLagTimeMax = 30 * time.Second
	}
	if c.NumReplicaFetchers <= 0 {
		c.NumReplicaFetchers = 1
	}
	f := &c.Fetcher
	if f.MaxBytes <= 0 {
		f.MaxBytes = 1 << 20
	}
	if f.ResponseMaxBytes <= 0 {
		f.ResponseMaxBytes = 10 << 20
	}
	if f.MaxWait <= 0 {
		f.MaxWait = 500 * time.Millisecond
	}
	if f.MinBytes <= 0 {
		f.MinBytes = 1
	}
	if f.Backoff <= 0 {
		f.Backoff = time.Second
	}
	if f.Version == 0 {
		f.Version = 17
	}
	if c.AlterPartitionBackoff <= 0 {
		c.AlterPartitionBackoff = time.Second
	}
}

// Manager is a broker's replica manager: its replica of every partition it hosts, the
// fetchers that copy from other leaders, the ISR changes it proposes and the acks=all
// produces waiting for the HW.
//
// Goroutines: any, for every method, except that Apply calls are made one at a time,
// in metadata-offset order. See the package doc for the lock order and the goroutines
// a Manager runs.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	clock  Clock
	faults faultSwitches
	t0     time.Time // the purgatory's clock starts here (Manual)

	applyMu sync.Mutex // serialises Apply and Close

	partsMu sync.Mutex                   // writers of parts and sorted
	parts   partMap                      // copy on write, per shard
	sorted  atomic.Pointer[[]*Partition] // by topic, partition; nil once parts changed (rebuilt on demand)

	fetchMu  sync.Mutex
	fetchers map[FetcherKey]*Fetcher

	produceWaits *purgatory.Purgatory[*Partition]

	isrMu       sync.Mutex
	isrQueue    []*Partition
	isrInflight map[*kmsg.AlterPartitionRequest][]isrSent
	isrWake     chan struct{}

	throttle *Throttle

	remote atomic.Pointer[remoteLogBox] // tiered storage, once the wiring sets it (remote.go)

	shrinks, expands atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

// NewManager returns a Manager with no partitions; Apply gives it some. Unless
// cfg.Manual, it starts the purgatory's reaper and, with an ISRClient, the ISR
// goroutine; fetchers start as partitions need them. Close stops them.
func NewManager(cfg Config) (*Manager, error) {
	cfg.defaults()
	if cfg.Logs == nil {
		return nil, fmt.Errorf("%w: no LogStore", ErrInvalidConfig)
	}
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("%w: node id %d", ErrInvalidConfig, cfg.NodeID)
	}
	if v := cfg.Fetcher.Version; v < 12 || v > 18 {
		return nil, fmt.Errorf("%w: fetch version %d (want 12..18)", ErrInvalidConfig, v)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, faults: loadFaultSwitches(),
		fetchers: map[FetcherKey]*Fetcher{}, isrInflight: map[*kmsg.AlterPartitionRequest][]isrSent{},
		isrWake: make(chan struct{}, 1)}
	if on := m.faults.active(); on != "" {
		m.log.Warn("fault switches active", "switches", on)
	}
	m.sorted.Store(&[]*Partition{})
	if cfg.FollowerThrottleRate > 0 && cfg.FollowerThrottleRate < 1<<62 { // Kafka's default, Long.MAX_VALUE: none
		m.throttle = NewThrottle(cfg.FollowerThrottleRate)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	popts := purgatory.Options{}
	if cfg.Manual {
		m.t0 = cfg.Clock.Now()
		popts.Clock = func() int64 { return max(0, int64(m.clock.Now().Sub(m.t0)/time.Millisecond)) }
	}
	m.produceWaits = purgatory.New[*Partition]("produce", popts)
	if !cfg.Manual && cfg.ISR != nil {
		m.wg.Add(1)
		go m.isrLoop()
	}
	return m, nil
}

// NodeID is this node's id.
func (m *Manager) NodeID() int32 { return m.cfg.NodeID }

func (m *Manager) brokerEpoch() int64 {
	if m.cfg.BrokerEpoch == nil {
		return -1
	}
	return m.cfg.BrokerEpoch()
}

// Partition returns this node's replica of tp, or nil. It takes no lock.
func (m *Manager) Partition(tp engine.TopicPartition) *Partition { return m.parts.get(tp) }

// Partitions returns every replica, sorted by topic and partition. The slice is shared:
// do not modify it. After replicas were added or removed, the first call sorts them
// again (O(n log n)); the others take no lock.
func (m *Manager) Partitions() []*Partition {
	if s := m.sorted.Load(); s != nil {
		return *s
	}
	m.partsMu.Lock()
	defer m.partsMu.Unlock()
	if s := m.sorted.Load(); s != nil {
		return *s
	}
	s := m.parts.sorted()
	m.sorted.Store(&s)
	return s
}

func (m *Manager) putPartition(p *Partition) {
	m.partsMu.Lock()
	defer m.partsMu.Unlock()
	m.parts.set(p)
	m.sorted.Store(nil)
}

func (m *Manager) putPartitions(ps []*Partition) {
	m.partsMu.Lock()
	defer m.partsMu.Unlock()
	m.parts.setAll(ps)
	m.sorted.Store(nil)
}

func (m *Manager) dropPartition(p *Partition) {
	m.partsMu.Lock()
	defer m.partsMu.Unlock()
	if m.parts.del(p) {
		m.sorted.Store(nil)
	}
}

func cmpPartTP(p *Partition, tp engine.TopicPartition) int { return cmpTP(p.tp, tp) }

func cmpTP(a, b engine.TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Apply makes this node's replicas what d says: stop (and delete) replicas, become
// leader, become follower, per partition, opening logs as needed. A state older than
// the one applied (a lower leader epoch, or the same with a lower partition epoch) is
// ignored. Errors (a log that cannot be opened) are returned joined; the other
// partitions are applied.
func (m *Manager) Apply(d Delta) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	var errs []error
	for _, s := range d.Stopped {
		if err := m.stop(s); err != nil {
			errs = append(errs, err)
		}
	}
	m.addNewPartitions(&d)
	for i := range d.Leaders {
		if err := m.becomeLeader(&d.Leaders[i]); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range d.Followers {
		if err := m.becomeFollower(&d.Followers[i]); err != nil {
			errs = append(errs, err)
		}
	}
	m.dropIdleFetchers()
	return joinFew(errs)
}

// joinFew joins errs, keeping the first few whole and counting the rest: a delta of
// 10,000 partitions whose logs cannot be opened (the open file limit, a full disk) is
// one readable error, not 10,000 lines.
func joinFew(errs []error) error {
	const keep = 5
	if len(errs) <= keep {
		return errors.Join(errs...)
	}
	return errors.Join(append(errs[:keep:keep], fmt.Errorf("replication: and %d more partitions failed", len(errs)-keep))...)
}

// addNewPartitions creates the replicas of the partitions of d that have none yet (a
// new topic's, or every one at start-up): their logs opened in one batch when the
// LogStore can (LogBatchOpener), and the replicas put into the map in one change, so
// that becomeLeader and becomeFollower find them and a delta of n new partitions
// copies each shard of the map once, not once per partition. A log that does not
// open is left to partitionFor, which reports it.
func (m *Manager) addNewPartitions(d *Delta) {
	var news []*PartitionState
	seen := map[engine.TopicPartition]bool{}
	for _, sts := range [2][]PartitionState{d.Leaders, d.Followers} {
		for i := range sts {
			if tp := sts[i].TP(); !seen[tp] && m.Partition(tp) == nil {
				seen[tp] = true
				news = append(news, &sts[i])
			}
		}
	}
	if len(news) < 2 {
		return
	}
	if bo, ok := m.cfg.Logs.(LogBatchOpener); ok {
		tps, cfgs := make([]engine.TopicPartition, len(news)), make([]engine.LogConfig, len(news))
		for i, st := range news {
			tps[i], cfgs[i] = st.TP(), st.LogConfig
		}
		if err := bo.OpenLogs(tps, cfgs); err != nil {
			m.log.Debug("opening logs in a batch", "logs", len(tps), "err", err)
		}
	}
	ps := make([]*Partition, 0, len(news))
	for _, st := range news {
		if l, err := m.cfg.Logs.OpenLog(st.TP(), st.LogConfig); err == nil {
			ps = append(ps, newPartition(m, st.TP(), st.TopicID, l))
		}
	}
	m.putPartitions(ps)
}

// partitionFor returns the replica st describes, creating it (and opening its log).
func (m *Manager) partitionFor(st *PartitionState) (*Partition, error) {
	tp := st.TP()
	l, err := m.cfg.Logs.OpenLog(tp, st.LogConfig)
	if err != nil {
		return nil, fmt.Errorf("replication: opening the log of %s: %w", tp, err)
	}
	if p := m.Partition(tp); p != nil && p.log == l && (p.topicID == st.TopicID) {
		return p, nil
	} else if p != nil {
		// The topic was re-created or its log replaced: the old replica is gone.
		m.retire(p)
	}
	p := newPartition(m, tp, st.TopicID, l)
	m.putPartition(p)
	return p, nil
}

// stale reports whether st is older than what p has applied. Caller holds p.mu.
func (p *Partition) staleLocked(st *PartitionState) bool {
	if p.role == RoleNone {
		return false
	}
	return st.LeaderEpoch < p.leaderEpoch || st.LeaderEpoch == p.leaderEpoch && st.PartitionEpoch < p.partitionEpoch
}

func (p *Partition) setAssignmentLocked(st *PartitionState) {
	p.replicas = slices.Clone(st.Replicas)
	p.isr = slices.Clone(st.ISR)
	p.adding = slices.Clone(st.Adding)
	p.removing = slices.Clone(st.Removing)
	p.partitionEpoch = st.PartitionEpoch
	p.minISR = max(st.MinISR, 1)
	p.strictMinISR = st.StrictMinISR
	p.recovering = st.LeaderRecovering
}

func (m *Manager) becomeLeader(st *PartitionState) error {
	p, err := m.partitionFor(st)
	if err != nil {
		return err
	}
	m.detachFetcher(p)
	now := m.clock.Now()
	p.mu.Lock()
	if p.staleLocked(st) {
		p.mu.Unlock()
		m.log.Debug("ignoring a stale leader state", "partition", p.tp.String(), "epoch", st.LeaderEpoch, "have", p.leaderEpoch)
		return nil
	}
	isNew := p.role != RoleLeader || st.LeaderEpoch != p.leaderEpoch
	p.setAssignmentLocked(st)
	p.throttled = false
	var leo int64
	p.hwMu.Lock()
	if isNew {
		leo = p.log.LogEndOffset()
		p.epochStart = leo // the epoch's start, as EndOffsetForEpoch answers it until the first append
		p.pending = nil
		p.durable = 0 // relearnt below, from OnDurable
		p.followers = p.followers[:0]
		for _, r := range p.replicas {
			if r == m.cfg.NodeID || slices.ContainsFunc(p.followers, func(f followerState) bool { return f.id == r }) {
				continue
			}
			f := followerState{id: r, fetchOffset: -1, logStart: -1, brokerEpoch: -1, lastFetchLEO: -1}
			if slices.Contains(p.isr, r) {
				f.lastCaughtUp = now // in sync now: not shrunk before it has had time to fetch
			}
			p.followers = append(p.followers, f)
		}
	} else {
		if p.pending != nil && st.PartitionEpoch > p.pending.base {
			p.pending = nil // the committed state moved past the proposal
		}
		p.reconcileFollowersLocked(now)
	}
	p.role, p.leader, p.leaderEpoch = RoleLeader, m.cfg.NodeID, st.LeaderEpoch
	p.publishLocked()
	p.remotesA.Store(int32(len(p.followers)))
	moved := p.maybeIncrementHWLocked()
	p.hwMu.Unlock()
	p.mu.Unlock()
	if isNew {
		m.log.Debug("became leader", "partition", p.tp.String(), "epoch", st.LeaderEpoch, "isr", st.ISR, "leo", leo)
		if leo > p.log.LogStartOffset() {
			p.log.OnDurable(leo-1, func(err error) {
				if err == nil && p.localDurable(leo) {
					m.announce(p)
				}
			})
		} else if p.localDurable(leo) {
			moved = true
		}
	}
	if moved {
		m.announce(p)
	}
	m.recheck(p)
	return nil
}

// reconcileFollowersLocked keeps the states of replicas still assigned and adds the new
// ones. Caller holds p.mu (exclusive) and p.hwMu.
func (p *Partition) reconcileFollowersLocked(now time.Time) {
	kept := p.followers[:0]
	for _, f := range p.followers {
		if slices.Contains(p.replicas, f.id) {
			kept = append(kept, f)
		}
	}
	p.followers = kept
	for _, r := range p.replicas {
		if r == p.m.cfg.NodeID || slices.ContainsFunc(p.followers, func(f followerState) bool { return f.id == r }) {
			continue
		}
		f := followerState{id: r, fetchOffset: -1, logStart: -1, brokerEpoch: -1, lastFetchLEO: -1}
		if slices.Contains(p.isr, r) {
			f.lastCaughtUp = now
		}
		p.followers = append(p.followers, f)
	}
}

func (m *Manager) becomeFollower(st *PartitionState) error {
	p, err := m.partitionFor(st)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.staleLocked(st) {
		p.mu.Unlock()
		m.log.Debug("ignoring a stale follower state", "partition", p.tp.String(), "epoch", st.LeaderEpoch, "have", p.leaderEpoch)
		return nil
	}
	wasLeader := p.role == RoleLeader
	changed := p.role != RoleFollower || p.leader != st.Leader || p.leaderEpoch != st.LeaderEpoch
	p.setAssignmentLocked(st)
	p.role, p.leader, p.leaderEpoch = RoleFollower, st.Leader, st.LeaderEpoch
	p.pending = nil
	p.throttled = slices.Contains(st.Adding, m.cfg.NodeID)
	p.hwMu.Lock()
	p.followers = p.followers[:0]
	p.hwMu.Unlock()
	p.remotesA.Store(0)
	p.publishLocked()
	p.mu.Unlock()
	if wasLeader {
		m.log.Debug("leader became follower", "partition", p.tp.String(), "epoch", st.LeaderEpoch, "leader", st.Leader)
		m.recheck(p)
	}
	if !changed {
		return nil
	}
	m.detachFetcher(p)
	switch {
	case st.Leader < 0 || st.Leader == m.cfg.NodeID:
		// No leader to follow (or an inconsistent state): idle until one is named.
	case m.cfg.Fetch == nil && !m.cfg.Manual:
		m.log.Error("cannot follow: no fetch client", "partition", p.tp.String(), "leader", st.Leader)
	default:
		m.attachFetcher(p, st.Leader, st.LeaderEpoch)
	}
	return nil
}

func (m *Manager) stop(s Stop) error {
	p := m.Partition(s.TP)
	if p != nil {
		if r := m.remoteLog(); s.Delete && r != nil && r.Enabled(p) {
			r.PartitionDeleted(p) // its copies in remote storage go with it (remote.go)
		}
		m.retire(p)
	}
	if s.Delete {
		if err := m.cfg.Logs.DeleteLog(s.TP); err != nil {
			return fmt.Errorf("replication: deleting the log of %s: %w", s.TP, err)
		}
	}
	return nil
}

// retire stops p and forgets it.
func (m *Manager) retire(p *Partition) {
	m.detachFetcher(p)
	p.mu.Lock()
	p.role = RoleStopped
	p.pending = nil
	p.hwMu.Lock()
	p.followers = p.followers[:0]
	p.hwMu.Unlock()
	p.remotesA.Store(0)
	p.publishLocked()
	p.mu.Unlock()
	m.dropPartition(p)
	m.recheck(p)
}

// announce tells the layer above that p's HW moved and retries the produces waiting
// on it.
func (m *Manager) announce(p *Partition) {
	if h := m.cfg.Hooks.HighWatermarkMoved; h != nil {
		h(p)
	}
	m.recheck(p)
}

// recheck retries the acks=all produces waiting on p.
func (m *Manager) recheck(p *Partition) {
	if p.waiting.Load() > 0 {
		m.produceWaits.CheckAndComplete(p)
	}
}

// Now is the time on the Manager's clock (Config.Clock), the clock of FollowerQuiet.
func (m *Manager) Now() time.Time { return m.clock.Now() }

// AdvanceClock expires the acks=all produces whose timeout has passed on the Manager's
// clock (Manual only; otherwise the purgatory's reaper does it).
func (m *Manager) AdvanceClock() {
	if m.cfg.Manual {
		m.produceWaits.AdvanceClock(max(0, int64(m.clock.Now().Sub(m.t0)/time.Millisecond)))
	}
}

// WaitingProduces is the number of acks=all produces waiting for the HW.
func (m *Manager) WaitingProduces() int { return m.produceWaits.Delayed() }

// Close stops the Manager's goroutines (fetchers, the ISR loop, the reaper) and expires
// the produces still waiting (REQUEST_TIMED_OUT). The replicas keep their state and the
// Manager still serves appends and fetches, but no longer copies from leaders or
// proposes ISR changes; a produce that would wait expires at once. Idempotent.
func (m *Manager) Close() {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	if !m.closed.CompareAndSwap(false, true) {
		return
	}
	m.cancel()
	m.fetchMu.Lock()
	fs := make([]*Fetcher, 0, len(m.fetchers))
	for _, f := range m.fetchers {
		fs = append(fs, f)
	}
	m.fetchMu.Unlock()
	for _, f := range fs {
		f.stopDriver()
	}
	m.wg.Wait()
	m.produceWaits.Close()
}
