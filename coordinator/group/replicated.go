package group

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// DefaultCommitTimeout is offsets.commit.timeout.ms: how long an acks=all append of
// the coordinator waits for the in-sync replicas.
const DefaultCommitTimeout = 5 * time.Second

// ReplicatedLog is the Log over this broker's replicas of __consumer_offsets in a
// cluster (a replication.Manager): the coordinator of a partition lives on its
// leader, so Append is the leader's append with acks=all (Kafka's
// offsets.commit.required.acks=-1: done runs once the high watermark passes the batch,
// every in-sync replica holding it), and Replay reads the leader's log to its end.
// A committed offset therefore survives the loss of the coordinator's broker: the
// new leader's log has it, and its coordinator loads it.
//
// Errors: a partition this node does not lead (no replica, a follower, leadership
// lost while the append waited) wraps ErrNotLeader (the client looks for the new
// coordinator); a batch over the log's size limit wraps ErrRecordTooLarge; the rest
// (too few in-sync replicas, the commit timeout, storage) are answered
// COORDINATOR_NOT_AVAILABLE, so the client retries.
//
// done calls of one partition come in Append order (an acks=all append completes on
// whichever goroutine moved the HW; a queue per partition restores the order).
type ReplicatedLog struct {
	m       *replication.Manager
	topic   string // OffsetsTopic, or another internal topic (NewReplicatedTopicLog)
	timeout time.Duration

	mu    sync.Mutex
	parts map[int32]*replicatedPart

	replayed replayedTxns // the transactions each partition's last replay left open (txn_offsets.go)
}

type replicatedPart struct {
	mu    sync.Mutex // orders appends and the completion queue
	queue []*pendingAppend
}

// NewReplicatedLog returns the Log over m's replicas; timeout bounds the wait for the
// in-sync replicas (0: DefaultCommitTimeout).
func NewReplicatedLog(m *replication.Manager, timeout time.Duration) *ReplicatedLog {
	return NewReplicatedTopicLog(m, OffsetsTopic, timeout)
}

// NewReplicatedTopicLog is NewReplicatedLog over the partitions of another internal
// topic of the same kind (compacted, records framed by AppendBatch), such as
// __share_group_state: the same leader append, acks=all, ordering and errors.
func NewReplicatedTopicLog(m *replication.Manager, topic string, timeout time.Duration) *ReplicatedLog {
	if timeout <= 0 {
		timeout = DefaultCommitTimeout
	}
	return &ReplicatedLog{m: m, topic: topic, timeout: timeout, parts: map[int32]*replicatedPart{}}
}

func (l *ReplicatedLog) part(p int32) *replicatedPart {
	l.mu.Lock()
	defer l.mu.Unlock()
	rp := l.parts[p]
	if rp == nil {
		rp = &replicatedPart{}
		l.parts[p] = rp
	}
	return rp
}

// leader returns this node's leader replica of partition p.
func (l *ReplicatedLog) leader(p int32) (*replication.Partition, error) {
	tp := engine.TopicPartition{Topic: l.topic, Partition: p}
	r := l.m.Partition(tp)
	if r == nil || r.Role() != replication.RoleLeader {
		return nil, fmt.Errorf("%w: %s", ErrNotLeader, tp)
	}
	return r, nil
}

// Append implements Log.
func (l *ReplicatedLog) Append(p int32, recs []Record, done func(error)) {
	r, err := l.leader(p)
	if err != nil {
		done(err)
		return
	}
	batch := AppendBatch(make([]byte, 0, 128*len(recs)+batchHeaderLen), recs)
	part := l.part(p)
	pa := &pendingAppend{done: done}
	pr := new(replication.Produce)
	var appendErr error
	part.mu.Lock()
	part.queue = append(part.queue, pa)
	pr.Begin(l.m, -1, l.timeout, func() {
		err := appendErr
		if pr.Len() > 0 {
			err = pr.Part(0).Err
		}
		part.finish(pa, replicatedErr(err))
	})
	if _, err := pr.Append(r, batch); err != nil {
		appendErr = err
	}
	part.mu.Unlock()
	pr.Seal()
}

// finish records pa's outcome and runs every finished append at the queue's head, in
// order, with no lock held.
func (part *replicatedPart) finish(pa *pendingAppend, err error) {
	part.mu.Lock()
	pa.finished, pa.err = true, err
	var ready []*pendingAppend
	for len(part.queue) > 0 && part.queue[0].finished {
		ready = append(ready, part.queue[0])
		part.queue[0] = nil
		part.queue = part.queue[1:]
	}
	part.mu.Unlock()
	for _, r := range ready {
		r.done(r.err)
	}
}

// replicatedErr maps an append's outcome to the Log's errors.
func replicatedErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replication.ErrNotLeader), errors.Is(err, replication.ErrUnknownPartition):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, engine.ErrBatchTooLarge):
		return fmt.Errorf("%w: %w", ErrRecordTooLarge, err)
	}
	return err
}

// Replay implements Log: it reads this node's leader replica of partition p from its
// log start to its end (the new leader's log holds every committed record). Without a
// leader replica here (not yet made leader, or no longer) it fails with ErrNotLeader:
// loading nothing would serve a group without its offsets.
func (l *ReplicatedLog) Replay(p int32, fn func(Record) error) error {
	r, err := l.leader(p)
	if err != nil {
		return err
	}
	el, ok := r.Log().(*engine.Log)
	if !ok {
		return fmt.Errorf("group: replay %s-%d: the replica's log is a %T, not an engine log", l.topic, p, r.Log())
	}
	st := &txnReplay{}
	if err := replayTopicLog(el, l.topic, p, fn, st); err != nil {
		return err
	}
	l.replayed.set(p, st.open)
	return nil
}
