package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/samsa-broker/samsa/engine"
)

// OffsetsTopic is the internal topic holding committed offsets and group metadata.
const OffsetsTopic = "__consumer_offsets"

// OffsetsLogConfig is the engine configuration of __consumer_offsets partitions:
// compacted, never deleted by time or size, 100 MiB segments
// (offsets.topic.segment.bytes).
func OffsetsLogConfig() engine.LogConfig {
	cfg := engine.DefaultLogConfig()
	cfg.Compact = true
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	cfg.SegmentBytes = 100 << 20
	return cfg
}

// EngineLog is the Log over the engine's partition logs of __consumer_offsets on a
// single broker. Partitions are created on first use with OffsetsLogConfig. done
// calls come in append order per partition, after the engine's durability policy
// is met (the group-committed fdatasync under the fsync policy).
type EngineLog struct {
	m *engine.Manager
	// LeaderEpoch is stamped into appended batches (0 on a single node).
	LeaderEpoch int32

	mu    sync.Mutex
	parts map[int32]*enginePart
}

type enginePart struct {
	log *engine.Log

	mu    sync.Mutex // orders Append calls and the completion queue
	queue []*pendingAppend
}

type pendingAppend struct {
	done     func(error)
	finished bool
	err      error
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
	tp := engine.TopicPartition{Topic: OffsetsTopic, Partition: p}
	lg := l.m.Log(tp)
	if lg == nil {
		if !create {
			return nil, nil
		}
		var err error
		if lg, err = l.m.CreateLog(tp, OffsetsLogConfig()); err != nil {
			return nil, fmt.Errorf("group: create %s: %w", tp, err)
		}
	} else {
		// A log found on disk at Open carries the manager's default config:
		// __consumer_offsets must never lose segments to time or size retention.
		lg.SetConfig(OffsetsLogConfig())
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
	batch := AppendBatch(make([]byte, 0, 128*len(recs)+batchHeaderLen), recs)
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
		ep.mu.Lock()
		pa.finished, pa.err = true, err
		var ready []*pendingAppend
		for len(ep.queue) > 0 && ep.queue[0].finished {
			ready = append(ready, ep.queue[0])
			ep.queue[0] = nil
			ep.queue = ep.queue[1:]
		}
		ep.mu.Unlock()
		for _, r := range ready {
			r.done(r.err)
		}
	})
}

// replayChunk is how much of the log one Replay read copies.
const replayChunk = 1 << 20

// Replay implements Log: it reads partition p from its log start to its end.
func (l *EngineLog) Replay(p int32, fn func(Record) error) error {
	ep, err := l.part(p, false)
	if err != nil || ep == nil {
		return err
	}
	return replayLog(ep.log, p, fn, &txnReplay{}) // open transactions' records are not kept
}

// replayLog calls fn with every record of log, partition p of __consumer_offsets, from
// its start to its end; a transaction's records at its COMMIT marker, never those
// of an aborted one, and those still open in st (txn_offsets.go).
func replayLog(log *engine.Log, p int32, fn func(Record) error, st *txnReplay) error {
	return replayTopicLog(log, OffsetsTopic, p, fn, st)
}

// replayTopicLog is replayLog over partition p of topic.
func replayTopicLog(log *engine.Log, topic string, p int32, fn func(Record) error, st *txnReplay) error {
	off, end := log.LogStartOffset(), log.LogEndOffset()
	buf := make([]byte, 0, replayChunk)
	for off < end {
		b, err := log.ReadCopy(off, replayChunk, end, true, buf[:0])
		if err != nil {
			return fmt.Errorf("group: replay %s-%d at %d: %w", topic, p, off, err)
		}
		next := batchesEnd(b)
		if len(b) == 0 || next <= off {
			break
		}
		if err := st.decode(b, off, fn); err != nil {
			return fmt.Errorf("group: replay %s-%d at %d: %w", topic, p, off, err)
		}
		off, buf = next, b
	}
	return nil
}

// batchesEnd returns one past the last offset of the last whole batch in b, or -1.
func batchesEnd(b []byte) int64 {
	end := int64(-1)
	for len(b) >= batchHeaderLen {
		n := int64(int32(binary.BigEndian.Uint32(b[8:]))) + 12
		if n < batchHeaderLen || n > int64(len(b)) {
			break
		}
		end = int64(binary.BigEndian.Uint64(b)) + int64(int32(binary.BigEndian.Uint32(b[23:]))) + 1
		b = b[n:]
	}
	return end
}
