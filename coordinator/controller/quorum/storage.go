package quorum

import (
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Storage is a voter's durable raft state: the log (entries after a compaction
// point), the hard state (term, vote, commit) and the newest snapshot with the
// voter set (its ConfState). The read methods are raft.Storage's and serve the
// RawNode; the write methods are called by the quorum's goroutine only, in Ready
// order. Every method is safe for concurrent use (readers of the committed log,
// ReadCommitted and Snapshot, run on other goroutines).
//
// Entries returned by the read methods are shared with the storage and must not be
// modified. Snapshot's data is shared likewise.
//
// Two implementations: DiskStorage (files under metadata.log.dir) and MemStorage
// (memory, with a crash model for simulations). They keep the same semantics:
//
//  1. Save persists hard state and entries; with sync it returns once they are
//     durable. An entry at index i replaces every entry at i or above.
//  2. ApplySnapshot (a snapshot from the leader) replaces the whole log: afterwards
//     the log is empty after the snapshot's index.
//  3. CreateSnapshot records a snapshot of the applied image at index and discards
//     the entries at or before the previous snapshot's index: the log keeps
//     between one and two snapshot intervals of entries for followers and brokers
//     that are a little behind.
//  4. Snapshots and Bootstrap are durable when they return.
//  5. After a write fails, every later write fails with ErrStorageFailed.
type Storage interface {
	raft.Storage
	// Bootstrap writes the first state of a fresh storage: the snapshot (its index,
	// term, voters and data) and a hard state at its term with commit = its index.
	// It fails with ErrNotEmpty when the storage holds anything.
	Bootstrap(snap *raftpb.Snapshot) error
	// Save persists a Ready's hard state (nil: unchanged) and entries; sync asks for
	// durability (Ready.MustSync).
	Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error
	// ApplySnapshot persists a snapshot received from the leader.
	ApplySnapshot(snap *raftpb.Snapshot) error
	// CreateSnapshot records a snapshot at index (an applied index within the log).
	CreateSnapshot(index uint64, cs *raftpb.ConfState, data []byte) error
	// Close releases the storage; later calls fail.
	Close() error
}

// isFresh reports whether st holds nothing at all (never bootstrapped).
func isFresh(st Storage) (bool, error) {
	snap, err := st.Snapshot()
	if err != nil {
		return false, err
	}
	last, err := st.LastIndex()
	if err != nil {
		return false, err
	}
	return snap.GetMetadata().GetIndex() == 0 && last == 0, nil
}

// logState is the in-memory form of a storage: what both implementations keep and
// serve raft from. It is not safe for concurrent use; its owner locks.
//
// Invariants:
//  1. ents[i].Index == base+1+i; baseTerm is the term of entry base.
//  2. snap.Index >= base (the compaction point never passes the newest snapshot)
//     and snap.Index <= base+len(ents).
//  3. hs.Commit <= base+len(ents).
type logState struct {
	hs       *raftpb.HardState
	snap     *raftpb.Snapshot
	base     uint64
	baseTerm uint64
	ents     []*raftpb.Entry
}

func newLogState() logState {
	return logState{hs: &raftpb.HardState{}, snap: emptySnapshot()}
}

func emptySnapshot() *raftpb.Snapshot { return raftpb.EnsureSnapshot(nil) }

func (l *logState) firstIndex() uint64 { return l.base + 1 }
func (l *logState) lastIndex() uint64  { return l.base + uint64(len(l.ents)) }

func (l *logState) term(i uint64) (uint64, error) {
	switch {
	case i < l.base:
		return 0, raft.ErrCompacted
	case i == l.base:
		return l.baseTerm, nil
	case i > l.lastIndex():
		return 0, raft.ErrUnavailable
	}
	return l.ents[i-l.base-1].GetTerm(), nil
}

// entries returns [lo, hi) limited to maxSize bytes (at least one entry). The slice
// is clipped: a caller appending to it does not write into the log.
func (l *logState) entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	if lo <= l.base {
		return nil, raft.ErrCompacted
	}
	if hi > l.lastIndex()+1 || lo > hi {
		return nil, raft.ErrUnavailable
	}
	ents := l.ents[lo-l.base-1 : hi-l.base-1]
	var size uint64
	for i, e := range ents {
		size += uint64(proto.Size(e))
		if i > 0 && size > maxSize {
			ents = ents[:i]
			break
		}
	}
	return slices.Clip(ents), nil
}

