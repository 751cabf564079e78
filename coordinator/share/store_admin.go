package share

import (
	"fmt"
)

// The share coordinator's half of a share group's life, as Kafka's
// ShareCoordinatorShard serves it to the group coordinator: a share partition's state
// is created by InitializeShareGroupState (Initialize) when its group first subscribes
// to its topic or sets its offsets, described by ReadShareGroupStateSummary (Summary)
// for DescribeShareGroupOffsets, and removed by DeleteShareGroupState (Delete) when
// the group or its offsets of the topic are deleted. Between them the share
// partition's leader reads and writes it (Read, Write); a write to a share partition
// without state is refused (ErrUninitialized), so a leader still holding a deleted
// state in memory cannot bring it back.

// Summary is what ReadShareGroupStateSummary answers of a share partition.
type Summary struct {
	// Found is false for a share partition without state: StartOffset -1, the epochs 0,
	// DeliveryComplete -1 (Kafka's answer for a key it does not hold).
	Found       bool
	StateEpoch  int32
	LeaderEpoch int32
	// StartOffset is the share-partition start offset, -1 while uninitialized (as
	// InitializeShareGroupState leaves it until the leader picks it by
	// share.auto.offset.reset).
	StartOffset int64
	// DeliveryComplete counts the offsets at or above the start offset whose delivery
	// is complete (acknowledged or archived): KIP-1226's DeliveryCompleteCount, from
	// which the lag is the high watermark minus the start offset minus this; -1 while
	// the start offset is -1.
	DeliveryComplete int32
}

// Initialize writes k's state afresh: start offset start (-1: to be picked by the
// share partition's leader), state epoch stateEpoch, leader epoch 0 and nothing in
// flight, replacing any state k had (Kafka's initializeState: "init state implies
// fresh start"). Refused with ErrFencedState when the stored state epoch is newer
// (a stateEpoch of -1 skips that check, as in Kafka). done runs once the record is
// durable, or with ErrNotCoordinator, ErrLoading, ErrFencedState or the log's error.
func (s *Store) Initialize(k Key, stateEpoch int32, start int64, done func(error)) {
	s.mu.Lock()
	sp, err := s.partLocked(k)
	if err == nil {
		if cur := sp.state[k]; cur != nil && stateEpoch != -1 && cur.StateEpoch > stateEpoch {
			err = fmt.Errorf("%w: %d < %d", ErrFencedState, stateEpoch, cur.StateEpoch)
		}
	}
	s.mu.Unlock()
	if err != nil {
		done(err)
		return
	}
	if start < -1 {
		start = -1
	}
	now := s.now().UnixMilli()
	s.put(sp, k, &Snapshot{StateEpoch: stateEpoch, StartOffset: start, WriteTime: now}, done)
}

// Delete removes k's state with a tombstone, so that the share partition is
// uninitialized again (a group re-created under the same id starts afresh); a key
// without state is left as it is (no record). done runs once the tombstone is
// durable, or with ErrNotCoordinator, ErrLoading or the log's error.
func (s *Store) Delete(k Key, done func(error)) {
	s.mu.Lock()
	sp, err := s.partLocked(k)
	absent := err == nil && sp.state[k] == nil
	s.mu.Unlock()
	switch {
	case err != nil:
		done(err)
	case absent:
		done(nil)
	default:
		s.put(sp, k, nil, done)
	}
}

// Summary describes k's state (ErrNotCoordinator, ErrLoading when it cannot).
func (s *Store) Summary(k Key) (Summary, error) {
	snap, found, err := s.Read(k)
	if err != nil {
		return Summary{}, err
	}
	return Summarize(snap, found), nil
}

// Summarize is the Summary of a state read (found false: none).
func Summarize(snap Snapshot, found bool) Summary {
	if !found {
		return Summary{StartOffset: -1, DeliveryComplete: -1}
	}
	out := Summary{Found: true, StateEpoch: snap.StateEpoch, LeaderEpoch: snap.LeaderEpoch, StartOffset: snap.StartOffset, DeliveryComplete: -1}
	if snap.StartOffset < 0 {
		return out
	}
	var n int64
	for _, b := range snap.Batches {
		if !b.State.done() {
			continue
		}
		first := max(b.First, snap.StartOffset)
		if b.Last >= first {
			n += b.Last - first + 1
		}
	}
	out.DeliveryComplete = int32(min(n, 1<<31-1))
	return out
}
