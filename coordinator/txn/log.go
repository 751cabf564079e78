package txn

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// Record is one __transaction_state record (a nil Value: a tombstone).
type Record = engine.Record

// Log is where the coordinator keeps the __transaction_state partitions it
// leads.
//
// Append appends recs to partition p, in order, and calls done exactly
// once: with nil when the records are durable by the broker's policy (on
// a cluster: acks=all, every in-sync replica has them), or with an error.
// done may run before Append returns or later on any goroutine; for one
// partition, done calls come in Append order. Append must not keep recs
// after done.
//
// Replay calls fn with every record of partition p in offset order, from
// the log start to its end; record slices are valid only during fn.
//
// Errors: wrap ErrNotLeader when this broker no longer leads p (the
// coordinator answers NOT_COORDINATOR), ErrRecordTooLarge for a batch over
// the log's limit; anything else is answered COORDINATOR_NOT_AVAILABLE
// (the client retries).
type Log interface {
	Append(p int32, recs []Record, done func(error))
	Replay(p int32, fn func(Record) error) error
}

var (
	// ErrNotLeader is wrapped by a Log whose partition moved away.
	ErrNotLeader = errors.New("txn: not the leader of the __transaction_state partition")
	// ErrRecordTooLarge is wrapped by a Log refusing an oversized append.
	ErrRecordTooLarge = errors.New("txn: record batch too large")
	// ErrNotCoordinator is returned for partitions the coordinator does not own.
	ErrNotCoordinator = errors.New("txn: not coordinator for partition")
)

// StateLogConfig is the engine configuration of __transaction_state
// partitions: compacted, never deleted by time or size, 100 MiB segments
// (transaction.state.log.segment.bytes).
func StateLogConfig() engine.LogConfig {
	cfg := engine.DefaultLogConfig()
	cfg.Compact = true
	cfg.Delete = false
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	cfg.SegmentBytes = 100 << 20
	return cfg
}

// pendingAppend is one append waiting for its turn to be answered.
type pendingAppend struct {
	done     func(error)
	finished bool
	err      error
}

// orderedDone answers appends of one partition in Append order.
type orderedDone struct {
	mu    sync.Mutex
	queue []*pendingAppend
}

