package quorum

import (
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
)

// MemStorage is a Storage in memory, for simulations. It keeps the semantics of
// DiskStorage and models a crash: a Save without sync is only written (as to the
// page cache), not durable; Crash returns the storage a restarted node would find,
// keeping the durable state and a prefix of the writes not yet synced (the order
// of an append-only file). Snapshots and Bootstrap are durable at once, and make
// every earlier write durable too (DiskStorage syncs a new segment holding them).
type MemStorage struct {
	mu struct {
		sync.Mutex
		cur     logState // what raft reads: every write
		durable logState // what survives a crash
		pending []memWrite
		failed  error
		closed  bool
	}
}

type memWrite struct {
	hs   *raftpb.HardState
	ents []*raftpb.Entry
}

// NewMemStorage returns an empty (fresh) MemStorage.
func NewMemStorage() *MemStorage {
	m := &MemStorage{}
	m.mu.cur, m.mu.durable = newLogState(), newLogState()
	return m
}

// Unsynced returns the number of writes a crash could lose.
func (m *MemStorage) Unsynced() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.pending)
}

// Crash returns the storage found after a crash of its node: the durable state
// plus the first keep of the unsynced writes (clamped to [0, Unsynced()]). m is
// closed.
func (m *MemStorage) Crash(keep int) *MemStorage {
	n := m.crashed(keep)
	m.mu.Lock()
	m.mu.closed = true
	m.mu.Unlock()
	return n
}

// crashed is what Crash(keep) would return, leaving m as it is.
func (m *MemStorage) crashed(keep int) *MemStorage {
	m.mu.Lock()
	defer m.mu.Unlock()
	keep = max(0, min(keep, len(m.mu.pending)))
	d := cloneLogState(m.mu.durable)
	for _, w := range m.mu.pending[:keep] {
		d.setHardState(w.hs)
		d.appendEntries(w.ents)
		d.ents = slices.Clip(d.ents)
	}
	n := &MemStorage{}
	n.mu.cur, n.mu.durable = cloneLogState(d), cloneLogState(d)
	return n
}

// cloneLogState copies l so that the copy's appends never write into l's arrays.
func cloneLogState(l logState) logState {
	l.ents = slices.Clip(l.ents)
	return l
}

func (m *MemStorage) applyDurableLocked(w memWrite) {
	d := &m.mu.durable
	d.setHardState(w.hs)
	d.appendEntries(w.ents)
	d.ents = slices.Clip(d.ents) // never share spare capacity with cur
}

func (m *MemStorage) flushLocked() {
	for _, w := range m.mu.pending {
		m.applyDurableLocked(w)
	}
	m.mu.pending = nil
}

func (m *MemStorage) writableLocked() error {
	if m.mu.closed {
		return fmt.Errorf("%w: storage closed", ErrStorageFailed)
	}
	if m.mu.failed != nil {
		return fmt.Errorf("%w: %v", ErrStorageFailed, m.mu.failed)
	}
	return nil
}

// InitialState implements raft.Storage.
func (m *MemStorage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneHardState(m.mu.cur.hs), cloneConfState(m.mu.cur.snap.GetMetadata().GetConfState()), nil
}

// Entries implements raft.Storage.
func (m *MemStorage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.cur.entries(lo, hi, maxSize)
}

// Term implements raft.Storage.
func (m *MemStorage) Term(i uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.cur.term(i)
}

// LastIndex implements raft.Storage.
func (m *MemStorage) LastIndex() (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.cur.lastIndex(), nil
}

// FirstIndex implements raft.Storage.
func (m *MemStorage) FirstIndex() (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.cur.firstIndex(), nil
}

// Snapshot implements raft.Storage.
func (m *MemStorage) Snapshot() (*raftpb.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.cur.snap, nil
}

// Bootstrap implements Storage.
func (m *MemStorage) Bootstrap(snap *raftpb.Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.writableLocked(); err != nil {
		return err
	}
	if m.mu.cur.snap.GetMetadata().GetIndex() != 0 || m.mu.cur.lastIndex() != 0 {
		return ErrNotEmpty
	}
	if err := checkBootstrap(snap); err != nil {
		return err
	}
	for _, l := range []*logState{&m.mu.cur, &m.mu.durable} {
		l.applySnapshot(snap)
		l.setHardState(&raftpb.HardState{Term: snap.GetMetadata().Term, Commit: snap.GetMetadata().Index})
	}
	return nil
}

// Save implements Storage.
func (m *MemStorage) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.writableLocked(); err != nil {
		return err
	}
	if err := m.mu.cur.checkAppend(ents); err != nil {
		m.mu.failed = err
		return fmt.Errorf("%w: %v", ErrStorageFailed, err)
	}
	m.mu.cur.setHardState(hs)
	m.mu.cur.appendEntries(ents)
	m.mu.pending = append(m.mu.pending, memWrite{hs: m.mu.cur.hs, ents: ents})
	if sync {
		m.flushLocked()
	}
	return nil
}

// ApplySnapshot implements Storage.
func (m *MemStorage) ApplySnapshot(snap *raftpb.Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.writableLocked(); err != nil {
		return err
	}
	if snap.GetMetadata().GetIndex() <= m.mu.cur.snap.GetMetadata().GetIndex() {
		return fmt.Errorf("%w: snapshot at %d is not newer than the snapshot at %d", ErrStorageFailed,
			snap.GetMetadata().GetIndex(), m.mu.cur.snap.GetMetadata().GetIndex())
	}
	m.flushLocked()
	m.mu.cur.applySnapshot(snap)
	m.mu.durable.applySnapshot(snap)
	return nil
}

// CreateSnapshot implements Storage.
func (m *MemStorage) CreateSnapshot(index uint64, cs *raftpb.ConfState, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.writableLocked(); err != nil {
		return err
	}
	if err := m.mu.cur.checkSnapshot(index); err != nil {
		return fmt.Errorf("%w: %v", ErrStorageFailed, err)
	}
	m.flushLocked()
	m.mu.cur.createSnapshot(index, cs, data)
	m.mu.durable = cloneLogState(m.mu.cur)
	return nil
}

// Close implements Storage.
func (m *MemStorage) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.closed = true
	return nil
}

// checkBootstrap validates a bootstrap snapshot.
func checkBootstrap(snap *raftpb.Snapshot) error {
	md := snap.GetMetadata()
	if md.GetIndex() == 0 || md.GetTerm() == 0 || len(md.GetConfState().GetVoters()) == 0 {
		return fmt.Errorf("%w: bootstrap snapshot needs an index, a term and voters", ErrInvalidConfig)
	}
	return nil
}
