// ShareFetch (key 78), versions 1-2 (KIP-932; v2: KIP-1206's ShareAcquireMode and
// KIP-1222's IsRenewAck).
//
// A share group member fetches records of the partitions it was assigned from their
// leader, which hands each record to one member at a time (coordinator/share): the
// answer carries the record batches read and AcquiredRecords, the offset ranges this
// member now holds, each with its delivery count, for AcquisitionLockTimeoutMillis
// (the group's share.record.lock.duration.ms, else group.share.record.lock.duration.ms).
//
// Behaviour:
//   - Share sessions (net/sharesession): ShareSessionEpoch 0 opens the member's
//     session on this broker with the request's partitions (acknowledgements there are
//     refused: INVALID_REQUEST), later epochs must follow the previous answer's
//     (INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND) and add Topics and remove
//     ForgottenTopicsData, -1 closes it (acknowledgements only; what the member still
//     holds is released), and so does the close of the connection that opened it.
//     Every partition of the session is fetched.
//   - Piggybacked acknowledgements (AcknowledgementBatches) are applied first, per
//     partition (AcknowledgeErrorCode: INVALID_RECORD_STATE for a record the member
//     does not hold, INVALID_REQUEST for a malformed batch), and the answer waits until
//     they are durable in __share_group_state.
//   - Acquisition: from the partition's next acquirable offset (a released or expired
//     record, else the first never delivered), the log's whole batches up to the high
//     watermark within MaxBytes; at most MaxRecords records over the whole answer
//     (500 when 0); at most group.share.partition.max.record.locks in flight per
//     partition. A share partition used for the first time on this leader reads its
//     state from its share coordinator first (its records come in a later answer).
//   - Long poll: when nothing was acquired and no acknowledgement was carried, the
//     fetch waits in the broker's share purgatory, watched under the logs of its
//     partitions, for at most MaxWaitMs; an append, a released or expired lock, or a
//     loaded state retries it. MinBytes counts as "any record".
//   - A partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER with the
//     current leader and its endpoint (KIP-951).
//
//   - The group's configs (GROUP resources) as they are at each fetch: the lock
//     duration, delivery count limit and in-flight limit of its share partitions,
//     share.auto.offset.reset where a share partition has no state yet, and
//     share.isolation.level: read_committed reads up to the last stable offset and
//     archives the records of aborted transactions instead of handing them out.
//
// Differences from Apache Kafka: ShareAcquireMode is
// always record-limit (MaxRecords is never exceeded, even to keep a batch whole);
// the answer copies record bytes (no sendfile).

package kafka

import (
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/internal/latch"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/sharesession"
	"github.com/samsa-broker/samsa/purgatory"
)

func init() {
	register(API{Key: 78, MinVersion: 1, MaxVersion: 2, Handle: handleShareFetch, Authz: authz.ShareFetch})
}

// shareDefaultMaxRecords is MaxRecords when a request leaves it 0 (the Java client's
// max.poll.records default).
const shareDefaultMaxRecords = 500

// sharePart is one partition of a share fetch or acknowledgement.
type sharePart struct {
	key         share.Key
	log         *engine.Log
	epoch       int32 // the leader epoch it is served under
	code        int16 // partition error
	leaderID    int32
	leaderEpoch int32

	acks    []share.AckBatch
	hasAcks bool
	ackCode int16

	records  []byte
	acquired []share.Range
}

// resolve finds p's log on this node, its leader; false (p.code set) when this node
// cannot serve it.
func (s *shareState) resolve(p *sharePart) bool {
	p.leaderID, p.leaderEpoch = -1, -1
	part, err := s.parts.LookupByID(metadata.UUID(p.key.TopicID), p.key.Partition)
	if err != nil {
		p.code = engineErr(err).Code
		if part.Topic != nil {
			p.leaderID, p.leaderEpoch = s.parts.LeaderOf(engine.TopicPartition{Topic: part.Topic.Name, Partition: part.Index}, part.Image)
		}
		return false
	}
	if _, ke := part.Leader(); ke != nil {
		p.code = ke.Code
		p.leaderID, p.leaderEpoch = s.parts.LeaderOf(engine.TopicPartition{Topic: part.Topic.Name, Partition: part.Index}, part.Image)
		return false
	}
	p.log, p.epoch = part.Log, part.Image.LeaderEpoch
	return true
}