// checkAppend validates ents for append: consecutive, starting within
// [base+1, last+1], never replacing an entry at or below the commit index.
func (l *logState) checkAppend(ents []*raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	for i := 1; i < len(ents); i++ {
		if ents[i].GetIndex() != ents[i-1].GetIndex()+1 {
			return fmt.Errorf("entries not consecutive: %d after %d", ents[i].GetIndex(), ents[i-1].GetIndex())
		}
	}
	first := ents[0].GetIndex()
	if first <= l.base || first > l.lastIndex()+1 {
		return fmt.Errorf("entries from %d do not continue the log [%d, %d]", first, l.firstIndex(), l.lastIndex())
	}
	if first <= l.hs.GetCommit() {
		// Raft never replaces a committed entry; a rewrite of identical entries (the
		// first frame of a new segment) is allowed.
		for _, e := range ents {
			if e.GetIndex() > l.hs.GetCommit() {
				break
			}
			if t, _ := l.term(e.GetIndex()); t != e.GetTerm() {
				return fmt.Errorf("entry %d (term %d) would replace committed entry of term %d", e.GetIndex(), e.GetTerm(), t)
			}
		}
	}
	return nil
}

// appendEntries applies Save's entries (after checkAppend). A replaced suffix gets a
// new array, so slices handed out earlier never change under their reader.
func (l *logState) appendEntries(ents []*raftpb.Entry) {
	if len(ents) == 0 {
		return
	}
	first := ents[0].GetIndex()
	keep := int(first - l.base - 1)
	if keep < len(l.ents) {
		l.ents = append(slices.Clone(l.ents[:keep]), ents...)
		return
	}
	l.ents = append(l.ents, ents...)
}

func (l *logState) setHardState(hs *raftpb.HardState) {
	if hs != nil {
		l.hs = cloneHardState(hs)
	}
}

// applySnapshot replaces the log with snap.
func (l *logState) applySnapshot(snap *raftpb.Snapshot) {
	md := snap.GetMetadata()
	l.snap = snap
	l.base, l.baseTerm, l.ents = md.GetIndex(), md.GetTerm(), nil
	if l.hs.GetCommit() < md.GetIndex() {
		hs := cloneHardState(l.hs)
		hs.Commit = proto.Uint64(md.GetIndex())
		l.hs = hs
	}
}

// checkSnapshot validates CreateSnapshot's index.
func (l *logState) checkSnapshot(index uint64) error {
	if index < l.snap.GetMetadata().GetIndex() {
		return fmt.Errorf("snapshot at %d is older than the snapshot at %d", index, l.snap.GetMetadata().GetIndex())
	}
	if index <= l.base || index > l.hs.GetCommit() || index > l.lastIndex() {
		return fmt.Errorf("snapshot at %d outside the committed log [%d, %d]", index, l.firstIndex(), min(l.hs.GetCommit(), l.lastIndex()))
	}
	return nil
}

// createSnapshot installs the snapshot at index (after checkSnapshot) and compacts
// the log to the previous snapshot's index.
func (l *logState) createSnapshot(index uint64, cs *raftpb.ConfState, data []byte) {
	term, _ := l.term(index)
	prev := l.snap.GetMetadata().GetIndex()
	l.snap = &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
		ConfState: cloneConfState(cs), Index: proto.Uint64(index), Term: proto.Uint64(term)}}
	l.compact(prev)
}

// compact discards the entries at or before i.
func (l *logState) compact(i uint64) {
	if i <= l.base {
		return
	}
	t, _ := l.term(i)
	l.ents = slices.Clone(l.ents[i-l.base:])
	l.base, l.baseTerm = i, t
}

func cloneHardState(hs *raftpb.HardState) *raftpb.HardState {
	return &raftpb.HardState{Term: proto.Uint64(hs.GetTerm()), Vote: proto.Uint64(hs.GetVote()), Commit: proto.Uint64(hs.GetCommit())}
}

func cloneConfState(cs *raftpb.ConfState) *raftpb.ConfState {
	return raftpb.EnsureConfState(&raftpb.ConfState{Voters: slices.Clone(cs.GetVoters()), Learners: slices.Clone(cs.GetLearners()),
		VotersOutgoing: slices.Clone(cs.GetVotersOutgoing()), LearnersNext: slices.Clone(cs.GetLearnersNext()),
		AutoLeave: proto.Bool(cs.GetAutoLeave())})
}
