package group

import (
	"errors"
	"fmt"
	"time"

	"github.com/samsa-broker/samsa/coordinator/statelog"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// Record is one __consumer_offsets record (a nil Value: a tombstone): the engine's,
// whose record-batch codec frames them (engine.AppendRecords writes a batch,
// engine.ForEachRecordInBatches reads a replay's; the engine's package doc draws the
// batch). Offset is set by a replay and ignored by Append.
type Record = engine.Record

// The fields of a batch header that txnReplay.decode (txn_offsets.go) reads.
const (
	batchHeaderLen   = engine.BatchHeaderSize
	batchAttrsOffset = 21 // attributes int16: bit 4 transactional, bit 5 control
)

// decodeBatches calls fn with every record of the data batches of buf, a read of the
// log: engine.ForEachRecordInBatches (control batches skipped, the records of a
// transactional batch passed on as any others, each batch decompressed to at most
// 64 MiB, a last batch cut short ending the walk without error). A batch that does
// not hold fails with an error wrapping ErrCorrupt and engine.ErrCorrupt; fn's error
// is returned unchanged. Key and Value point into buf or a decompression buffer and
// are valid only during fn.
func decodeBatches(buf []byte, fn func(Record) error) error {
	err := engine.ForEachRecordInBatches(buf, fn)
	if errors.Is(err, engine.ErrCorrupt) && !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// DefaultCommitTimeout is offsets.commit.timeout.ms: how long an acks=all append of
// the coordinator waits for the in-sync replicas.
const DefaultCommitTimeout = 5 * time.Second

// ReplicatedLog is the Log over this broker's replicas of __consumer_offsets (a
// replication.Manager, in a cluster and on a single node): the leader's append with
// acks=all (Kafka's offsets.commit.required.acks=-1), done calls of a partition in
// Append order, and the replay of the leader's log (statelog.Log). A committed offset
// therefore survives the loss of the coordinator's broker: the new leader's log has
// it, and its coordinator loads it.
//
// Errors: a partition this node does not lead (no replica, a follower, leadership
// lost while the append waited) wraps ErrNotLeader (the client looks for the new
// coordinator); a batch over the log's size limit wraps ErrRecordTooLarge; the rest
// (too few in-sync replicas, the commit timeout, storage) are answered
// COORDINATOR_NOT_AVAILABLE, so the client retries.
type ReplicatedLog struct {
	log *statelog.Log

	replayed replayedTxns // the transactions each partition's last replay left open (txn_offsets.go)
}

// NewReplicatedLog returns the Log over m's replicas; timeout bounds the wait for the
// in-sync replicas (0: DefaultCommitTimeout).
func NewReplicatedLog(m *replication.Manager, timeout time.Duration) *ReplicatedLog {
	return NewReplicatedTopicLog(m, OffsetsTopic, timeout)
}

// NewReplicatedTopicLog is NewReplicatedLog over the partitions of another internal
// topic of the same kind (compacted, records framed by engine.AppendRecords), such as
// __share_group_state: the same leader append, acks=all, ordering and errors.
func NewReplicatedTopicLog(m *replication.Manager, topic string, timeout time.Duration) *ReplicatedLog {
	if timeout <= 0 {
		timeout = DefaultCommitTimeout
	}
	return &ReplicatedLog{log: statelog.New(m, topic, timeout, statelog.Errors{NotLeader: ErrNotLeader, RecordTooLarge: ErrRecordTooLarge})}
}

// Append implements Log: recs in one uncompressed batch (engine.AppendRecords: base
// offset 0, no producer, the first record's timestamp as the base; the bytes
// group.AppendBatch wrote before, TestOffsetsBatchGolden). An Append without records
// fails at once, out of order with the partition's other appends (the engine holds no
// empty batch; the coordinator never appends one).
func (l *ReplicatedLog) Append(p int32, recs []Record, done func(error)) {
	batch, err := engine.AppendRecords(nil, recs)
	if err != nil {
		done(fmt.Errorf("group: offsets batch: %w", err))
		return
	}
	l.log.Append(p, batch, done)
}

// Replay implements Log: it reads this node's leader replica of partition p from its
// log start to its end (the new leader's log holds every committed record). Without a
// leader replica here (not yet made leader, or no longer) it fails with ErrNotLeader:
// loading nothing would serve a group without its offsets.
func (l *ReplicatedLog) Replay(p int32, fn func(Record) error) error {
	st := &txnReplay{}
	if err := l.log.Replay(p, func(b []byte, from int64) error { return st.decode(b, from, fn) }); err != nil {
		return err
	}
	l.replayed.set(p, st.open)
	return nil
}

// transactionalBatch encodes the records of a producer's transactional batch.
func transactionalBatch(producerID int64, epoch int16, recs []Record) ([]byte, error) {
	return engine.AppendProducerRecords(nil, engine.BatchProducer{ID: producerID, Epoch: epoch, BaseSequence: -1, Transactional: true}, recs)
}
