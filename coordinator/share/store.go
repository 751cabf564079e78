package share

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/coordinator/group"
)

// Store is the share coordinator: it keeps the state of the share partitions whose
// records live in the partitions of __share_group_state this broker leads (Kafka's
// share coordinator). A share partition's leader reads its state here when it starts
// serving it and writes every durable change here (through the local Store, or a peer
// broker's over ReadShareGroupState/WriteShareGroupState).
//
// Writes go through a group.Log (the leader's acks=all append on the replicated
// partition, group.ReplicatedLog over StateTopic), so a written state survives the
// loss of this broker: the next leader of the partition replays it.
//
// Safe for concurrent use. Write's done runs after the record is durable, in Write
// order per state partition; the in-memory state moves at that point too, so Read
// never returns what is not durable.
type Store struct {
	log group.Log
	n   int32
	now func() time.Time

	mu struct {
		sync.Mutex
		parts map[int32]*storePart
	}
}

type storePart struct {
	loaded bool
	state  map[Key]*Snapshot
}

// Store errors.
var (
	// ErrNotCoordinator: this broker does not lead the key's state partition.
	ErrNotCoordinator = errors.New("share: not the coordinator of the state partition")
	// ErrLoading: the state partition is being loaded.
	ErrLoading = errors.New("share: state partition loading")
	// ErrFenced: a write from a data partition leader older than the one that last
	// wrote (its leader epoch is lower): a deposed leader.
	ErrFenced = errors.New("share: write from a fenced leader epoch")
	// ErrFencedState: a write (or an initialization) of a state epoch older than the
	// stored one: the state was initialized again since the writer read it
	// (AlterShareGroupOffsets).
	ErrFencedState = errors.New("share: write of a fenced state epoch")
	// ErrUninitialized: a write to a share partition that has no state: it was never
	// initialized (InitializeShareGroupState), or its state was deleted since
	// (DeleteShareGroupState), as Kafka's share coordinator refuses it.
	ErrUninitialized = errors.New("share: write operation on uninitialized share partition not allowed")
)

// NewStore returns a share coordinator over log, whose topic has n partitions.
func NewStore(log group.Log, n int32, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	s := &Store{log: log, n: n, now: now}
	s.mu.parts = map[int32]*storePart{}
	return s
}

// NumPartitions is the partition count of __share_group_state the Store maps keys by.
func (s *Store) NumPartitions() int32 { return s.n }

// Load replays state partition p and serves it; until it returns, the partition's
// keys answer ErrLoading. A failed replay leaves it unloaded.
func (s *Store) Load(p int32) error {
	s.mu.Lock()
	if _, ok := s.mu.parts[p]; ok {
		s.mu.Unlock()
		return nil
	}
	sp := &storePart{state: map[Key]*Snapshot{}}
	s.mu.parts[p] = sp
	s.mu.Unlock()
	state := map[Key]*Snapshot{}
	err := s.log.Replay(p, func(r group.Record) error {
		k, err := DecodeKey(r.Key)
		if err != nil {
			return nil // not a record of ours (or a future version): skipped
		}
		if r.Value == nil {
			delete(state, k)
			return nil
		}
		v, err := DecodeValue(r.Value)
		if err != nil {
			return fmt.Errorf("share: %s at offset %d: %w", k, r.Offset, err)
		}
		state[k] = &v
		return nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.parts[p] != sp {
		return nil // unloaded meanwhile
	}
	if err != nil {
		delete(s.mu.parts, p)
		return err
	}
	sp.state, sp.loaded = state, true
	return nil
}

// Unload stops serving state partition p (its leadership moved).
func (s *Store) Unload(p int32) {
	s.mu.Lock()
	delete(s.mu.parts, p)
	s.mu.Unlock()
}

// Loaded lists the state partitions served.
func (s *Store) Loaded() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int32, 0, len(s.mu.parts))
	for p := range s.mu.parts {
		out = append(out, p)
	}
	return out
}

func (s *Store) partLocked(k Key) (*storePart, error) {
	sp := s.mu.parts[PartitionFor(k, s.n)]
	switch {
	case sp == nil:
		return nil, ErrNotCoordinator
	case !sp.loaded:
		return nil, ErrLoading
	}
	return sp, nil
}

// Read returns k's state; found is false when it has none (a share partition never
// initialized, or deleted: Kafka's share coordinator answers that read
// INVALID_REQUEST, which the caller does).
func (s *Store) Read(k Key) (snap Snapshot, found bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp, err := s.partLocked(k)
	if err != nil {
		return Snapshot{}, false, err
	}
	v := sp.state[k]
	if v == nil {
		return Snapshot{}, false, nil
	}
	out := *v
	out.Batches = append([]Batch(nil), v.Batches...)
	return out, true, nil
}

// Write replaces k's state with snap (nil: deletes it) and calls done once it is
// durable, or with an error (ErrNotCoordinator, ErrLoading, ErrUninitialized,
// ErrFenced, ErrFencedState, or the log's). A write needs a state to replace (one
// InitializeShareGroupState made), and is fenced when its state epoch is older than
// the stored one, or equal with an older leader epoch.
func (s *Store) Write(k Key, snap *Snapshot, done func(error)) {
	s.mu.Lock()
	sp, err := s.partLocked(k)
	if err == nil && snap != nil {
		switch cur := sp.state[k]; {
		case cur == nil:
			err = fmt.Errorf("%w: %s", ErrUninitialized, k)
		case snap.StateEpoch < cur.StateEpoch:
			err = fmt.Errorf("%w: %d < %d", ErrFencedState, snap.StateEpoch, cur.StateEpoch)
		case snap.StateEpoch == cur.StateEpoch && snap.LeaderEpoch < cur.LeaderEpoch:
			err = fmt.Errorf("%w: %d < %d", ErrFenced, snap.LeaderEpoch, cur.LeaderEpoch)
		}
	}
	s.mu.Unlock()
	if err != nil {
		done(err)
		return
	}
	var keep *Snapshot
	if snap != nil {
		c := *snap
		c.Batches = append([]Batch(nil), snap.Batches...)
		if c.WriteTime == 0 {
			c.WriteTime = s.now().UnixMilli()
		}
		keep = &c
	}
	s.put(sp, k, keep, done)
}

// put appends k's record (keep, or a tombstone when nil) to its state partition,
// whose entry sp was when the request was checked, and moves the in-memory state
// once the record is durable; then done.
func (s *Store) put(sp *storePart, k Key, keep *Snapshot, done func(error)) {
	var value []byte
	if keep != nil {
		value = AppendValue(nil, keep)
	}
	rec := group.Record{Timestamp: s.now().UnixMilli(), Key: AppendKey(nil, k), Value: value}
	p := PartitionFor(k, s.n)
	s.log.Append(p, []group.Record{rec}, func(err error) {
		if err == nil {
			s.mu.Lock()
			if cur := s.mu.parts[p]; cur == sp {
				if keep == nil {
					delete(sp.state, k)
				} else {
					sp.state[k] = keep
				}
			}
			s.mu.Unlock()
		}
		done(err)
	})
}

// Keys lists the keys of group held here (for deleting a group's state).
func (s *Store) Keys(groupID string) []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Key
	for _, sp := range s.mu.parts {
		for k := range sp.state {
			if k.Group == groupID {
				out = append(out, k)
			}
		}
	}
	return out
}
