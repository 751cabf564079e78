package share

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Persister is where a Manager keeps share-partition state: the share coordinator of
// the key (a Store here, or a peer broker's over ReadShareGroupState,
// WriteShareGroupState and InitializeShareGroupState). Read's found is false for a
// share partition without state; Write of one fails (ErrUninitialized, or the peer's
// INVALID_REQUEST). done may run on any goroutine, before the call returns or later;
// Write's done for one key run in Write order when the Manager waits for each before
// the next (it does).
type Persister interface {
	Read(k Key, done func(snap Snapshot, found bool, err error))
	Write(k Key, snap *Snapshot, done func(error))
	Initialize(k Key, stateEpoch int32, start int64, done func(error))
}

// Clock is the Manager's time: a fake in tests.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Stopper
}

// Stopper stops a timer (time.Timer's Stop).
type Stopper interface{ Stop() bool }

type realClock struct{}

func (realClock) Now() time.Time                              { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Stopper { return time.AfterFunc(d, f) }

// ErrNotReady: the share partition's state is being read from (or first written to)
// its share coordinator; the fetch acquires nothing from it yet.
var ErrNotReady = errors.New("share: share partition state loading")

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Partition is the limits of every group's share partitions, but for a group
	// ForGroup says otherwise.
	Partition Config
	// ForGroup (may be nil) returns the limits of group's share partitions (its
	// GROUP configs over the broker's keys; zero fields take Partition's). Read when a
	// share partition is loaded and before each decision (acquisition, acknowledgement,
	// release, lock expiry), so a change applies to the next one. Called with the
	// Manager's lock held: it must not block nor call the Manager.
	ForGroup  func(group string) Config
	Persister Persister
	Clock     Clock // nil: the real clock
	// Available (may be nil) is called, with no lock held, when records of k may have
	// become acquirable (a lock expired, records released, the state loaded): parked
	// fetches should look again.
	Available func(k Key)
	Logger    *slog.Logger
}

// Manager holds the share partitions this broker leads (Kafka's
// SharePartitionManager): their state in memory, read from the share coordinator when
// first used under a leader epoch, every durable change written back before the
// caller is told it is done. Safe for concurrent use; no I/O under its lock.
type Manager struct {
	cfg ManagerConfig

	mu    sync.Mutex
	parts map[Key]*spart
}

type spart struct {
	key         Key
	leaderEpoch int32
	stateEpoch  int32 // of the state read; writes carry it
	ready       bool
	p           *Partition

	writing  bool
	evict    bool          // Evict asked while a write was in flight: evicted after it
	pending  []func(error) // waiting for the next write
	inflight []func(error) // waiting for the write in flight

	timer   Stopper
	timerAt time.Time
}

// NewManager returns an empty Manager.
func NewManager(cfg ManagerConfig) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Partition.fill()
	return &Manager{cfg: cfg, parts: map[Key]*spart{}}
}

// LockDuration is the acquisition lock's duration for group's records (ShareFetch's
// AcquisitionLockTimeoutMillis).
func (m *Manager) LockDuration(group string) time.Duration { return m.configFor(group).LockDuration }

// configFor is the limits of group's share partitions.
func (m *Manager) configFor(group string) Config {
	c := m.cfg.Partition
	if m.cfg.ForGroup != nil {
		g := m.cfg.ForGroup(group)
		if g.LockDuration > 0 {
			c.LockDuration = g.LockDuration
		}
		if g.DeliveryLimit > 0 {
			c.DeliveryLimit = g.DeliveryLimit
		}
		if g.MaxInFlight > 0 {
			c.MaxInFlight = g.MaxInFlight
		}
		c.RenewDisabled = c.RenewDisabled || g.RenewDisabled
	}
	return c
}

// refreshLocked gives s's partition its group's current limits, writing the state
// when that archived records (a lowered delivery limit).
func (m *Manager) refreshLocked(s *spart) {
	if m.cfg.ForGroup == nil {
		return
	}
	if s.p.SetConfig(m.configFor(s.key.Group)) {
		m.persistLocked(s, nil)
	}
}

