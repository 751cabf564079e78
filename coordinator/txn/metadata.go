package txn

import (
	"errors"
	"fmt"
	"math"
)

// noProducer is Kafka's RecordBatch.NO_PRODUCER_ID and NO_PRODUCER_EPOCH.
const noProducer = -1

// epochExhausted reports whether epoch leaves no room for a bump that
// fences (Kafka keeps MaxInt16 for the coordinator's last fence).
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// txnMeta is one transactional id's state (Kafka's TransactionMetadata).
// It is guarded by Coordinator.mu.
//
// Invariants:
//  1. pending != noState exactly while a transition is being logged or,
//     for CompleteCommit/CompleteAbort, while the markers are written: no
//     other transition starts meanwhile (requests get
//     CONCURRENT_TRANSACTIONS).
//  2. partitions is empty in Empty, CompleteCommit and CompleteAbort; in
//     PrepareCommit/PrepareAbort it holds the partitions still waiting
//     for their marker.
//  3. Only what the Log acknowledged is applied (complete): the state
//     here never runs ahead of __transaction_state.
type txnMeta struct {
	id             string
	producerID     int64
	prevProducerID int64 // the producer id of the last committed transaction (or before a rotation)
	nextProducerID int64 // transaction version 2: the id that replaces an exhausted one at the next completion
	epoch          int16
	lastEpoch      int16 // the epoch before the last bump (retries of InitProducerId and EndTxn)
	timeoutMs      int32
	state          State
	pending        State
	partitions     map[TopicPartition]struct{}
	startMs        int64 // first partition added; -1 in Empty
	updateMs       int64
	tv             int16 // the client's transaction version of the last transition (2: an epoch bump per transaction)
	failedFence    bool  // a fence's epoch bump was not logged: the next fence reuses it
	markers        *markerRun
	// waiters are requests of the producer that came while a transition was
	// in flight or its last transaction was ending, served again once that
	// is over (waitTurnLocked).
	waiters []*endWaiter
}

func newMeta(id string, pid int64, timeoutMs int32, now int64) *txnMeta {
	return &txnMeta{id: id, producerID: pid, prevProducerID: noProducer, nextProducerID: noProducer, epoch: noProducer,
		lastEpoch: noProducer, timeoutMs: timeoutMs, state: Empty, pending: noState,
		partitions: map[TopicPartition]struct{}{}, startMs: -1, updateMs: now}
}

// metaFromValue rebuilds the metadata of a logged value (loading). The
// last epoch is not in the record: it is -1, as in Kafka.
func metaFromValue(id string, v *Value) *txnMeta {
	m := newMeta(id, v.ProducerID, v.TimeoutMs, v.LastUpdateMs)
	m.prevProducerID, m.nextProducerID = v.PrevProducerID, v.NextProducerID
	m.epoch, m.state, m.startMs, m.tv = v.ProducerEpoch, v.State, v.StartMs, v.ClientTxnVersion
	for _, tp := range v.Partitions {
		m.partitions[tp] = struct{}{}
	}
	return m
}

func (m *txnMeta) sortedPartitions() []TopicPartition {
	out := make([]TopicPartition, 0, len(m.partitions))
	for tp := range m.partitions {
		out = append(out, tp)
	}
	sortPartitions(out)
	return out
}

// transit is a transition being logged (Kafka's TxnTransitMetadata): the
// state the metadata takes once the Log acknowledges its record.
type transit struct {
	producerID, prevProducerID, nextProducerID int64
	epoch, lastEpoch                           int16
	timeoutMs                                  int32
	state                                      State
	partitions                                 []TopicPartition
	startMs, updateMs                          int64
	tv                                         int16
}

// value is the TransactionLogValue of t, in version (0 or 1).
func (t *transit) value(version int16) *Value {
	v := &Value{Version: version, ProducerID: t.producerID, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: t.epoch,
		TimeoutMs: t.timeoutMs, State: t.state, LastUpdateMs: t.updateMs, StartMs: t.startMs}
	if t.state != Empty {
		v.Partitions = append([]TopicPartition{}, t.partitions...)
	}
	if version >= 1 {
		v.PrevProducerID, v.NextProducerID, v.ClientTxnVersion = t.prevProducerID, t.nextProducerID, t.tv
	}
	return v
}

var errTransition = errors.New("txn: invalid state transition")

