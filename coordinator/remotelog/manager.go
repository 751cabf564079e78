package remotelog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/coordinator/statelog"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/remote"
	"github.com/samsa-broker/samsa/replication"
)

// Topic is the internal topic the metadata is kept in
// (remote.log.metadata.topic.name's only value in Kafka).
const Topic = "__remote_log_metadata"

var (
	// ErrNotLeader: this node does not lead the metadata partition an
	// append goes to.
	ErrNotLeader = errors.New("remotelog: not the leader of the __remote_log_metadata partition")
	// ErrRecordTooLarge: a record over the metadata topic's size limit.
	ErrRecordTooLarge = errors.New("remotelog: record too large")
	// ErrNotReady: the metadata of the partition cannot be read here yet:
	// the topic does not exist, or this node has no replica of the
	// metadata partition (Kafka's RemoteResourceNotFoundException "no
	// resource found for partition" while the consumer is assigning).
	ErrNotReady = errors.New("remotelog: remote log metadata not available on this node")
)

// Config is a Manager's.
type Config struct {
	// Replicas is this node's replica manager: it holds the metadata
	// partitions' replicas.
	Replicas *replication.Manager
	// Partitions returns the metadata topic's partition count (0: the
	// topic does not exist yet). Kafka's remote.log.metadata.topic.num.partitions.
	Partitions func() int32
	// Timeout bounds an append's wait for the in-sync replicas (0: 30 s),
	// and a forwarded append's wait for the local replica to hold it.
	Timeout time.Duration
	// Forward appends batch (one record batch) to metadata partition p at
	// its leader on another node, with acks=all, and returns the batch's
	// base offset there: what Kafka's producer of the topic does. nil: an
	// append to a partition this node does not lead fails with
	// ErrNotLeader.
	Forward func(ctx context.Context, p int32, batch []byte) (int64, error)
}

// Manager is the remote log metadata manager (see the package doc).
type Manager struct {
	cfg Config
	log *statelog.Log

	mu    sync.Mutex
	parts map[int32]*metaPartition
}

// metaPartition is the state replayed from one metadata partition.
type metaPartition struct {
	mu     sync.Mutex // serializes syncs of this partition
	next   int64      // the next offset to replay
	start  int64      // the log start offset when replay began (a new log, a wiped replica: replay again)
	states map[remote.TopicIDPartition]*partitionState
}

// New returns a Manager over cfg's replicas.
func New(cfg Config) *Manager {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	return &Manager{cfg: cfg, log: statelog.New(cfg.Replicas, Topic, cfg.Timeout, statelog.Errors{NotLeader: ErrNotLeader, RecordTooLarge: ErrRecordTooLarge}),
		parts: map[int32]*metaPartition{}}
}

// partitionOf returns the metadata partition of tp.
func (m *Manager) partitionOf(tp remote.TopicIDPartition) (int32, error) {
	n := m.cfg.Partitions()
	if n <= 0 {
		return 0, fmt.Errorf("%w: no %s topic", ErrNotReady, Topic)
	}
	return MetadataPartition(tp, n), nil
}

// AddRemoteLogSegmentMetadata records that a copy of a segment starts (md's
// state must be COPY_SEGMENT_STARTED). It returns once the record is on
// every in-sync replica of the metadata partition and in this node's state.
func (m *Manager) AddRemoteLogSegmentMetadata(ctx context.Context, md *remote.SegmentMetadata) error {
	if md.State != remote.CopySegmentStarted {
		return fmt.Errorf("%w: a new copy's state is %s, want COPY_SEGMENT_STARTED", remote.ErrInvalidMetadata, md.State)
	}
	if err := md.Validate(); err != nil {
		return err
	}
	return m.append(ctx, md.ID.TopicIDPartition, EncodeSegment(md))
}

// UpdateRemoteLogSegmentMetadata records a copy's new state; the copy must
// be known, and the move valid (remote.ValidTransition).
func (m *Manager) UpdateRemoteLogSegmentMetadata(ctx context.Context, u *Update) error {
	tp := u.ID.TopicIDPartition
	segs, err := m.ListRemoteLogSegments(tp)
	if err != nil {
		return err
	}
	for _, s := range segs {
		if s.ID == u.ID {
			if !remote.ValidTransition(s.State, u.State) {
				return fmt.Errorf("%w: %s cannot move from %s to %s", remote.ErrInvalidMetadata, u.ID, s.State, u.State)
			}
			return m.append(ctx, tp, EncodeUpdate(u))
		}
	}
	return fmt.Errorf("%w: no copy %s", remote.ErrRemoteResourceNotFound, u.ID)
}

// PutRemotePartitionDeleteMetadata records the deletion state of a whole
// partition's remote data.
func (m *Manager) PutRemotePartitionDeleteMetadata(ctx context.Context, d *PartitionDelete) error {
	return m.append(ctx, d.Partition, EncodePartitionDelete(d))
}