func (o *orderedDone) finish(pa *pendingAppend, err error) {
	o.mu.Lock()
	pa.finished, pa.err = true, err
	var ready []*pendingAppend
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

// EngineLog is the Log over the engine's __transaction_state partitions of
// a broker that does not replicate them (tests, tools): partitions are
// created on first use with StateLogConfig, done runs once the engine's
// durability policy is met, and EngineLog moves each log's high watermark
// itself (there is no other replica). A broker running replication uses
// ReplicatedLog, also on a single node.
type EngineLog struct {
	m *engine.Manager
	// LeaderEpoch is stamped into appended batches (0 on a single node).
	LeaderEpoch int32

	mu    sync.Mutex
	parts map[int32]*enginePart
}

type enginePart struct {
	log *engine.Log
	orderedDone
}

// NewEngineLog returns a Log over m.
func NewEngineLog(m *engine.Manager) *EngineLog {
	return &EngineLog{m: m, parts: map[int32]*enginePart{}}
}

func (l *EngineLog) part(p int32, create bool) (*enginePart, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ep := l.parts[p]; ep != nil {
		return ep, nil
	}
	tp := engine.TopicPartition{Topic: StateTopic, Partition: p}
	lg := l.m.Log(tp)
	if lg == nil {
		if !create {
			return nil, nil
		}
		var err error
		if lg, err = l.m.CreateLog(tp, StateLogConfig()); err != nil {
			return nil, fmt.Errorf("txn: create %s: %w", tp, err)
		}
	} else {
		lg.SetConfig(StateLogConfig())
	}
	ep := &enginePart{log: lg}
	l.parts[p] = ep
	return ep, nil
}

// Append implements Log.
func (l *EngineLog) Append(p int32, recs []Record, done func(error)) {
	ep, err := l.part(p, true)
	if err != nil {
		done(err)
		return
	}
	batch, err := engine.AppendRecords(nil, recs)
	if err != nil {
		done(err)
		return
	}
	ep.mu.Lock()
	res, err := ep.log.Append(batch, engine.AppendOptions{LeaderEpoch: l.LeaderEpoch})
	if err != nil {
		ep.mu.Unlock()
		if errors.Is(err, engine.ErrBatchTooLarge) {
			err = fmt.Errorf("%w: %w", ErrRecordTooLarge, err)
		}
		done(err)
		return
	}
	pa := &pendingAppend{done: done}
	ep.queue = append(ep.queue, pa)
	ep.mu.Unlock()
	ep.log.OnDurable(res.LastOffset, func(err error) {
		if err == nil {
			ep.log.SetHighWatermark(res.LastOffset + 1)
		}
		ep.finish(pa, err)
	})
}

// Replay implements Log.
func (l *EngineLog) Replay(p int32, fn func(Record) error) error {
	ep, err := l.part(p, false)
	if err != nil || ep == nil {
		return err
	}
	return replayLog(ep.log, p, fn)
}

// replayChunk is how much of the log one Replay read copies.
const replayChunk = 1 << 20

// replayLog calls fn with every record of log from its start to its end.
func replayLog(log *engine.Log, p int32, fn func(Record) error) error {
	off, end := log.LogStartOffset(), log.LogEndOffset()
	buf := make([]byte, 0, replayChunk)
	for off < end {
		b, err := log.ReadCopy(off, replayChunk, end, true, buf[:0])
		if err != nil {
			return fmt.Errorf("txn: replay %s-%d at %d: %w", StateTopic, p, off, err)
		}
		if len(b) == 0 {
			break
		}
		next := off
		for q := 0; q < len(b); {
			h, err := engine.ParseBatchHeader(b[q:])
			if err != nil || int(h.Size()) > len(b)-q {
				return fmt.Errorf("txn: replay %s-%d at %d: %w", StateTopic, p, next, err)
			}
			from := off
			err = engine.ForEachRecord(b[q:q+int(h.Size())], func(r Record) error {
				if r.Offset < from {
					return nil
				}
				return fn(r)
			})
			if err != nil {
				return fmt.Errorf("txn: replay %s-%d at %d: %w", StateTopic, p, h.BaseOffset, err)
			}
			next = h.LastOffset() + 1
			q += int(h.Size())
		}
		if next <= off {
			break
		}
		off, buf = next, b
	}
	return nil
}

// DefaultAppendTimeout bounds how long an acks=all append of the
// coordinator waits for the in-sync replicas (Kafka uses the transaction's
// timeout; the coordinator's records are small and few).
const DefaultAppendTimeout = 5 * time.Second

// ReplicatedLog is the Log over this broker's replicas of
// __transaction_state in a cluster (a replication.Manager): the
// coordinator of a partition lives on its leader, so Append is the
// leader's append with acks=all (Kafka's TransactionLog enforced required
// acks -1), and Replay reads the leader's log to its end.
//
// Errors: a partition this node does not lead wraps ErrNotLeader; a batch
// over the size limit ErrRecordTooLarge; the rest (too few in-sync
// replicas, the timeout, storage) come back as they are (answered
// COORDINATOR_NOT_AVAILABLE).
type ReplicatedLog struct {
	m       *replication.Manager
	timeout time.Duration

	mu    sync.Mutex
	parts map[int32]*orderedDone
}

// NewReplicatedLog returns the Log over m's replicas; timeout bounds the
// wait for the in-sync replicas (0: DefaultAppendTimeout).
func NewReplicatedLog(m *replication.Manager, timeout time.Duration) *ReplicatedLog {
	if timeout <= 0 {
		timeout = DefaultAppendTimeout
	}
	return &ReplicatedLog{m: m, timeout: timeout, parts: map[int32]*orderedDone{}}
}

func (l *ReplicatedLog) part(p int32) *orderedDone {
	l.mu.Lock()
	defer l.mu.Unlock()
	o := l.parts[p]
	if o == nil {
		o = &orderedDone{}
		l.parts[p] = o
	}
	return o
}

func (l *ReplicatedLog) leader(p int32) (*replication.Partition, error) {
	tp := engine.TopicPartition{Topic: StateTopic, Partition: p}
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
	batch, err := engine.AppendRecords(nil, recs)
	if err != nil {
		done(err)
		return
	}
	o := l.part(p)
	pa := &pendingAppend{done: done}
	pr := new(replication.Produce)
	var appendErr error
	o.mu.Lock()
	o.queue = append(o.queue, pa)
	pr.Begin(l.m, -1, l.timeout, func() {
		err := appendErr
		if pr.Len() > 0 {
			err = pr.Part(0).Err
		}
		o.finish(pa, replicatedErr(err))
	})
	if _, err := pr.Append(r, batch); err != nil {
		appendErr = err
	}
	o.mu.Unlock()
	pr.Seal()
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

// Replay implements Log: it reads this node's leader replica of p from its
// log start to its end. Without a leader replica here it fails with
// ErrNotLeader.
func (l *ReplicatedLog) Replay(p int32, fn func(Record) error) error {
	r, err := l.leader(p)
	if err != nil {
		return err
	}
	el, ok := r.Log().(*engine.Log)
	if !ok {
		return fmt.Errorf("txn: replay %s-%d: the replica's log is a %T, not an engine log", StateTopic, p, r.Log())
	}
	return replayLog(el, p, fn)
}