// prepare records t as m's pending transition (Kafka's
// prepareTransitionTo). The previous producer id of a transit is the
// current one, as in Kafka.
func (m *txnMeta) prepare(state State, pid, nextPid int64, epoch, lastEpoch int16, timeoutMs int32, parts []TopicPartition,
	startMs, now int64, tv int16) (transit, error) {
	if m.pending != noState {
		return transit{}, fmt.Errorf("%w: %s to %s while %s is pending", errTransition, m.state, state, m.pending)
	}
	if pid < 0 || state != Dead && epoch < 0 {
		return transit{}, fmt.Errorf("%w: producer %d epoch %d", errTransition, pid, epoch)
	}
	if !state.canFollow(m.state) {
		return transit{}, fmt.Errorf("%w: %s to %s", errTransition, m.state, state)
	}
	sortPartitions(parts)
	m.pending = state
	return transit{producerID: pid, prevProducerID: m.producerID, nextProducerID: nextPid, epoch: epoch, lastEpoch: lastEpoch,
		timeoutMs: timeoutMs, state: state, partitions: parts, startMs: startMs, updateMs: now, tv: tv}, nil
}

// prepareFence bumps the epoch to fence the producer (an InitProducerId
// during a transaction, or its timeout); the transition is not logged but
// becomes the PrepareAbort that endTxn logs.
func (m *txnMeta) prepareFence() (transit, error) {
	if m.epoch == math.MaxInt16 {
		return transit{}, fmt.Errorf("%w: epoch %d cannot be bumped to fence", errTransition, m.epoch)
	}
	epoch := m.epoch + 1
	if m.failedFence {
		epoch = m.epoch // its bump may be in the log already: not twice
	}
	return m.prepare(PrepareEpochFence, m.producerID, noProducer, epoch, noProducer, m.timeoutMs, m.sortedPartitions(), m.startMs, m.updateMs, 0)
}

// prepareBump is InitProducerId's epoch bump (Kafka's
// prepareIncrementProducerEpoch): expected is the epoch the request
// names (KIP-360), nil when it names none. code is PRODUCER_FENCED for an
// epoch neither current nor the last.
func (m *txnMeta) prepareBump(timeoutMs int32, expected *int16, now int64) (t transit, fenced bool, err error) {
	epoch, last := m.epoch+1, int16(noProducer)
	switch {
	case expected == nil:
	case m.epoch == noProducer || *expected == m.epoch:
		last = m.epoch
	case *expected == m.lastEpoch:
		epoch, last = m.epoch, m.lastEpoch // a retry of a bump that succeeded
	default:
		return transit{}, true, nil
	}
	if epoch != m.epoch && epochExhausted(m.epoch) {
		return transit{}, false, fmt.Errorf("%w: epoch %d exhausted", errTransition, m.epoch)
	}
	t, err = m.prepare(Empty, m.producerID, noProducer, epoch, last, timeoutMs, nil, -1, now, 0)
	return t, false, err
}

// prepareRotation moves to a new producer id (the epoch is exhausted).
func (m *txnMeta) prepareRotation(pid int64, timeoutMs int32, now int64, recordLastEpoch bool) (transit, error) {
	last := int16(noProducer)
	if recordLastEpoch {
		last = m.epoch
	}
	return m.prepare(Empty, pid, noProducer, 0, last, timeoutMs, nil, -1, now, 0)
}

// prepareAdd adds partitions (AddPartitionsToTxn, AddOffsetsToTxn); a
// transaction starts with its first.
func (m *txnMeta) prepareAdd(add []TopicPartition, now int64) (transit, error) {
	start := m.startMs
	if m.state == Empty || m.state == CompleteAbort || m.state == CompleteCommit {
		start = now
	}
	parts := append(m.sortedPartitions(), add...)
	return m.prepare(Ongoing, m.producerID, noProducer, m.epoch, m.lastEpoch, m.timeoutMs, dedup(parts), start, now, 0)
}

func dedup(ps []TopicPartition) []TopicPartition {
	sortPartitions(ps)
	out := ps[:0]
	for i, p := range ps {
		if i == 0 || p != ps[i-1] {
			out = append(out, p)
		}
	}
	return out
}