// ShareReader reads and acquires the records of share partitions this node leads for
// their members (the node's assembly, net/broker: Kafka's SharePartitionManager
// reading for its SharePartitions). Safe for concurrent use.
type ShareReader interface {
	// Acquire reads k's log l (at leader epoch epoch) from the share partition's next
	// acquirable offset (without state: where the group's share.auto.offset.reset
	// starts it) up to its read end (the high watermark; under the group's
	// share.isolation.level=read_committed the last stable offset, the records of
	// aborted transactions archived instead of handed out), whole batches within
	// maxBytes (one at least when first), acquires at most maxRecords of their records
	// for member, and returns the batches up to the last record acquired and the
	// ranges acquired. Nothing while the partition's state loads, when nothing is
	// acquirable, or when the log start passed the offset meanwhile; an error only
	// from reading the log.
	Acquire(k share.Key, epoch int32, l *engine.Log, member string, maxRecords int, maxBytes int32, first bool) ([]byte, []share.Range, error)
	// Acquirable reports whether k has records to acquire below its read end.
	Acquirable(k share.Key, epoch int32, l *engine.Log) bool
}

// shareAckCode maps an acknowledgement's outcome to its code.
func shareAckCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, share.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, share.ErrInvalidRecordState), errors.Is(err, share.ErrNotReady):
		return kerr.InvalidRecordState.Code
	}
	return kerr.RequestTimedOut.Code // not durable: the client may retry
}

// acknowledge applies the acknowledgements of parts (those with hasAcks) and
// calls done once all are durable or failed, each part's ackCode set.
func (s *shareState) acknowledge(member string, parts []*sharePart, allowRenew bool, done func()) {
	l := latch.New(done)
	for _, p := range parts {
		if !p.hasAcks {
			continue
		}
		if p.log == nil && p.code == 0 && !s.resolve(p) {
			p.ackCode = p.code
			continue
		}
		if p.code != 0 {
			p.ackCode = p.code
			continue
		}
		l.Add()
		s.mgr.Acknowledge(p.key, p.epoch, member, p.acks, allowRenew, func(err error) {
			l.Done(func() { p.ackCode = shareAckCode(err) })
		})
	}
	l.Done(nil)
}

// shareAckBatches converts a request's batches; false when one is malformed.
func shareAckBatches[T any](in []T, get func(*T) (int64, int64, []int8)) ([]share.AckBatch, bool) {
	out := make([]share.AckBatch, 0, len(in))
	for i := range in {
		first, last, types := get(&in[i])
		if last < first || len(types) == 0 || (len(types) != 1 && int64(len(types)) != last-first+1) {
			return nil, false
		}
		ts := make([]share.AckType, len(types))
		for j, t := range types {
			ts[j] = share.AckType(t)
		}
		out = append(out, share.AckBatch{First: first, Last: last, Types: ts})
	}
	return out, true
}

// shareFetchOp is one ShareFetch, answered at once or from the share purgatory.
type shareFetchOp struct {
	purgatory.Delayed
	b          *Broker
	r          *Request
	req        *kmsg.ShareFetchRequest
	group      string
	member     string
	parts      []*sharePart // the session's, fetched
	ackOnly    []*sharePart // acknowledged but not fetched (forgotten, or the final epoch)
	maxRecords int
	maxBytes   int32
	final      bool
	once       sync.Once
}

