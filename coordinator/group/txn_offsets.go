package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/statelog"
	"github.com/samsa-broker/samsa/engine"
)

// Transactional offset commits (TxnOffsetCommit, KIP-98):
//
//	TxnOffsetCommit ─▶ validate (group, generation/member) ─▶ TxnLog.AppendTxn: one
//	    transactional batch of the producer (id, epoch) on the group's partition,
//	    durable ─▶ the offsets pending under (partition, producer id) ─▶ answered
//	the transaction's marker on that partition (CompleteTxnOffsets, called by the
//	    broker's marker writer once the marker is durable): COMMIT makes the pending
//	    offsets the group's committed ones, ABORT drops them.
//
// Pending offsets are not served by OffsetFetch (it answers the last committed
// ones). A partition's replay (replayLog) holds transactional records back until
// their marker: committed ones are applied at the marker's place, aborted ones
// never; those still open at the log's end wait in the ReplicatedLog for their marker
// (CompleteTxnOffsets). OffsetFetch's RequireStable (v7+) answers
// UNSTABLE_OFFSET_COMMIT for a partition with offsets pending. Not done: a group
// unknown when a replayed transaction's marker comes (loaded from no other record)
// gets none of its offsets.

// TxnLog is a Log that can also append a producer's transactional batch (base
// sequence -1: checked for its epoch and transaction, not for sequences), with
// Append's contract for done. ReplicatedLog implements it.
type TxnLog interface {
	AppendTxn(p int32, producerID int64, epoch int16, recs []Record, done func(error))
}

// txnOffsets are the transactional offsets waiting for their marker.
type txnOffsets struct {
	mu sync.Mutex
	m  map[txnOffsetsKey]map[string]map[topicPartition]OffsetValue // → group → offsets
}

type txnOffsetsKey struct {
	partition  int32
	producerID int64
}

func (t *txnOffsets) add(p int32, pid int64, group string, offs map[topicPartition]OffsetValue) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[txnOffsetsKey]map[string]map[topicPartition]OffsetValue{}
	}
	k := txnOffsetsKey{p, pid}
	gs := t.m[k]
	if gs == nil {
		gs = map[string]map[topicPartition]OffsetValue{}
		t.m[k] = gs
	}
	o := gs[group]
	if o == nil {
		o = map[topicPartition]OffsetValue{}
		gs[group] = o
	}
	for tp, v := range offs {
		o[tp] = v
	}
}

func (t *txnOffsets) take(p int32, pid int64) map[string]map[topicPartition]OffsetValue {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := txnOffsetsKey{p, pid}
	gs := t.m[k]
	delete(t.m, k)
	return gs
}

// TxnOffsetCommit handles TxnOffsetCommit (v0+): the offsets are written in the
// producer's transaction and become the group's committed offsets when the
// transaction commits (CompleteTxnOffsets). The caller has verified (KIP-890) that
// the group's partition is in the producer's transaction. A group not known is
// created by a commit without a generation (-1, as Kafka); with one it is
// ILLEGAL_GENERATION, GROUP_ID_NOT_FOUND from v6 (KIP-1319). A member names its
// generation (classic groups) or member epoch (consumer groups) from v3; without a
// member (generation -1, no member id) the commit is accepted whatever the group's
// members. Topics are named (a v6+ handler resolves topic ids to names first); one
// whose id is set but is not the id of the topic of that name in the coordinator's
// topics (re-created since) answers UNKNOWN_TOPIC_ID. cb is called once, after the
// records are durable. Errors per partition: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, STALE_MEMBER_EPOCH (v6+: ILLEGAL_GENERATION
// before, as Kafka maps it), OFFSET_METADATA_TOO_LARGE, GROUP_ID_NOT_FOUND (a share
// group), UNKNOWN_TOPIC_ID, and the Log's (INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE are
// mapped by the Log's caller through errors it wraps).
func (c *Coordinator) TxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest, cb func(*kmsg.TxnOffsetCommitResponse, error)) {
	r := newTxnOffsetCommitResponse(req)
	all := func(code int16) *kmsg.TxnOffsetCommitResponse {
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		return r
	}
	tl, ok := c.log.(TxnLog)
	if !ok {
		cb(all(kerr.CoordinatorNotAvailable.Code), nil)
		return
	}
	generation, memberID := req.Generation, req.MemberID
	if req.Version < 3 {
		generation, memberID = -1, ""
	}
	g, code := c.lookup(req.Group, generation < 0)
	switch {
	case code != 0:
		cb(all(code), nil)
		return
	case g == nil && req.Version >= 6:
		cb(all(kerr.GroupIDNotFound.Code), nil)
		return
	case g == nil:
		cb(all(kerr.IllegalGeneration.Code), nil)
		return
	}
	g.with(func(fx *effects) {
		code, perPart := g.validateTxnCommitLocked(req, generation, memberID)
		if code = txnCommitCode(code, req.Version); code != 0 {
			fx.add(func() { cb(all(code), nil) })
			return
		}
		offs, recs, codes := g.txnOffsetRecordsLocked(req, r, perPart)
		if len(recs) == 0 {
			fx.add(func() { cb(r, nil) })
			return
		}
		p, id := g.partition, g.id
		g.appendTxnLocked(fx, tl, req.ProducerID, req.ProducerEpoch, recs, func(err error) {
			code := appendErrorCode(err, true)
			if err == nil {
				c.txnOffsets.add(p, req.ProducerID, id, offs)
			}
			for _, pc := range codes {
				*pc = code
			}
			cb(r, err)
		})
	})
}