// prepareEnd is EndTxn's PrepareCommit or PrepareAbort (Kafka's
// prepareAbortOrCommit): under transaction version 2 the epoch is bumped
// with it.
func (m *txnMeta) prepareEnd(state State, tv int16, nextPid int64, now int64) (transit, error) {
	epoch, last := m.epoch, m.lastEpoch
	if tv >= 2 {
		epoch, last = m.epoch+1, m.epoch
	}
	start := m.startMs
	if m.state != Ongoing {
		start = now // an empty abort (transaction version 2)
	}
	return m.prepare(state, m.producerID, nextPid, epoch, last, m.timeoutMs, m.sortedPartitions(), start, now, tv)
}

// prepareComplete is the CompleteCommit or CompleteAbort after every
// marker is written. Under transaction version 2 an exhausted producer id
// is replaced now, by the next one chosen at EndTxn.
func (m *txnMeta) prepareComplete(now int64) (transit, error) {
	state := CompleteAbort
	if m.state == PrepareCommit {
		state = CompleteCommit
	}
	m.failedFence = false
	pid, epoch := m.producerID, m.epoch
	if m.tv >= 2 && m.nextProducerID != noProducer {
		pid, epoch = m.nextProducerID, 0
	}
	return m.prepare(state, pid, noProducer, epoch, m.epoch, m.timeoutMs, nil, m.startMs, now, m.tv)
}

// prepareDead is the expiry of an idle transactional id.
func (m *txnMeta) prepareDead() (transit, error) {
	return m.prepare(Dead, m.producerID, noProducer, m.epoch, m.lastEpoch, m.timeoutMs, nil, m.startMs, m.updateMs, m.tv)
}

// complete applies the transition t the Log acknowledged (Kafka's
// completeTransitionTo, with its checks).
func (m *txnMeta) complete(t *transit) error {
	if m.pending != t.state {
		return fmt.Errorf("%w: completing %s while %s is pending", errTransition, t.state, m.pending)
	}
	tv2 := t.tv >= 2
	validEpoch := func() bool {
		overflow := tv2 && (t.state == CompleteCommit || t.state == CompleteAbort) && t.epoch == 0
		epoch, pid := t.epoch, t.producerID
		if overflow || tv2 && (t.state == PrepareCommit || t.state == PrepareAbort) {
			epoch = t.lastEpoch
		}
		if overflow {
			pid = t.prevProducerID
		}
		return epoch == m.epoch && pid == m.producerID
	}
	switch t.state {
	case Empty:
		bump := t.epoch == m.epoch+1 || t.epoch == 0 && t.producerID != m.producerID
		if m.epoch != t.epoch && !bump || len(t.partitions) > 0 || t.startMs != -1 {
			return fmt.Errorf("%w: to Empty with %+v from epoch %d", errTransition, *t, m.epoch)
		}
		m.timeoutMs, m.epoch, m.lastEpoch, m.producerID, m.prevProducerID = t.timeoutMs, t.epoch, t.lastEpoch, t.producerID, t.prevProducerID
	case Ongoing:
		if !validEpoch() || t.timeoutMs != m.timeoutMs {
			return fmt.Errorf("%w: to Ongoing with %+v", errTransition, *t)
		}
		m.startMs = t.startMs
		clear(m.partitions)
		for _, tp := range t.partitions {
			m.partitions[tp] = struct{}{}
		}
	case PrepareCommit, PrepareAbort:
		if !validEpoch() || t.timeoutMs != m.timeoutMs || len(t.partitions) != len(m.partitions) {
			return fmt.Errorf("%w: to %s with %+v", errTransition, t.state, *t)
		}
		m.startMs = t.startMs
		if tv2 {
			m.epoch, m.lastEpoch, m.nextProducerID = t.epoch, t.lastEpoch, t.nextProducerID
		}
	case CompleteCommit, CompleteAbort:
		if !validEpoch() || t.timeoutMs != m.timeoutMs || t.startMs == -1 {
			return fmt.Errorf("%w: to %s with %+v", errTransition, t.state, *t)
		}
		m.startMs = t.startMs
		clear(m.partitions)
		if tv2 {
			m.epoch, m.lastEpoch, m.prevProducerID, m.producerID, m.nextProducerID = t.epoch, t.lastEpoch, t.prevProducerID, t.producerID, t.nextProducerID
		}
	default:
		return fmt.Errorf("%w: %s is never completed", errTransition, t.state)
	}
	m.tv = t.tv
	m.updateMs = t.updateMs
	m.pending = noState
	m.state = t.state
	return nil
}
