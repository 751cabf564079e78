package txn

import (
	"errors"
	"fmt"
	"time"

	"github.com/samsa-broker/samsa/coordinator/statelog"
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

// DefaultAppendTimeout bounds how long an acks=all append of the
// coordinator waits for the in-sync replicas (Kafka uses the transaction's
// timeout; the coordinator's records are small and few).
const DefaultAppendTimeout = 5 * time.Second

// ReplicatedLog is the Log over this broker's replicas of
// __transaction_state (a replication.Manager, in a cluster and on a single
// node): the coordinator of a partition lives on its leader, so Append is
// the leader's append with acks=all (Kafka's TransactionLog enforced
// required acks -1), and Replay reads the leader's log to its end
// (statelog.Log).
//
// Errors: a partition this node does not lead wraps ErrNotLeader; a batch
// over the size limit ErrRecordTooLarge; the rest (too few in-sync
// replicas, the timeout, storage) come back as they are (answered
// COORDINATOR_NOT_AVAILABLE).
type ReplicatedLog struct {
	log *statelog.Log
}

// NewReplicatedLog returns the Log over m's replicas; timeout bounds the
// wait for the in-sync replicas (0: DefaultAppendTimeout).
func NewReplicatedLog(m *replication.Manager, timeout time.Duration) *ReplicatedLog {
	if timeout <= 0 {
		timeout = DefaultAppendTimeout
	}
	return &ReplicatedLog{log: statelog.New(m, StateTopic, timeout, statelog.Errors{NotLeader: ErrNotLeader, RecordTooLarge: ErrRecordTooLarge})}
}

// Append implements Log.
func (l *ReplicatedLog) Append(p int32, recs []Record, done func(error)) {
	if _, err := l.log.Leader(p); err != nil {
		done(err)
		return
	}
	batch, err := engine.AppendRecords(nil, recs)
	if err != nil {
		done(err)
		return
	}
	l.log.Append(p, batch, done)
}

// Replay implements Log: it reads this node's leader replica of p from its
// log start to its end. Without a leader replica here it fails with
// ErrNotLeader.
func (l *ReplicatedLog) Replay(p int32, fn func(Record) error) error {
	return l.log.Replay(p, func(b []byte, from int64) error { return decodeBatches(b, from, fn) })
}

// decodeBatches calls fn with the records of the whole batches of b at or
// after offset from.
func decodeBatches(b []byte, from int64, fn func(Record) error) error {
	for len(b) > 0 {
		h, err := engine.ParseBatchHeader(b)
		if err != nil || int(h.Size()) > len(b) {
			return fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
		}
		err = engine.ForEachRecord(b[:h.Size()], func(r Record) error {
			if r.Offset < from {
				return nil
			}
			return fn(r)
		})
		if err != nil {
			return fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
		}
		b = b[h.Size():]
	}
	return nil
}
