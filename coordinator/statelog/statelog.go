// Package statelog is the log of an internal topic a coordinator keeps its state in
// (__consumer_offsets, __transaction_state, __share_group_state), over this broker's
// replicas of its partitions (a replication.Manager, also on a single node).
//
// The coordinator of a partition lives on its leader, so an append is the leader's
// append with acks=all (Kafka's offsets.commit.required.acks=-1 and TransactionLog's
// enforced acks): its done runs once the high watermark passes the batch, every
// in-sync replica holding it. done calls of one partition come in Append order: an
// acks=all append completes on whichever goroutine moved the high watermark, and a
// queue per partition restores the order. A replay reads the leader's log from its
// start to its end: the new leader's log holds every committed record.
//
// The package knows nothing of the records' schemas: appends take encoded batches,
// replays hand out whole batches. The coordinators (coordinator/group,
// coordinator/txn) encode and decode, and map the errors below to their own.
package statelog

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// Errors is how a Log's caller tells its errors apart: each is wrapped (with the
// cause) by the errors of its kind.
type Errors struct {
	// NotLeader: this node has no leader replica of the partition (none, a follower,
	// or leadership lost while the append waited). The client looks for the new
	// coordinator (NOT_COORDINATOR).
	NotLeader error
	// RecordTooLarge: the batch is over the log's size limit.
	RecordTooLarge error
}

// Log is the log of one internal topic over m's replicas. The rest of the errors
// of Append (too few in-sync replicas, the timeout, storage) come back as they are;
// coordinators answer them COORDINATOR_NOT_AVAILABLE, so the client retries.
type Log struct {
	m       *replication.Manager
	topic   string
	timeout time.Duration
	errs    Errors

	mu    sync.Mutex
	parts map[int32]*ordered
}

// New returns the log of topic over m's replicas; timeout (> 0) bounds an append's
// wait for the in-sync replicas.
func New(m *replication.Manager, topic string, timeout time.Duration, errs Errors) *Log {
	return &Log{m: m, topic: topic, timeout: timeout, errs: errs, parts: map[int32]*ordered{}}
}

// Topic is the internal topic's name.
func (l *Log) Topic() string { return l.topic }

// Leader returns this node's leader replica of partition p, or an error wrapping
// Errors.NotLeader.
func (l *Log) Leader(p int32) (*replication.Partition, error) {
	tp := engine.TopicPartition{Topic: l.topic, Partition: p}
	r := l.m.Partition(tp)
	if r == nil || r.Role() != replication.RoleLeader {
		return nil, fmt.Errorf("%w: %s", l.errs.NotLeader, tp)
	}
	return r, nil
}

// Append appends batch (one encoded record batch, not kept after done) to partition
// p as its leader with acks=all, and calls done exactly once, maybe before Append
// returns.
func (l *Log) Append(p int32, batch []byte, done func(error)) {
	r, err := l.Leader(p)
	if err != nil {
		done(err)
		return
	}
	o := l.part(p)
	pa := &pending{done: done}
	pr := new(replication.Produce)
	var appendErr error
	o.mu.Lock()
	o.queue = append(o.queue, pa)
	pr.Begin(l.m, -1, l.timeout, func() {
		err := appendErr
		if pr.Len() > 0 {
			err = pr.Part(0).Err
		}
		o.finish(pa, l.mapErr(err))
	})
	if _, err := pr.Append(r, batch); err != nil {
		appendErr = err
	}
	o.mu.Unlock()
	pr.Seal()
}

func (l *Log) part(p int32) *ordered {
	l.mu.Lock()
	defer l.mu.Unlock()
	o := l.parts[p]
	if o == nil {
		o = &ordered{}
		l.parts[p] = o
	}
	return o
}

// mapErr wraps an append's outcome in the caller's errors.
func (l *Log) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replication.ErrNotLeader), errors.Is(err, replication.ErrUnknownPartition):
		return fmt.Errorf("%w: %w", l.errs.NotLeader, err)
	case errors.Is(err, engine.ErrBatchTooLarge):
		return fmt.Errorf("%w: %w", l.errs.RecordTooLarge, err)
	}
	return err
}