// newTxnOffsetCommitResponse is the answer to req, every partition named.
func newTxnOffsetCommitResponse(req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	r := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	r.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &r.Topics[i]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rt.Partitions[j].Partition = p.Partition
		}
	}
	return r
}

// txnCommitCode is code as a TxnOffsetCommit of version carries it: below v6
// the answer cannot carry STALE_MEMBER_EPOCH, and Kafka maps it.
func txnCommitCode(code, version int16) int16 {
	if code == kerr.StaleMemberEpoch.Code && version < 6 {
		return kerr.IllegalGeneration.Code
	}
	return code
}

// validateTxnCommitLocked checks the committing member against g by g's kind
// (none to check for a commit without a member). perPart, if not nil, checks
// each partition (a consumer group's member commits only its own).
func (g *group) validateTxnCommitLocked(req *kmsg.TxnOffsetCommitRequest, generation int32, memberID string) (code int16, perPart func(topic string, partition int32) int16) {
	anonymous := generation < 0 && memberID == "" && (req.Version < 3 || req.InstanceID == nil)
	switch {
	case g.state == stateDead:
		code = kerr.CoordinatorNotAvailable.Code
	case g.kind == kindShare:
		code = kerr.GroupIDNotFound.Code
	case anonymous:
	case g.kind == kindConsumer:
		code, perPart = g.validateConsumerCommitLocked(9, generation, memberID)
	case g.kind == kindStreams:
		code = g.validateStreamsCommitLocked(9, generation, memberID, req.InstanceID, true)
	default:
		code = g.validateCommitLocked(generation, memberID, req.InstanceID)
	}
	return code, perPart
}

// txnOffsetRecordsLocked makes the offset records of the partitions of req that
// may commit, setting the error code in r of those that may not. It returns the
// offsets by partition, their records, and where their codes go in r.
func (g *group) txnOffsetRecordsLocked(req *kmsg.TxnOffsetCommitRequest, r *kmsg.TxnOffsetCommitResponse,
	perPart func(topic string, partition int32) int16) (map[topicPartition]OffsetValue, []Record, []*int16) {
	now := g.c.clock.Now().UnixMilli()
	offs := map[topicPartition]OffsetValue{}
	var recs []Record
	var codes []*int16
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			pc := &r.Topics[i].Partitions[j].ErrorCode
			md := ""
			if p.Metadata != nil {
				md = *p.Metadata
			}
			if len(md) > g.c.cfg.MaxOffsetMetadata {
				*pc = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			if g.c.staleTopicID(t.Topic, t.TopicID) {
				*pc = kerr.UnknownTopicID.Code
				continue
			}
			if perPart != nil {
				if c := perPart(t.Topic, p.Partition); c != 0 {
					*pc = txnCommitCode(c, req.Version)
					continue
				}
			}
			v := OffsetValue{Version: 3, Offset: p.Offset, LeaderEpoch: -1, Metadata: md, CommitTimestamp: now, ExpireTimestamp: -1}
			if req.Version >= 2 {
				v.LeaderEpoch = p.LeaderEpoch
			}
			tp := topicPartition{t.Topic, p.Partition}
			offs[tp] = v
			codes = append(codes, pc)
			recs = append(recs, Record{Timestamp: now, Key: AppendOffsetKey(nil, g.id, tp.topic, tp.partition), Value: AppendOffsetValue(nil, v)})
		}
	}
	return offs, recs, codes
}