func handleShareFetch(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ShareFetchRequest)
	fail := func(code int16) {
		resp := kmsg.NewPtrShareFetchResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		r.Respond(resp)
	}
	if !b.features().share {
		fail(kerr.UnsupportedVersion.Code)
		return
	}
	groupID, member, code := shareMember(req.GroupID, req.MemberID)
	if code != 0 {
		fail(code)
		return
	}
	renew := req.Version >= 2 && req.IsRenewAck
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		fail(kerr.InvalidRequest.Code)
		return
	}
	op := &shareFetchOp{b: b, r: r, req: req, group: groupID, member: member}
	op.maxRecords = int(req.MaxRecords)
	if op.maxRecords <= 0 {
		op.maxRecords = shareDefaultMaxRecords
	}
	op.maxBytes = min(req.MaxBytes, fetchMaxBytes)
	if op.maxBytes <= 0 {
		op.maxBytes = fetchMaxBytes
	}

	// The request's partitions, with their acknowledgements.
	var reqParts []*sharePart
	byKey := map[share.Key]*sharePart{}
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			k := share.Key{Group: groupID, TopicID: t.TopicID, Partition: rp.Partition}
			if byKey[k] != nil {
				fail(kerr.InvalidRequest.Code)
				return
			}
			p := &sharePart{key: k}
			if len(rp.AcknowledgementBatches) > 0 {
				acks, ok := shareAckBatches(rp.AcknowledgementBatches, func(a *kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
					return a.FirstOffset, a.LastOffset, a.AcknowledgeTypes
				})
				if !ok {
					p.hasAcks, p.ackCode = true, kerr.InvalidRequest.Code
				} else {
					p.acks, p.hasAcks = acks, true
				}
			}
			byKey[k] = p
			reqParts = append(reqParts, p)
		}
	}
	var forget []share.Key
	for _, ft := range req.ForgottenTopicsData {
		for _, pn := range ft.Partitions {
			forget = append(forget, share.Key{Group: groupID, TopicID: ft.TopicID, Partition: pn})
		}
	}
	keys := make([]share.Key, len(reqParts))
	for i, p := range reqParts {
		keys[i] = p.key
	}

	// The session.
	sk := sharesession.Key{Group: groupID, Member: member}
	now := time.Now()
	var sessionKeys, released []share.Key
	switch epoch := req.ShareSessionEpoch; {
	case epoch == 0:
		for _, p := range reqParts {
			if p.hasAcks {
				fail(kerr.InvalidRequest.Code)
				return
			}
		}
		_, replaced, code := b.shares.ses.Open(sk, r.Conn, keys, now)
		released = replaced
		if code != 0 {
			b.shares.release(member, released)
			fail(code)
			return
		}
		sessionKeys = keys
	case epoch == -1:
		parts, code := b.shares.ses.Close(sk)
		if code != 0 {
			fail(code)
			return
		}
		op.final = true
		released = parts
	default:
		parts, removed, code := b.shares.ses.Next(sk, epoch, keys, forget, now)
		if code != 0 {
			fail(code)
			return
		}
		sessionKeys, released = parts, removed
	}
	if !op.final && !renew {
		for _, k := range sessionKeys {
			p := byKey[k]
			if p == nil {
				p = &sharePart{key: k}
				byKey[k] = p
			}
			op.parts = append(op.parts, p)
		}
	}
	for _, p := range reqParts {
		if p.hasAcks && !containsPart(op.parts, p) {
			op.ackOnly = append(op.ackOnly, p)
		}
	}
	all := append(append([]*sharePart(nil), op.parts...), op.ackOnly...)
	b.shares.acknowledge(member, all, renew, func() {
		// Released after the acknowledgements: a final request's acks settle first.
		b.shares.release(member, released)
		op.fetchOrPark()
	})
}

// shareMember applies KIP-932's checks to a share request's group and member ids:
// INVALID_GROUP_ID for no group, INVALID_REQUEST for a member id empty or longer than
// 36 characters (a UUID's string).
func shareMember(group, member *string) (groupID, memberID string, code int16) {
	if group != nil {
		groupID = *group
	}
	if member != nil {
		memberID = *member
	}
	switch {
	case groupID == "":
		code = kerr.InvalidGroupID.Code
	case memberID == "" || len(memberID) > 36:
		code = kerr.InvalidRequest.Code
	}
	return groupID, memberID, code
}

func containsPart(ps []*sharePart, p *sharePart) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// release releases what member holds in the share partitions keys, and evicts
// from memory those no share session uses any more (share.Manager.Evict).
func (s *shareState) release(member string, keys []share.Key) {
	for _, k := range keys {
		s.mgr.ReleaseMember(k, member)
	}
	for _, k := range s.ses.Unused(keys) {
		s.mgr.Evict(k)
	}
}

