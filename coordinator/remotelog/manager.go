package remotelog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// metadata partition and cannot read it from its leader (no
	// Config.Fetch, no leader, a leader unreachable) (Kafka's
	// RemoteResourceNotFoundException "no resource found for partition"
	// while the consumer is assigning).
	ErrNotReady = errors.New("remotelog: remote log metadata not available on this node")
	// ErrOffsetOutOfRange: a Config.Fetch offset below the leader's log
	// start or past its log end (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("remotelog: fetch offset out of range")
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
	// Fetch reads metadata partition p from its leader on another node,
	// from offset on, as Kafka's consumer of the topic does: a Fetch with
	// READ_UNCOMMITTED, up to the leader's high watermark, at most maxBytes
	// of records (at least one whole batch). An offset the leader's log does
	// not hold fails wrapping ErrOffsetOutOfRange, with the leader's log
	// start in the result. nil: a node with no replica of a metadata
	// partition cannot read it (ErrNotReady).
	Fetch func(ctx context.Context, p int32, offset int64, maxBytes int32) (FetchResult, error)
}

// FetchResult is what Config.Fetch read.
type FetchResult struct {
	// Records are whole record batches from the offset asked for (the first
	// may begin before it), maybe followed by one cut short.
	Records []byte
	// HighWatermark and LogStartOffset are the leader's.
	HighWatermark, LogStartOffset int64
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

// PartitionDeletions returns the partitions whose copies' deletion is
// marked or started and not finished (Kafka's RemotePartitionDeleteMetadata
// short of DELETE_PARTITION_FINISHED), in the metadata partitions this node
// leads, by topic and partition: what the leader of a metadata partition
// finishes when the node that began it stopped first.
func (m *Manager) PartitionDeletions() ([]remote.TopicIDPartition, error) {
	var out []remote.TopicIDPartition
	var errs []error
	for p := range max(m.cfg.Partitions(), 0) {
		r := m.cfg.Replicas.Partition(engine.TopicPartition{Topic: Topic, Partition: p})
		if r == nil || r.Role() != replication.RoleLeader {
			continue
		}
		if _, err := m.sync(p); err != nil {
			errs = append(errs, err)
			continue
		}
		mp := m.part(p)
		mp.mu.Lock()
		for tp, st := range mp.states {
			if st.deleteStarted && st.deleteState != DeletePartitionFinished {
				out = append(out, tp)
			}
		}
		mp.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b remote.TopicIDPartition) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition) - int(b.Partition)
	})
	return out, errors.Join(errs...)
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
	_, err = m.sync(p)
	return err
}

// forward appends batch at p's leader elsewhere and waits until this node's
// state of p holds it (read from the local replica of p below its high
// watermark, or from the leader), so that what the caller wrote is in the
// state it reads next.
func (m *Manager) forward(ctx context.Context, p int32, batch []byte) error {
	base, err := m.cfg.Forward(ctx, p, batch)
	if err != nil {
		return err
	}
	if m.cfg.Fetch == nil && m.cfg.Replicas.Partition(engine.TopicPartition{Topic: Topic, Partition: p}) == nil {
		return fmt.Errorf("%w: appended at %s-%d's leader, but no replica of it here", ErrNotReady, Topic, p)
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	for {
		next, err := m.sync(p)
		if err == nil && next > base {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("remotelog: appended at %s-%d's leader at %d, not read back here: %w", Topic, p, base, err)
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
	if _, err := m.sync(p); err != nil {
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

// sync brings the state of metadata partition p up to date and returns the
// next offset to replay: from the local replica of p, up to its high
// watermark, when there is one that is not behind the state (a follower
// catching up is); else, with Config.Fetch, from p's leader (Kafka's
// consumer of the topic).
func (m *Manager) sync(p int32) (int64, error) {
	mp := m.part(p)
	mp.mu.Lock()
	defer mp.mu.Unlock()
	var el *engine.Log
	r := m.cfg.Replicas.Partition(engine.TopicPartition{Topic: Topic, Partition: p})
	if r != nil {
		el = r.EngineLog()
	}
	switch {
	case el != nil && (m.cfg.Fetch == nil || r.Role() == replication.RoleLeader || el.HighWatermark() >= mp.next):
		err := mp.replayLocal(el)
		return mp.next, err
	case m.cfg.Fetch != nil:
		err := m.fetch(p, mp)
		return mp.next, err
	case r == nil:
		return 0, fmt.Errorf("%w: no replica of %s-%d here", ErrNotReady, Topic, p)
	}
	return 0, fmt.Errorf("%w: %s-%d has no engine log", ErrNotReady, Topic, p)
}

// reset starts the state over, to be replayed from offset start.
func (mp *metaPartition) reset(start int64) {
	mp.next, mp.start = start, start
	clear(mp.states)
}

// replayLocal replays el (a replica of the metadata partition) from where
// the last sync stopped to its high watermark. A log that no longer holds
// that point (truncated below it, or started past it: a replica rebuilt) is
// replayed from its start into a fresh state. Caller holds mp.mu.
func (mp *metaPartition) replayLocal(el *engine.Log) error {
	start, hw := el.LogStartOffset(), el.HighWatermark()
	if mp.next < 0 || mp.next < start || mp.next > el.LogEndOffset() || start != mp.start {
		mp.reset(start)
	}
	next, err := statelog.ReplayRange(el, mp.next, hw, mp.apply)
	mp.next = next
	return err
}

// fetch reads metadata partition p from its leader (Config.Fetch) from where
// the last sync stopped to the leader's high watermark, a chunk at a time. A
// leader's log that does not hold that point (OFFSET_OUT_OF_RANGE), or whose
// start moved, is read again from its start into a fresh state. The offsets
// of a partition are the same on every replica, so the state goes on from
// the local replica's point, and on from the old leader's at a new one.
// Caller holds mp.mu.
func (m *Manager) fetch(p int32, mp *metaPartition) error {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Timeout)
	defer cancel()
	if mp.next < 0 {
		mp.reset(0)
	}
	restarted := false
	for {
		from := mp.next
		res, err := m.cfg.Fetch(ctx, p, from, statelog.ReplayChunk)
		if err == nil && res.LogStartOffset >= 0 && res.LogStartOffset != mp.start {
			err = fmt.Errorf("%w: the log start moved from %d to %d", ErrOffsetOutOfRange, mp.start, res.LogStartOffset)
		}
		if errors.Is(err, ErrOffsetOutOfRange) && !restarted && res.LogStartOffset >= 0 {
			restarted = true
			mp.reset(res.LogStartOffset)
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: reading %s-%d from its leader at %d: %w", ErrNotReady, Topic, p, from, err)
		}
		if err := mp.apply(res.Records, from); err != nil {
			return fmt.Errorf("remotelog: %s-%d at %d: %w", Topic, p, from, err)
		}
		if end := engine.BatchesEnd(res.Records); end > from {
			mp.next = end
		}
		if mp.next >= res.HighWatermark || mp.next == from {
			return nil
		}
	}
}

// apply applies the records of the whole batches of b (read at offset from:
// the records below it are skipped) to the states. Caller holds mp.mu.
func (mp *metaPartition) apply(b []byte, from int64) error {
	return engine.ForEachBatch(b, func(h engine.BatchHeader, batch []byte) error {
		if h.Control() {
			return nil
		}
		return engine.ForEachRecord(batch, func(rec engine.Record) error {
			if rec.Offset < from || rec.Value == nil {
				return nil
			}
			applyValue(mp.states, rec.Value)
			return nil
		})
	})
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