// startLocked returns k's share partition ready under leaderEpoch, or ErrNotReady after
// starting its load (reading its state; when it has none, start() gives the initial
// start offset, per share.auto.offset.reset, and that state is written first). A
// share partition held under another leader epoch is dropped and loaded again (the
// leadership moved away and back: another leader may have changed the state).
func (m *Manager) startLocked(k Key, leaderEpoch int32, initial func() (int64, error)) (*spart, error) {
	s := m.parts[k]
	if s != nil && s.leaderEpoch == leaderEpoch {
		if !s.ready {
			return nil, ErrNotReady
		}
		return s, nil
	}
	if s != nil {
		m.dropLocked(s)
	}
	s = &spart{key: k, leaderEpoch: leaderEpoch}
	m.parts[k] = s
	go m.load(s, initial)
	return nil, ErrNotReady
}

func (m *Manager) load(s *spart, initial func() (int64, error)) {
	m.cfg.Persister.Read(s.key, func(snap Snapshot, found bool, err error) {
		if err != nil {
			m.loadFailed(s, err)
			return
		}
		if found && snap.StartOffset >= 0 {
			p := Restore(m.configFor(s.key.Group), snap.StartOffset, snap.Batches)
			m.mu.Lock()
			if m.parts[s.key] == s {
				s.p, s.ready, s.stateEpoch = p, true, snap.StateEpoch
			}
			m.mu.Unlock()
			m.notify(s.key)
			return
		}
		// Initialized without a start offset (start -1: InitializeShareGroupState by the
		// group coordinator, or AlterShareGroupOffsets of an older broker): the start is
		// picked now (share.auto.offset.reset) and written at the state epoch found.
		// No state at all: the group coordinator has not initialized this share
		// partition (a fetch by a session of no member, or one racing the member's
		// first heartbeat). Kafka's leader fails such a fetch; this one initializes
		// the state itself, at state epoch 0, with the start picked now.
		start, err := initial()
		if err != nil {
			m.loadFailed(s, err)
			return
		}
		p := NewPartition(m.configFor(s.key.Group), start)
		ready := func(stateEpoch int32) func(error) {
			return func(err error) {
				if err != nil {
					m.loadFailed(s, err)
					return
				}
				m.mu.Lock()
				if m.parts[s.key] == s {
					s.p, s.ready, s.stateEpoch = p, true, stateEpoch
				}
				m.mu.Unlock()
				m.notify(s.key)
			}
		}
		if !found {
			m.cfg.Persister.Initialize(s.key, 0, start, ready(0))
			return
		}
		snap = Snapshot{StateEpoch: snap.StateEpoch, LeaderEpoch: s.leaderEpoch, StartOffset: start}
		m.cfg.Persister.Write(s.key, &snap, ready(snap.StateEpoch))
	})
}

func (m *Manager) loadFailed(s *spart, err error) {
	m.cfg.Logger.Debug("loading share partition state failed", "key", s.key.String(), "err", err)
	m.mu.Lock()
	if m.parts[s.key] == s {
		delete(m.parts, s.key)
	}
	m.mu.Unlock()
	m.notify(s.key)
}

func (m *Manager) notify(k Key) {
	if m.cfg.Available != nil {
		m.cfg.Available(k)
	}
}

// NextFetchOffset is the offset a fetch of k should read from, or -1 when nothing can
// be acquired; ErrNotReady while k loads.
func (m *Manager) NextFetchOffset(k Key, leaderEpoch int32, initial func() (int64, error)) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.startLocked(k, leaderEpoch, initial)
	if err != nil {
		return -1, err
	}
	m.refreshLocked(s)
	return s.p.NextFetchOffset(), nil
}