// appendTxnLocked is appendLocked for a producer's transactional batch.
func (g *group) appendTxnLocked(fx *effects, tl TxnLog, pid int64, epoch int16, recs []Record, done func(error)) {
	if f := statelog.Deferred(func(cb func(error)) { tl.AppendTxn(g.partition, pid, epoch, recs, cb) }, done); f != nil {
		fx.add(f)
	}
}

// CompleteTxnOffsets applies the marker of producer id pid on partition p, durable
// in its log: commit makes the producer's pending offsets there the groups'
// committed offsets, abort drops them. Safe from any goroutine.
func (c *Coordinator) CompleteTxnOffsets(p int32, pid int64, commit bool) {
	gs := c.txnOffsets.take(p, pid)
	var replayed []Record
	if rl, ok := c.log.(interface {
		takeReplayedTxn(p int32, pid int64) []Record
	}); ok {
		replayed = rl.takeReplayedTxn(p, pid)
	}
	if !commit || len(gs) == 0 && len(replayed) == 0 {
		return
	}
	// The replayed records (written before the partition was loaded) first, then
	// those committed since.
	updates := replayedOffsets(replayed)
	for id, offs := range gs {
		if updates[id] == nil {
			updates[id] = map[topicPartition]*OffsetValue{}
		}
		for tp, v := range offs {
			updates[id][tp] = &v
		}
	}
	for id, offs := range updates {
		c.mu.Lock()
		g := c.mu.groups[id]
		c.mu.Unlock()
		if g == nil || g.partition != p {
			continue
		}
		g.with(func(*effects) {
			if g.state == stateDead {
				return
			}
			for tp, v := range offs {
				if v == nil {
					delete(g.offsets, tp)
				} else {
					g.offsets[tp] = *v
				}
			}
		})
	}
}

// AppendTxn implements TxnLog: the producer's transactional batch, appended as the
// leader with acks=all, as Append.
func (l *ReplicatedLog) AppendTxn(p int32, producerID int64, epoch int16, recs []Record, done func(error)) {
	if _, err := l.log.Leader(p); err != nil {
		done(err)
		return
	}
	batch, err := transactionalBatch(producerID, epoch, recs)
	if err != nil {
		done(fmt.Errorf("group: transactional offsets batch: %w", err))
		return
	}
	l.log.Append(p, batch, done)
}

// txnReplay holds back, during a replay, the records of transactional batches until
// their producer's marker (Kafka's loader does the same): a COMMIT hands them on at
// the marker's place in the log, an ABORT drops them; those of transactions still
// open at the log's end stay in open, for CompleteTxnOffsets once their marker comes.
type txnReplay struct {
	open map[int64][]Record // by producer id; Key and Value are copies
}

// decode is decodeBatches over buf, a read of the log from offset from on (batches,
// or records of a batch, below from were handled by the previous read), with the
// transactional batches held back.
func (s *txnReplay) decode(buf []byte, from int64, fn func(Record) error) error {
	fromOn := func(r Record) error {
		if r.Offset < from {
			return nil
		}
		return fn(r)
	}
	for len(buf) >= batchHeaderLen {
		length := int64(int32(binary.BigEndian.Uint32(buf[8:])))
		if length < batchHeaderLen-12 || int64(len(buf)) < 12+length {
			return decodeBatches(buf, fromOn) // it reports the corruption, or ends at a cut batch
		}
		b := buf[:12+length]
		buf = buf[12+length:]
		base := int64(binary.BigEndian.Uint64(b))
		attrs := binary.BigEndian.Uint16(b[batchAttrsOffset:])
		pid := int64(binary.BigEndian.Uint64(b[43:]))
		switch {
		case attrs&0x20 != 0: // a control batch: a transaction marker
			if base < from {
				continue
			}
			m, ok, err := engine.DecodeMarker(b)
			if err != nil {
				return fmt.Errorf("%w: transaction marker at %d: %w", ErrCorrupt, base, err)
			}
			if !ok {
				continue
			}
			recs := s.open[m.ProducerID]
			delete(s.open, m.ProducerID)
			if m.Commit {
				for _, r := range recs {
					if err := fn(r); err != nil {
						return err
					}
				}
			}
		case attrs&0x10 != 0 && pid >= 0: // transactional records
			if err := decodeBatches(b, func(r Record) error {
				if r.Offset < from {
					return nil
				}
				r.Key = bytes.Clone(r.Key)
				if r.Value != nil {
					r.Value = append([]byte{}, r.Value...)
				}
				if s.open == nil {
					s.open = map[int64][]Record{}
				}
				s.open[pid] = append(s.open[pid], r)
				return nil
			}); err != nil {
				return err
			}
		default:
			if err := decodeBatches(b, fromOn); err != nil {
				return err
			}
		}
	}
	return nil
}