// pending is one append waiting for its turn to be answered.
type pending struct {
	done     func(error)
	finished bool
	err      error
}

// ordered answers the appends of one partition in Append order. mu also orders the
// appends themselves (Append holds it from queueing to the replica's append).
type ordered struct {
	mu    sync.Mutex
	queue []*pending
}

// finish records pa's outcome and runs every finished append at the queue's head, in
// order, with no lock held.
func (o *ordered) finish(pa *pending, err error) {
	o.mu.Lock()
	pa.finished, pa.err = true, err
	var ready []*pending
	for len(o.queue) > 0 && o.queue[0].finished {
		ready = append(ready, o.queue[0])
		o.queue[0] = nil
		o.queue = o.queue[1:]
	}
	o.mu.Unlock()
	for _, r := range ready {
		r.done(r.err)
	}
}

// Replay calls decode with the whole batches of this node's leader replica of p,
// from its log start to its end, a chunk at a time. from is the offset the chunk was
// read at: the first batch may begin before it (a compacted batch), and decode skips
// its records below from. Without a leader replica here (not yet made leader, or no
// longer) it fails with Errors.NotLeader: loading nothing would serve the
// coordinator's state without its records.
func (l *Log) Replay(p int32, decode func(b []byte, from int64) error) error {
	r, err := l.Leader(p)
	if err != nil {
		return err
	}
	el, ok := r.Log().(*engine.Log)
	if !ok {
		return fmt.Errorf("replay %s-%d: the replica's log is a %T, not an engine log", l.topic, p, r.Log())
	}
	return ReplayLog(el, decode)
}

// ReplayChunk is how much of the log one read of a replay copies.
const ReplayChunk = 1 << 20

// ReplayLog is Replay over log itself.
func ReplayLog(log *engine.Log, decode func(b []byte, from int64) error) error {
	_, err := ReplayRange(log, log.LogStartOffset(), log.LogEndOffset(), decode)
	return err
}

// ReplayRange is ReplayLog over the offsets [from, to) of log only: a replica
// that keeps up with a partition (every replica of __remote_log_metadata
// does) reads from where it stopped to the high watermark. It returns the
// offset it read up to (the next to read), which is to when the range was
// read whole.
//
// Its buffer is no larger than the reads made into it (ReadCopy grows it to a
// read's size): a replica of __remote_log_metadata is brought up to date
// before every look at its state, several times a second per partition when
// segments are copied, most often with nothing or a few records to read, and
// a buffer of ReplayChunk made and zeroed for each took a sixth of a tiered
// broker's CPU at latency-20k.
func ReplayRange(log *engine.Log, from, to int64, decode func(b []byte, from int64) error) (int64, error) {
	off := from
	var buf []byte
	for off < to {
		b, err := log.ReadCopy(off, ReplayChunk, to, true, buf[:0])
		if err != nil {
			return off, fmt.Errorf("replay %s at %d: %w", log.TopicPartition(), off, err)
		}
		next := engine.BatchesEnd(b)
		if len(b) == 0 || next <= off {
			break
		}
		if err := decode(b, off); err != nil {
			return off, fmt.Errorf("replay %s at %d: %w", log.TopicPartition(), off, err)
		}
		off, buf = next, b
	}
	return off, nil
}

// Deferred calls appendFn (a Log's append, made with the coordinator's lock held)
// with a callback that hands its error to done. A Log may call it before appendFn
// returns, with that lock still held, where done (which takes the lock) must not
// run: Deferred then returns the call of done, for the caller to run once it has
// released its lock. Otherwise done runs from the Log's callback and Deferred
// returns nil.
func Deferred(appendFn func(done func(error)), done func(error)) func() {
	var st struct {
		sync.Mutex
		returned, called bool
		err              error
	}
	appendFn(func(err error) {
		st.Lock()
		if !st.returned {
			st.called, st.err = true, err
			st.Unlock()
			return
		}
		st.Unlock()
		done(err)
	})
	st.Lock()
	st.returned = true
	called, err := st.called, st.err
	st.Unlock()
	if !called {
		return nil
	}
	return func() { done(err) }
}