// fetchOrPark acquires and answers, or parks the fetch when it has nothing to say.
func (op *shareFetchOp) fetchOrPark() {
	acquired := op.gather()
	hadAcks := len(op.ackOnly) > 0
	var logs []*engine.Log
	failed := false
	for _, p := range op.parts {
		hadAcks = hadAcks || p.hasAcks
		failed = failed || p.code != 0
		if p.log != nil {
			logs = append(logs, p.log)
		}
	}
	if acquired > 0 || hadAcks || failed || op.req.MaxWaitMillis <= 0 || len(logs) == 0 {
		op.respond()
		return
	}
	op.Init(op, time.Duration(op.req.MaxWaitMillis)*time.Millisecond)
	op.b.data().shareWaits.TryCompleteElseWatch(op, logs...)
}

// gather acquires records for the member in every fetched partition, returning how
// many it acquired.
func (op *shareFetchOp) gather() int {
	b := op.b
	left, bytesLeft := op.maxRecords, op.maxBytes
	n := 0
	for _, p := range op.parts {
		if p.code != 0 || left <= 0 || bytesLeft <= 0 {
			continue
		}
		if p.log == nil && !b.shares.resolve(p) {
			continue
		}
		recs, got, err := b.shares.reader.Acquire(p.key, p.epoch, p.log, op.member, left, bytesLeft, n == 0)
		if err != nil {
			p.code = engineErr(err).Code
			continue
		}
		if len(got) == 0 {
			continue
		}
		for _, g := range got {
			left -= int(g.Last - g.First + 1)
			n += int(g.Last - g.First + 1)
		}
		p.records, p.acquired = recs, got
		bytesLeft -= int32(len(p.records))
	}
	return n
}

// TryComplete implements purgatory.Operation: a fetched partition has something to
// acquire (or its state finished loading, or a partition failed).
func (op *shareFetchOp) TryComplete() bool {
	s := op.b.shares
	for _, p := range op.parts {
		if p.log != nil && s.reader.Acquirable(p.key, p.epoch, p.log) {
			return op.ForceComplete()
		}
	}
	return false
}

// OnComplete implements purgatory.Operation: acquire again and answer, off the
// goroutine that completed it (an engine flusher or a timer).
func (op *shareFetchOp) OnComplete() {
	go func() {
		op.gather()
		op.respond()
	}()
}

// OnExpiration implements purgatory.Operation.
func (op *shareFetchOp) OnExpiration() {}

func (op *shareFetchOp) respond() {
	op.once.Do(func() {
		b := op.b
		resp := kmsg.NewPtrShareFetchResponse()
		resp.Version = op.req.Version
		resp.AcquisitionLockTimeoutMillis = int32(b.shares.mgr.LockDuration(op.group) / time.Millisecond)
		topicIdx := map[[16]byte]int{}
		endpoints := map[int32]bool{}
		add := func(p *sharePart) {
			if p.code == 0 && !p.hasAcks && len(p.acquired) == 0 {
				return
			}
			i, ok := topicIdx[p.key.TopicID]
			if !ok {
				i = len(resp.Topics)
				topicIdx[p.key.TopicID] = i
				t := kmsg.NewShareFetchResponseTopic()
				t.TopicID = p.key.TopicID
				resp.Topics = append(resp.Topics, t)
			}
			rp := kmsg.NewShareFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.AcknowledgeErrorCode = p.key.Partition, p.code, p.ackCode
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			if p.code == kerr.NotLeaderForPartition.Code || p.code == kerr.FencedLeaderEpoch.Code {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = p.leaderID, p.leaderEpoch
				if p.leaderID >= 0 && !endpoints[p.leaderID] {
					if host, port, rack, ok := b.route.LeaderEndpoint(listenerOf(op.r), p.leaderID); ok {
						endpoints[p.leaderID] = true
						resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareFetchResponseNodeEndpoint{NodeID: p.leaderID, Host: host, Port: port, Rack: rack})
					}
				}
			}
			if len(p.acquired) > 0 {
				rp.Records = p.records
				for _, g := range p.acquired {
					rp.AcquiredRecords = append(rp.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: g.First, LastOffset: g.Last, DeliveryCount: g.DeliveryCount})
				}
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
		}
		for _, p := range op.parts {
			add(p)
		}
		for _, p := range op.ackOnly {
			add(p)
		}
		op.r.Respond(resp)
	})
}

// shareAPIKeys are the share-group APIs, left out of ApiVersions while share groups
// are not served (features.go; Kafka 4.1 without share.version does not advertise
// them either).
var shareAPIKeys = []int16{76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}