// MoveStart moves k's start offset up to logStart when the log lost records below it
// (retention, DeleteRecords); the change is written in the background.
func (m *Manager) MoveStart(k Key, leaderEpoch int32, logStart int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.parts[k]
	if s == nil || !s.ready || s.leaderEpoch != leaderEpoch {
		return
	}
	if s.p.MoveStart(logStart) {
		m.persistLocked(s, nil)
	}
}

// Acquire acquires for member the acquirable records of k in [from, to), at most max
// (see Partition.Acquire).
func (m *Manager) Acquire(k Key, leaderEpoch int32, member string, from, to int64, max int) ([]Range, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.parts[k]
	if s == nil || !s.ready || s.leaderEpoch != leaderEpoch {
		return nil, ErrNotReady
	}
	m.refreshLocked(s)
	out := s.p.Acquire(member, from, to, max, m.cfg.Clock.Now())
	if len(out) > 0 {
		s.evict = false
		m.armLocked(s)
	}
	return out, nil
}

// ArchiveAcquired archives the records of ranges that member acquired in k instead
// of delivering them (a read_committed group's records of aborted transactions); the
// change is written in the background.
func (m *Manager) ArchiveAcquired(k Key, leaderEpoch int32, member string, ranges []Range) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.parts[k]
	if s == nil || !s.ready || s.leaderEpoch != leaderEpoch {
		return
	}
	changed := false
	for _, r := range ranges {
		changed = s.p.ArchiveAcquired(member, r.First, r.Last) || changed
	}
	if changed {
		m.persistLocked(s, nil)
		m.armLocked(s)
	}
}

// AckBatch is one acknowledgement batch.
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// Acknowledge applies member's acknowledgement batches to k, in order, and calls done
// once the changes are durable (nil), or with the first failure: a batch refused
// (ErrInvalidRecordState, ErrInvalidRequest: the batches before it stand and are
// written), k not ready under leaderEpoch (ErrNotReady), or the write's error.
func (m *Manager) Acknowledge(k Key, leaderEpoch int32, member string, batches []AckBatch, allowRenew bool, done func(error)) {
	m.mu.Lock()
	s := m.parts[k]
	if s == nil || !s.ready || s.leaderEpoch != leaderEpoch {
		m.mu.Unlock()
		done(ErrInvalidRecordState) // never acquired under this leader: Kafka's answer too
		return
	}
	m.refreshLocked(s)
	now := m.cfg.Clock.Now()
	changed, renewed := false, false
	var refused error
	for _, b := range batches {
		c, err := s.p.Acknowledge(member, b.First, b.Last, b.Types, allowRenew, now)
		if err != nil {
			refused = err
			break
		}
		changed = changed || c
		renewed = renewed || !c
	}
	if changed || renewed {
		m.armLocked(s)
	}
	if !changed {
		m.mu.Unlock()
		done(refused)
		return
	}
	m.persistLocked(s, func(err error) {
		if err == nil {
			err = refused
		}
		done(err)
	})
	m.mu.Unlock()
	m.notify(k) // released records are acquirable
}

// ReleaseMember releases what member holds in k (its share session closed, or k left
// the session); the change, if durable, is written in the background.
func (m *Manager) ReleaseMember(k Key, member string) {
	m.mu.Lock()
	s := m.parts[k]
	if s == nil || !s.ready {
		m.mu.Unlock()
		return
	}
	m.refreshLocked(s)
	released, archived := s.p.ReleaseMember(member)
	if archived {
		m.persistLocked(s, nil)
	}
	m.armLocked(s)
	m.mu.Unlock()
	if released || archived {
		m.notify(k)
	}
}

// Drop forgets every share partition keep rejects (this broker stopped leading the
// data partition): its locks end with it, and its durable state is the share
// coordinator's.
func (m *Manager) Drop(keep func(Key) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.parts {
		if !keep(s.key) {
			m.dropLocked(s)
		}
	}
}