// append appends one record with value v to tp's metadata partition, waits
// for it, and syncs the state past it.
func (m *Manager) append(ctx context.Context, tp remote.TopicIDPartition, v []byte) error {
	p, err := m.partitionOf(tp)
	if err != nil {
		return err
	}
	batch, err := engine.AppendRecords(nil, []engine.Record{{Timestamp: time.Now().UnixMilli(), Value: v}})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	m.log.Append(p, batch, func(err error) { done <- err })
	select {
	case err = <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if errors.Is(err, ErrNotLeader) && m.cfg.Forward != nil {
		return m.forward(ctx, p, batch)
	}
	if err != nil {
		return err
	}
	return m.sync(p)
}

// forward appends batch at p's leader elsewhere and waits until this node's
// replica of p holds it below its high watermark, so that what the caller
// wrote is in the state it reads next.
func (m *Manager) forward(ctx context.Context, p int32, batch []byte) error {
	base, err := m.cfg.Forward(ctx, p, batch)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	for {
		r := m.cfg.Replicas.Partition(engine.TopicPartition{Topic: Topic, Partition: p})
		if r == nil {
			return fmt.Errorf("%w: appended at %s-%d's leader, but no replica of it here", ErrNotReady, Topic, p)
		}
		if el := r.EngineLog(); el != nil && el.HighWatermark() > base {
			return m.sync(p)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remotelog: appended at %s-%d's leader at %d, not replicated here: %w", Topic, p, base, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ListRemoteLogSegments returns every copy of tp's segments that is not
// deleted yet, in any state, by start offset (Kafka's
// listRemoteLogSegments), after replaying what the local replica of the
// metadata partition holds up to its high watermark.
func (m *Manager) ListRemoteLogSegments(tp remote.TopicIDPartition) ([]remote.SegmentMetadata, error) {
	p, err := m.partitionOf(tp)
	if err != nil {
		return nil, err
	}
	if err := m.sync(p); err != nil {
		return nil, err
	}
	mp := m.part(p)
	mp.mu.Lock()
	defer mp.mu.Unlock()
	st := mp.states[tp]
	if st == nil {
		return nil, nil
	}
	return st.segments(), nil
}

func (m *Manager) part(p int32) *metaPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.parts[p]
	if mp == nil {
		mp = &metaPartition{next: -1, states: map[remote.TopicIDPartition]*partitionState{}}
		m.parts[p] = mp
	}
	return mp
}

// sync replays metadata partition p's local replica from where the last
// sync stopped to its high watermark. A log that no longer holds that point
// (truncated below it, or started past it: a replica rebuilt) is replayed
// from its start into a fresh state.
func (m *Manager) sync(p int32) error {
	r := m.cfg.Replicas.Partition(engine.TopicPartition{Topic: Topic, Partition: p})
	if r == nil {
		return fmt.Errorf("%w: no replica of %s-%d here", ErrNotReady, Topic, p)
	}
	el := r.EngineLog()
	if el == nil {
		return fmt.Errorf("%w: %s-%d has no engine log", ErrNotReady, Topic, p)
	}
	mp := m.part(p)
	mp.mu.Lock()
	defer mp.mu.Unlock()
	start, hw := el.LogStartOffset(), el.HighWatermark()
	if mp.next < 0 || mp.next < start || mp.next > el.LogEndOffset() || start != mp.start {
		mp.next, mp.start = start, start
		clear(mp.states)
	}
	next, err := statelog.ReplayRange(el, mp.next, hw, func(b []byte, from int64) error {
		return engine.ForEachBatch(b, func(h engine.BatchHeader, batch []byte) error {
			if h.Control() {
				return nil
			}
			return engine.ForEachRecord(batch, func(rec engine.Record) error {
				if rec.Offset < from || rec.Value == nil {
					return nil
				}
				v, err := Decode(rec.Value)
				if err != nil {
					return nil // a record of a later version: skipped, as Kafka's consumer logs and skips it
				}
				var tp remote.TopicIDPartition
				switch r := v.(type) {
				case *remote.SegmentMetadata:
					tp = r.ID.TopicIDPartition
				case *Update:
					tp = r.ID.TopicIDPartition
				case *PartitionDelete:
					tp = r.Partition
				}
				st := mp.states[tp]
				if st == nil {
					st = newPartitionState()
					mp.states[tp] = st
				}
				st.apply(v)
				return nil
			})
		})
	})
	mp.next = next
	return err
}

// LogConfig is the engine configuration of __remote_log_metadata partitions,
// as Kafka creates the topic: cleanup.policy delete with retention.ms -1
// (kept for ever), 100 MiB segments.
func LogConfig() engine.LogConfig {
	cfg := engine.DefaultLogConfig()
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	cfg.SegmentBytes = 100 << 20
	return cfg
}