// replayedTxns keeps, per partition, the transactional records its last replay left
// open (ReplicatedLog's).
type replayedTxns struct {
	mu sync.Mutex
	m  map[int32]map[int64][]Record
}

func (r *replayedTxns) set(p int32, open map[int64][]Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[int32]map[int64][]Record{}
	}
	r.m[p] = open
}

func (r *replayedTxns) take(p int32, pid int64) []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	recs := r.m[p][pid]
	delete(r.m[p], pid)
	return recs
}

// takeReplayedTxn returns (and forgets) the records of producer pid's transaction
// that the last replay of p found open.
func (l *ReplicatedLog) takeReplayedTxn(p int32, pid int64) []Record { return l.replayed.take(p, pid) }

// replayedOffsets decodes the offset records of recs, replayed and left open, by
// group.
func replayedOffsets(recs []Record) map[string]map[topicPartition]*OffsetValue {
	out := map[string]map[topicPartition]*OffsetValue{}
	for _, rec := range recs {
		k, err := DecodeKey(rec.Key)
		if err != nil || k.Kind != KeyOffset {
			continue
		}
		var v *OffsetValue
		if rec.Value != nil {
			ov, err := DecodeOffsetValue(rec.Value)
			if err != nil {
				continue
			}
			v = &ov
		}
		if out[k.Group] == nil {
			out[k.Group] = map[topicPartition]*OffsetValue{}
		}
		out[k.Group][topicPartition{k.Topic, k.Partition}] = v
	}
	return out
}

// markUnstableOffsets is OffsetFetch's RequireStable (v7+, KIP-447): a partition
// with transactional offsets of the group waiting for their marker answers
// UNSTABLE_OFFSET_COMMIT (retriable; offset -1) instead of its last committed offset.
func (c *Coordinator) markUnstableOffsets(req *kmsg.OffsetFetchRequest, r *kmsg.OffsetFetchResponse) {
	if req.Version < 7 || !req.RequireStable {
		return
	}
	unstable := c.unstableOffsets()
	if len(unstable) == 0 {
		return
	}
	mark := func(group, topic string, p int32, code *int16, offset *int64, epoch *int32, md **string) {
		if unstable[unstableKey{group, topicPartition{topic, p}}] {
			*code, *offset, *epoch, *md = kerr.UnstableOffsetCommit.Code, -1, -1, nil
		}
	}
	if req.Version >= 8 {
		for i := range r.Groups {
			g := &r.Groups[i]
			for j := range g.Topics {
				t := &g.Topics[j]
				for k := range t.Partitions {
					p := &t.Partitions[k]
					mark(g.Group, t.Topic, p.Partition, &p.ErrorCode, &p.Offset, &p.LeaderEpoch, &p.Metadata)
				}
			}
		}
		return
	}
	for j := range r.Topics {
		t := &r.Topics[j]
		for k := range t.Partitions {
			p := &t.Partitions[k]
			mark(req.Group, t.Topic, p.Partition, &p.ErrorCode, &p.Offset, &p.LeaderEpoch, &p.Metadata)
		}
	}
}

type unstableKey struct {
	group string
	tp    topicPartition
}

// unstableOffsets returns the (group, partition)s with transactional offsets waiting
// for their marker: committed through this coordinator, or left open by a replay.
func (c *Coordinator) unstableOffsets() map[unstableKey]bool {
	out := map[unstableKey]bool{}
	c.txnOffsets.mu.Lock()
	for _, gs := range c.txnOffsets.m {
		for g, offs := range gs {
			for tp := range offs {
				out[unstableKey{g, tp}] = true
			}
		}
	}
	c.txnOffsets.mu.Unlock()
	if rl, ok := c.log.(*ReplicatedLog); ok {
		rl.replayed.mu.Lock()
		for _, open := range rl.replayed.m {
			for _, recs := range open {
				for g, offs := range replayedOffsets(recs) {
					for tp := range offs {
						out[unstableKey{g, tp}] = true
					}
				}
			}
		}
		rl.replayed.mu.Unlock()
	}
	return out
}