// Evict forgets k if nothing of it is in memory only (no record acquired, no write
// waiting): no share session uses it any more, and its durable state is read again
// when one does, so a reset of the state meanwhile (AlterShareGroupOffsets,
// DeleteShareGroupOffsets, which need a group without members) is seen.
func (m *Manager) Evict(k Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.parts[k]
	if s == nil || !s.ready || s.p.Acquired("") > 0 {
		return
	}
	if s.writing || len(s.pending) > 0 {
		s.evict = true
		return
	}
	m.dropLocked(s)
}

func (m *Manager) dropLocked(s *spart) {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	delete(m.parts, s.key)
}

// Describe returns k's start offset and the number of records in flight, if k is
// held here and ready.
func (m *Manager) Describe(k Key) (start int64, inflight int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.parts[k]
	if s == nil || !s.ready {
		return 0, 0, false
	}
	return s.p.Start(), int(s.p.End() - s.p.Start()), true
}

// Close stops every timer.
func (m *Manager) Close() { m.Drop(func(Key) bool { return false }) }

// persistLocked writes s's state after the write in flight, if any (writes of one key
// never overlap, so they reach the coordinator in order), and calls done (if not nil)
// once a write that includes the current state is durable.
func (m *Manager) persistLocked(s *spart, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	s.pending = append(s.pending, done)
	if !s.writing {
		m.writeLocked(s)
	}
}

func (m *Manager) writeLocked(s *spart) {
	start, batches := s.p.Snapshot()
	snap := &Snapshot{StateEpoch: s.stateEpoch, LeaderEpoch: s.leaderEpoch, StartOffset: start, Batches: batches, WriteTime: m.cfg.Clock.Now().UnixMilli()}
	s.writing = true
	s.inflight, s.pending = s.pending, nil
	// Off the lock: a Persister may call done before Write returns. One write per
	// share partition is in flight, so the goroutine keeps their order.
	go m.cfg.Persister.Write(s.key, snap, func(err error) { m.written(s, err) })
}

func (m *Manager) written(s *spart, err error) {
	m.mu.Lock()
	waiters := s.inflight
	s.inflight = nil
	s.writing = false
	var later []func(error)
	switch {
	case err != nil:
		// The durable state is behind the memory: forget the share partition, so that
		// the next fetch reads it again, and fail every waiter.
		m.cfg.Logger.Warn("writing share partition state failed", "key", s.key.String(), "err", err)
		waiters = append(waiters, s.pending...)
		s.pending = nil
		if m.parts[s.key] == s {
			m.dropLocked(s)
		}
	case len(s.pending) > 0 && m.parts[s.key] == s:
		m.writeLocked(s)
	case len(s.pending) > 0:
		later, s.pending = s.pending, nil
	case s.evict && m.parts[s.key] == s && s.p.Acquired("") == 0:
		m.dropLocked(s)
	}
	m.mu.Unlock()
	for _, w := range waiters {
		w(err)
	}
	for _, w := range later {
		w(fmt.Errorf("%w: the share partition was dropped", ErrNotReady))
	}
}

// armLocked sets s's timer to its next lock deadline.
func (m *Manager) armLocked(s *spart) {
	d := s.p.NextDeadline()
	if d.Equal(s.timerAt) && s.timer != nil {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.timerAt = d
	if d.IsZero() {
		return
	}
	s.timer = m.cfg.Clock.AfterFunc(d.Sub(m.cfg.Clock.Now()), func() { m.expire(s) })
}

func (m *Manager) expire(s *spart) {
	m.mu.Lock()
	if m.parts[s.key] != s || !s.ready {
		m.mu.Unlock()
		return
	}
	s.timer, s.timerAt = nil, time.Time{}
	m.refreshLocked(s)
	released, archived := s.p.Expire(m.cfg.Clock.Now())
	if archived {
		m.persistLocked(s, nil)
	}
	m.armLocked(s)
	m.mu.Unlock()
	if released || archived {
		m.notify(s.key)
	}
}
