// Fetch (key 1), versions 4-18.
//
// v0-v3 carry message sets of magic 0/1, which this broker never stores: they are not
// served (and not advertised). The API is Raw: the handler decodes the frame with
// kmsg's UnsafeReadFrom into a FetchRequest pooled with the op (slices reused, strings
// aliasing the frame, which stays valid until the answer; a session copies the names
// it keeps). The response is framed by hand (fetch_frame.go) so that record bytes
// leave the segment files with sendfile. An op answered at once goes back to its pool;
// one that was parked is left to the collector, as the purgatory may still list it.
//
// Behaviour:
//   - Per partition, in request (or session) order: the engine's Read from FetchOffset up
//     to the high watermark (READ_COMMITTED: the last stable offset, which is the HW as
//     no transactions exist), within
//     PartitionMaxBytes and what is left of MaxBytes (capped at Kafka's fetch.max.bytes,
//     55 MiB). Only whole batches are sent, from one segment per partition; the first
//     partition with data gets at least one batch even when it exceeds the limits
//     (KIP-74).
//   - OFFSET_OUT_OF_RANGE when FetchOffset is below the log start or above the LEO; an
//     offset between HW and LEO answers no records.
//   - KIP-320: CurrentLeaderEpoch newer than the partition's: UNKNOWN_LEADER_EPOCH,
//     older: FENCED_LEADER_EPOCH. v12+: a LastFetchedEpoch that the log contradicts
//     answers DivergingEpoch and no records.
//   - KIP-951: NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH and UNKNOWN_LEADER_EPOCH
//     carry the partition's CurrentLeader (v12+) and, from v16, the answer carries
//     the endpoints of the leaders they name (NodeEndpoints).
//   - A follower (ReplicaID >= 0, or ReplicaState from v15) is served through
//     replication's FollowerFetch, per partition: it checks the leader epoch, answers a
//     diverging epoch, records the follower's fetch offset (which may move the HW and
//     grow the ISR) and says how far to read: up to the LEO. The bytes leave with the
//     same framing and sendfile path as a consumer's. OFFSET_OUT_OF_RANGE to a follower
//     carries the log start and HW, so one behind the log start can start over there;
//     below the local log start of a tiered partition, from v16, the answer is
//     OFFSET_MOVED_TO_TIERED_STORAGE with the whole log's start (FollowerFetch).
//     A follower's long poll is retried by every append to the logs it watches.
//   - Long poll: when less than MinBytes is available and nothing failed, the fetch
//     waits in the broker's purgatory, watched under every log it reads, for at most
//     MaxWaitMs. Each append that moves a watched log's HW retries it; it is answered
//     as soon as MinBytes are available, else when the timing wheel expires it. A fetch
//     whose offset lies on a segment before the one holding its bound (the HW, LSO or
//     LEO) is answered at once (Kafka's DelayedFetch): a read ends at its segment's
//     end, so a compacted older segment never gathers MinBytes however much follows.
//   - v7+: incremental fetch sessions (KIP-227, net/fetchsession), with their quiet
//     partitions, which requests leave out until their log changes.
//   - Tiered storage (KIP-405): a consumer's FetchOffset below the local log start of a
//     tiered partition is read from remote storage through the partition handle
//     (replication/tiered: a bounded pool of readers, a chunk cache) and answered at
//     once, with READ_COMMITTED the aborted transactions of the copies' transaction
//     indexes; LogStartOffset is then the whole log's start. The read is waited for up to
//     remote.fetch.max.wait.ms (DelayedRemoteFetch), then the partition is answered
//     empty, without an error, while the read goes on into the cache. Over
//     remote.log.manager.fetch.max.bytes.per.second nothing is read: empty, and the fetch
//     waits as a long poll. A store that cannot serve the read: KAFKA_STORAGE_ERROR.
//
// Differences from Apache Kafka: no preferred read replica (-1); the wait for a remote
// read holds the request's goroutine (Kafka parks a DelayedRemoteFetch in a purgatory).
// READ_COMMITTED answers carry AbortedTransactions, from the logs' transaction indexes
// and, below the local log start, the copies'.
//
// Quotas (net/quota; quotas.go), as KafkaApis: a consumer's MaxBytes is capped by its
// consumer_byte_rate (quota × (samples − 1) × sample window) and MinBytes by MaxBytes;
// the answer's size (estimated before framing, as Kafka measures it before any
// conversion) is recorded against the quota, and a consumer over it (or over its
// request_percentage) is answered with throttle_time_ms and no partitions (the top-level
// error, if any; an incremental session's id, whose memory of what was sent stays as
// it was; a session the request opened is dropped and the answer names none), those
// bytes taken back out of the rate, and its connection muted for the throttle time.
package kafka

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/fetchsession"
	"github.com/samsa-broker/samsa/net/quota"
	"github.com/samsa-broker/samsa/net/wire"
	"github.com/samsa-broker/samsa/purgatory"
	"github.com/samsa-broker/samsa/replication"
)

func init() {
	register(API{Key: 1, MinVersion: 4, MaxVersion: 18, Raw: true, Handle: handleFetch, Authz: authz.Fetch})
}

// fetchMaxBytes is Kafka's fetch.max.bytes default: the cap on a response's records.
const fetchMaxBytes = 55 << 20

// fetchPart is one partition of a fetch.
type fetchPart struct {
	topic       string
	id          metadata.UUID
	partition   int32
	offset      int64
	maxBytes    int32
	curEpoch    int32
	lastFetched int32
	sp          *fetchsession.Part // the session's entry, nil when sessionless

	// resolved when the request arrives
	log                   *engine.Log
	rep                   *replication.Partition // its replica here (this node leads it)
	leaderID, leaderEpoch int32
	err                   *kerr.Error

	// set by gather
	code              int16
	hw, lso, logStart int64
	slice             engine.Slice
	remote            engine.Buffers // records read from remote storage (tiered storage), sent instead of slice
	diverging         bool
	divEpoch          int32
	divEnd            int64
	leo               int64 // a follower's: the log end FollowerFetch gave
	include           bool
	aborted           []engine.AbortedTxn // READ_COMMITTED: the aborted transactions overlapping the records
}

// fetchOp is one Fetch request, answered at once or from the purgatory.
type fetchOp struct {
	purgatory.Delayed
	req       kmsg.FetchRequest // decoded from the frame; aliases it
	logs      []*engine.Log     // the logs a parked fetch is watched under
	b         *Broker
	r         *Request
	v         int16
	replica   bool  // a follower's fetch
	replicaID int32 // the follower and its broker epoch (-1: unknown)
	repEpoch  int64
	isolation int8
	minBytes  int32
	maxBytes  int32
	sess      *fetchsession.Session
	full      bool
	idle      []fetchsession.Idle // choose: the parts that may go quiet
	parked    bool                // watched in the purgatory: completion may run on a flusher
	parts     []fetchPart

	// net/quota: the consumer, for consumer_byte_rate, and where frame wrote
	// throttle_time_ms.
	quota      quota.Client
	throttleAt int
	throttled  bool // the answer carries no partitions
}

var fetchOps = sync.Pool{New: func() any { return new(fetchOp) }}

// recycle returns an op that was answered without being parked to the pool.
func (op *fetchOp) recycle() {
	parts := op.parts[:cap(op.parts)]
	clear(parts)
	logs := op.logs[:cap(op.logs)]
	clear(logs)
	req := op.req
	clearFetchRequest(&req)
	idle := op.idle[:cap(op.idle)]
	clear(idle)
	*op = fetchOp{req: req, parts: parts[:0], logs: logs[:0], idle: idle[:0]}
	fetchOps.Put(op)
}

// clearFetchRequest drops a decoded request's references into its frame, keeping the
// capacity of its slices.
func clearFetchRequest(req *kmsg.FetchRequest) {
	ts := req.Topics[:cap(req.Topics)]
	for i := range ts {
		ps := ts[i].Partitions[:cap(ts[i].Partitions)]
		clear(ps)
		ts[i] = kmsg.FetchRequestTopic{Partitions: ps[:0]}
	}
	fs := req.ForgottenTopics[:cap(req.ForgottenTopics)]
	for i := range fs {
		fs[i] = kmsg.FetchRequestForgottenTopic{Partitions: fs[i].Partitions[:0]}
	}
	*req = kmsg.FetchRequest{Topics: ts[:0], ForgottenTopics: fs[:0]}
}

func handleFetch(b *Broker, r *Request) {
	v := r.Header.Version
	op := fetchOps.Get().(*fetchOp)
	req := &op.req
	req.SetVersion(v)
	if err := req.UnsafeReadFrom(r.Raw); err != nil {
		b.metrics.Rejected()
		b.log.Debug("closing connection: bad request", "remote", r.Conn.RemoteAddr(), "key", r.Header.Key,
			"version", v, "err", fmt.Errorf("%w: Fetch v%d: %w", ErrMalformedBody, v, err))
		r.CloseConn()
		op.recycle()
		return
	}
	dp := b.data()
	op.b, op.r, op.v, op.isolation, op.minBytes = b, r, v, req.IsolationLevel, req.MinBytes
	op.maxBytes = min(req.MaxBytes, fetchMaxBytes)
	replicaID, repEpoch := req.ReplicaID, int64(-1)
	if v >= 15 {
		replicaID, repEpoch = req.ReplicaState.ID, req.ReplicaState.Epoch
	}
	op.replica, op.replicaID, op.repEpoch = replicaID >= 0, replicaID, repEpoch
	op.quota = quotaClientOf(r)
	if !op.replica {
		_, im := b.Image()
		op.maxBytes = min(op.maxBytes, b.quotas.FetchMaxBytes(im.ClientQuotas(), op.quota)) // net/quota
		op.minBytes = min(op.minBytes, op.maxBytes)
	}
	r.ExemptFromQuota(op.replica) // a follower's fetch is outside the request quota

	now := time.Now()
	sess, full, serr := dp.sessions.Open(req, v, now)
	if serr != nil {
		op.respondError(serr.Code)
		op.recycle()
		return
	}
	op.sess, op.full = sess, full
	if sess != nil {
		op.collectSession(now)
	} else {
		n := 0
		for i := range req.Topics {
			n += len(req.Topics[i].Partitions)
		}
		op.parts = growParts(op.parts, n)
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				op.parts = append(op.parts, fetchPart{topic: t.Topic, id: t.TopicID, partition: p.Partition,
					offset: p.FetchOffset, maxBytes: p.PartitionMaxBytes, curEpoch: p.CurrentLeaderEpoch, lastFetched: p.LastFetchedEpoch})
			}
		}
	}
	for i := range op.parts {
		p := &op.parts[i]
		if op.resolve(p) {
			op.logs = append(op.logs, p.log)
		}
	}

	bytes, done := op.gather()
	quiet := op.quietSession()
	if quiet && op.replica && b.repl != nil {
		sess.SetClock(b.repl.Now()) // the fetches of quiet parts count from now
	}
	if done || bytes >= int64(op.minBytes) || req.MaxWaitMillis <= 0 || len(op.logs) == 0 && !(quiet && sess.HasQuiet()) {
		op.respond()
		op.recycle()
		return
	}
	op.releaseSlices()
	op.Init(op, time.Duration(req.MaxWaitMillis)*time.Millisecond)
	op.parked = true
	// Read before the session knows op: from then on a wake may complete it, and
	// its drop clears op.logs (under the op's lock, which TryCompleteElseWatch
	// takes only after reading its arguments).
	logs := op.logs
	if quiet {
		sess.Park(op) // a quiet part that wakes completes it
	}
	dp.waits.TryCompleteElseWatch(op, logs...)
}

// collectSession sets op's parts to those its session serves now: all of them, or
// those not quiet.
func (op *fetchOp) collectSession(now time.Time) {
	op.parts = op.parts[:0]
	op.sess.Collect(op.quietSession(), op.b.meta.Image(), now, func(sp *fetchsession.Part, f fetchsession.Fetch) {
		op.parts = append(op.parts, fetchPart{topic: f.Topic, id: f.ID, partition: f.Partition,
			offset: f.Offset, maxBytes: f.MaxBytes, curEpoch: f.CurrentLeaderEpoch, lastFetched: f.LastFetchedEpoch, sp: sp})
	})
}

// quietSession reports whether op is a follower's fetch in its own session, or a
// consumer's in a consumer's session, whose idle partitions go quiet.
func (op *fetchOp) quietSession() bool {
	if op.sess == nil {
		return false
	}
	if op.replica {
		return op.sess.ReplicaID() >= 0 && op.sess.ReplicaID() == op.replicaID
	}
	return op.sess.ReplicaID() == -1 && op.replicaID == -1
}

// growParts returns parts emptied, with room for n.
func growParts(parts []fetchPart, n int) []fetchPart {
	if cap(parts) < n {
		return make([]fetchPart, 0, n)
	}
	return parts[:0]
}

// resolve finds p's log; false (p.err set) when it cannot be read here.
func (op *fetchOp) resolve(p *fetchPart) bool {
	var part Partition
	var err error
	if op.v >= 13 {
		part, err = op.b.parts.LookupByID(p.id, p.partition)
	} else {
		part, err = op.b.parts.Lookup(p.topic, p.partition)
	}
	p.leaderID, p.leaderEpoch = part.Image.Leader, part.Image.LeaderEpoch
	if err != nil {
		p.err = engineErr(err)
		if part.Topic == nil {
			p.leaderID, p.leaderEpoch = -1, -1
		} else {
			p.leaderID, p.leaderEpoch = op.b.parts.LeaderOf(engine.TopicPartition{Topic: part.Topic.Name, Partition: part.Index}, part.Image)
		}
		return false
	}
	rep, ke := part.Leader()
	if ke != nil {
		p.err = ke
		p.leaderID, p.leaderEpoch = op.b.parts.LeaderOf(engine.TopicPartition{Topic: part.Topic.Name, Partition: part.Index}, part.Image)
		return false
	}
	p.rep = rep
	if !op.replica {
		if err := rep.CheckLeader(p.curEpoch); err != nil {
			p.err = engineErr(err)
			p.leaderID, p.leaderEpoch = op.b.parts.LeaderOf(rep.TopicPartition(), part.Image)
			return false
		}
	} // a follower's epoch is FollowerFetch's to check, in gather
	p.log = part.Log
	return true
}

// upTo is the offset reads stop at: a follower's, the log end; READ_COMMITTED's, the
// last stable offset; READ_UNCOMMITTED's, the high watermark.
func (op *fetchOp) upTo(l *engine.Log) int64 {
	switch {
	case op.replica:
		return l.LogEndOffset()
	case op.isolation == 1:
		return l.LastStableOffset()
	}
	return l.HighWatermark()
}

// gather reads every partition, pinning slices. done reports a condition that answers
// the fetch at once (an error, a diverging epoch).
func (op *fetchOp) gather() (bytes int64, done bool) {
	remaining := int64(op.maxBytes)
	minOne := true
	for i := range op.parts {
		p := &op.parts[i]
		p.code, p.hw, p.lso, p.logStart, p.diverging, p.aborted, p.remote = 0, -1, -1, -1, false, p.aborted[:0], engine.Buffers{}
		if p.err != nil {
			p.code = p.err.Code
			done = true
			continue
		}
		l := p.log
		var upTo int64
		if op.replica {
			// A parked fetch completing was recorded when it arrived; its offset may
			// predate a removal and re-addition of the replica (FollowerReread).
			fetch := p.rep.FollowerFetch
			if op.parked {
				fetch = p.rep.FollowerReread
			}
			res, err := fetch(op.replicaID, op.repEpoch, p.offset, p.lastFetched, p.curEpoch, op.v)
			p.hw, p.logStart = res.HighWatermark, res.LogStartOffset
			p.lso = p.hw
			if err != nil {
				p.code = engineErr(err).Code
				if p.code == kerr.NotLeaderForPartition.Code {
					p.leaderID, p.leaderEpoch = op.b.parts.LeaderOf(p.rep.TopicPartition(), metadata.PartitionImage{Leader: -1, LeaderEpoch: -1})
				}
				done = true
				continue
			}
			if res.Diverging {
				p.diverging, p.divEpoch, p.divEnd = true, res.DivergingEpoch, res.DivergingEndOffset
				done = true
				continue
			}
			upTo = res.LogEndOffset
			p.leo = upTo
		} else {
			p.hw, p.lso = l.HighWatermark(), l.LastStableOffset()
			upTo, p.logStart = p.hw, p.rep.LogStartOffset() // the whole log's: below the local start with tiered storage
			if op.isolation == 1 {
				upTo = p.lso
			}
			if p.lastFetched >= 0 {
				fe, end := p.rep.EndOffsetForEpoch(p.lastFetched)
				if fe >= 0 && (fe < p.lastFetched || end < p.offset) {
					p.diverging, p.divEpoch, p.divEnd = true, fe, end
					done = true
					continue
				}
			}
		}
		limit := min(int64(p.maxBytes), remaining)
		if limit <= 0 {
			if !minOne {
				continue
			}
			limit = 0
		}
		if !op.replica && p.offset < l.LogStartOffset() && p.rep.Tiered() {
			// Below the local log: from remote storage (tiered storage), answered at once
			// unless over the remote read quota (a long poll then, as Kafka's).
			r, err := p.rep.FetchRemote(p.offset, int32(limit), op.isolation == 1)
			if done = done || !r.Throttled; err != nil {
				p.code = engineErr(err).Code
				continue
			}
			if !minOne && int64(r.Records.Len()) > limit {
				continue // a first batch over the limit is the first partition's alone (Kafka's minOneMessage)
			}
			p.remote, p.aborted = r.Records, append(p.aborted, r.Aborted...)
			minOne = minOne && r.Records.Len() == 0
			remaining -= int64(r.Records.Len())
			bytes += int64(r.Records.Len())
			continue
		}
		s, err := l.Read(p.offset, int32(limit), upTo, minOne)
		if err != nil {
			p.code = engineErr(err).Code
			done = true
			continue
		}
		if !done && l.OnOlderSegment(p.offset, upTo) {
			done = true // the read stopped at a segment's end: answer what there is now
		}
		if s.Size > 0 {
			p.slice = s
			minOne = false
			remaining -= int64(s.Size)
			bytes += int64(s.Size)
			if op.isolation == 1 && !op.replica {
				// Bounded by the LSO rather than the end of the records sent (which the
				// slice does not name): a superset, which clients ignore past their data.
				p.aborted = l.AbortedTransactions(p.offset, upTo, p.aborted)
			}
		}
	}
	return bytes, done
}

func (op *fetchOp) releaseSlices() {
	for i := range op.parts {
		op.parts[i].slice.Release()
	}
}

// TryComplete implements purgatory.Operation: MinBytes available, or a partition whose
// fetch offset fell out of range (DeleteRecords, truncation).
func (op *fetchOp) TryComplete() bool {
	if op.sess != nil && op.sess.Woken() && op.quietSession() {
		return op.ForceComplete() // a quiet part woke: the next request serves it
	}
	var bytes int64
	for i := range op.parts {
		p := &op.parts[i]
		l := p.log
		if l == nil {
			continue
		}
		if p.offset < l.LogStartOffset() && !op.replica && p.rep.Tiered() {
			continue // read from remote storage over its quota: waits out MaxWaitMs
		}
		if p.offset < l.LogStartOffset() || p.offset > l.LogEndOffset() {
			return op.ForceComplete()
		}
		if op.upTo(l) <= p.offset {
			continue
		}
		if op.minBytes <= 1 || l.OnOlderSegment(p.offset, op.upTo(l)) {
			return op.ForceComplete()
		}
		s, err := l.Read(p.offset, max(p.maxBytes, 0), op.upTo(l), true)
		if err != nil {
			return op.ForceComplete()
		}
		bytes += int64(s.Size)
		s.Release()
		if bytes >= int64(op.minBytes) {
			return op.ForceComplete()
		}
	}
	return false
}

// OnComplete implements purgatory.Operation: read again and answer. A parked fetch
// is completed by whoever moved the HW: under the fsync policy that is the engine's
// flusher, whose next group commit must not wait for fetch answers to be built, so the
// answer is built on a goroutine of its own.
//
// A parked fetch is not recycled: the watch lists of its other logs still hold it until
// the purgatory sweeps them, which is up to 1,000 completed fetches (Kafka's purge
// interval) and, once fetches stop, indefinitely. Once answered it drops its partitions
// (one fetchPart per partition of the request) and its decoded request, which aliases
// the request's frame: otherwise each lingering fetch keeps both, and with 10,000
// partitions they were most of the broker's heap (BENCHMARKS.md, "partitions-10k under
// load").
func (op *fetchOp) OnComplete() {
	if op.parked {
		go func() {
			op.finish()
			op.drop()
		}()
		return
	}
	op.finish()
}

// drop releases what an answered parked fetch references, once no TryComplete of it runs.
func (op *fetchOp) drop() {
	op.Quiesce()
	op.parts, op.logs, op.idle = nil, nil, nil
	op.req = kmsg.FetchRequest{}
	op.r, op.sess = nil, nil
}

func (op *fetchOp) finish() {
	if op.quietSession() {
		op.sess.Unpark(op)
		if op.parked && !op.replica && op.sess.Woken() {
			// A consumer's quiet partition woke: answer with it (and any other
			// woken since), not with nothing, so the wake costs the consumer one
			// round trip, not two. A follower's are served by its next request,
			// where replication records the fetch. Parked, finish runs on its own
			// goroutine: Quiesce may wait out a TryComplete reading the old parts.
			op.Quiesce()
			op.collectSession(time.Now())
			for i := range op.parts {
				op.resolve(&op.parts[i])
			}
		}
	}
	op.gather()
	op.respond()
}

// OnExpiration implements purgatory.Operation.
func (op *fetchOp) OnExpiration() {}

// respondError answers with a top-level error and no partitions.
func (op *fetchOp) respondError(code int16) {
	op.sess = nil
	op.parts = op.parts[:0]
	op.respondWith(code)
}

func (op *fetchOp) respond() { op.respondWith(0) }

// respondWith frames the answer and sends it; a consumer over its quota gets an
// empty one (net/quota).
func (op *fetchOp) respondWith(code int16) {
	op.countErrors(code)
	var t int32
	if !op.replica {
		_, im := op.b.Image()
		if t = op.r.MuteFor(op.b.quotas.Fetch(im.ClientQuotas(), op.quota, op.responseSize())); t > 0 {
			op.throttled = true
			if op.full && op.sess != nil {
				op.b.data().sessions.Remove(op.sess.ID()) // Kafka opens it only with an answer that has data
				op.sess = nil
			}
		}
	}
	fr := op.frame(code)
	if t > 0 {
		binary.BigEndian.PutUint32(fr.Bytes()[op.throttleAt:], uint32(t))
	}
	op.r.RespondRaw(fr.Response())
}

// responseSize estimates the answer's size before it is framed: the records gathered
// and a partition's fixed fields for each partition the answer would carry.
func (op *fetchOp) responseSize() int64 {
	n := int64(32)
	for i := range op.parts {
		p := &op.parts[i]
		if op.sess == nil || op.full || p.slice.Size > 0 || p.remote.Len() > 0 || p.code != 0 || p.diverging {
			n += 64 + int64(len(p.topic)) + int64(p.slice.Size) + int64(p.remote.Len())
		}
	}
	return n
}

// frame writes the answer (see fetch_frame.go), handing the gathered slices to it.
func (op *fetchOp) frame(code int16) *wire.FetchFrame {
	v, flex := op.v, op.v >= 12
	fr := wire.GetFetchFrame()
	b := wire.AppendResponseHeader(fr.Bytes()[:0], &op.r.Header)
	op.throttleAt = len(b)
	b = wire.AppendI32(b, 0) // throttle (respondWith fills it in)
	if v >= 7 {
		b = wire.AppendI16(b, code)
		var sid int32
		if op.sess != nil {
			sid = op.sess.ID()
		}
		b = wire.AppendI32(b, sid)
	}
	op.choose()

	// Topics are runs of consecutive included partitions of one topic.
	same := func(a, c *fetchPart) bool {
		if v >= 13 {
			return a.id == c.id
		}
		return a.topic == c.topic
	}
	var prev *fetchPart
	ntopics := 0
	for i := range op.parts {
		p := &op.parts[i]
		if !p.include {
			continue
		}
		if prev == nil || !same(prev, p) {
			ntopics++
		}
		prev = p
	}
	b = wire.AppendArrayLen(b, flex, ntopics)
	for i := 0; i < len(op.parts); {
		p := &op.parts[i]
		if !p.include {
			i++
			continue
		}
		n, j := 0, i
		for ; j < len(op.parts); j++ {
			q := &op.parts[j]
			if !q.include {
				continue
			}
			if !same(p, q) {
				break
			}
			n++
		}
		if v >= 13 {
			b = append(b, p.id[:]...)
		} else {
			b = wire.AppendStr(b, flex, p.topic)
		}
		b = wire.AppendArrayLen(b, flex, n)
		for k := i; k < j; k++ {
			q := &op.parts[k]
			if !q.include {
				continue
			}
			b = op.appendPartition(fr, b, q)
		}
		if flex {
			b = append(b, 0)
		}
		i = j
	}
	if flex {
		b = op.appendNodeEndpoints(b)
	}
	fr.SetBytes(b)
	op.releaseSlices() // those not spliced: none, unless an answer was cut short
	return fr
}

// appendNodeEndpoints writes the answer's tagged fields: from v16, NodeEndpoints
// (tag 0, KIP-951), the address of every leader named by a partition's
// CurrentLeader, so that a consumer moves to it without asking for metadata first
// (franz-go uses a hint only with its leader's endpoint); none, or an earlier
// version: no tags.
func (op *fetchOp) appendNodeEndpoints(b []byte) []byte {
	var eps []wire.NodeEndpoint
	if op.v >= 16 && op.b != nil { // the framing tests frame ops of no broker
		for i := range op.parts {
			p := &op.parts[i]
			if !p.include || p.leaderID < 0 || !fetchLeaderError(p.code) ||
				slices.ContainsFunc(eps, func(e wire.NodeEndpoint) bool { return e.NodeID == p.leaderID }) {
				continue
			}
			if host, port, rack, ok := op.b.route.LeaderEndpoint(listenerOf(op.r), p.leaderID); ok {
				eps = append(eps, wire.NodeEndpoint{NodeID: p.leaderID, Host: host, Port: port, Rack: rack})
			}
		}
	}
	return wire.AppendFetchTags(b, eps)
}

// fetchLeaderError reports whether a partition's error code names its current leader
// (CurrentLeader, tag 1).
func fetchLeaderError(code int16) bool {
	return code == kerr.NotLeaderForPartition.Code || code == kerr.FencedLeaderEpoch.Code || code == kerr.UnknownLeaderEpoch.Code
}

// choose marks the partitions the answer carries: all of them in a full answer; in
// an incremental one those with records, an error or a changed HW, LSO or log start.
// It updates the session's memory of what was sent.
func (op *fetchOp) choose() {
	if op.throttled {
		for i := range op.parts {
			op.parts[i].include = false
		}
		return
	}
	if op.sess == nil {
		for i := range op.parts {
			op.parts[i].include = true
		}
		return
	}
	quiet := op.quietSession()
	op.idle = op.idle[:0]
	op.sess.Lock()
	for i := range op.parts {
		p := &op.parts[i]
		st := fetchsession.Sent{HighWatermark: p.hw, LastStableOffset: p.lso, LogStartOffset: p.logStart}
		var live bool
		p.include, live = p.sp.CarryLocked(op.full || p.slice.Size > 0 || p.remote.Len() > 0 || p.code != 0 || p.diverging, st)
		if quiet && live && p.rep != nil && p.code == 0 && !p.diverging && p.slice.Size == 0 && p.remote.Len() == 0 && op.atEnd(p) {
			op.idle = append(op.idle, fetchsession.Idle{Part: p.sp, Log: p.log, Rep: p.rep, Offset: p.offset, Sent: st})
		}
	}
	op.sess.Unlock()
	if len(op.idle) > 0 {
		op.sess.Quiet(op.idle) // before the answer is sent: the next request finds them quiet
	}
}

// atEnd reports whether p's fetch offset is where its reader's records end: a
// follower's at the log end, a consumer's at the HW (read_committed: the LSO) of a
// partition this broker leads (only a leader announces its HW moves).
func (op *fetchOp) atEnd(p *fetchPart) bool {
	switch {
	case op.replica:
		return p.offset == p.leo
	case p.rep.Role() != replication.RoleLeader:
		return false
	case op.isolation == 1:
		return p.offset == p.lso
	}
	return p.offset == p.hw
}

// appendPartition frames one partition, splicing its records in.
func (op *fetchOp) appendPartition(fr *wire.FetchFrame, b []byte, p *fetchPart) []byte {
	if p.slice.Size > 0 || p.remote.Len() > 0 {
		op.countFetched(p) // metrics.go, net/brokermetrics
	}
	b = fr.AppendPartition(b, op.v, op.isolation == 1, &wire.FetchPartition{
		Partition: p.partition, ErrorCode: p.code, HighWatermark: p.hw, LastStableOffset: p.lso,
		LogStartOffset: p.logStart, Aborted: p.aborted, Records: p.slice, RecordBytes: p.remote,
		Diverging: p.diverging, DivergingEpoch: p.divEpoch, DivergingEndOffset: p.divEnd,
		CurrentLeader: fetchLeaderError(p.code), LeaderID: p.leaderID, LeaderEpoch: p.leaderEpoch,
	})
	p.slice, p.remote = engine.Slice{}, engine.Buffers{}
	return b
}

// countErrors adds the answer's codes to samsa_request_errors_total: the top-level
// one and every partition's (the answer is framed by hand, so the reflective count
// of Request.Respond does not see it).
func (op *fetchOp) countErrors(code int16) {
	op.r.CountError(code, 1)
	for i := range op.parts {
		if e := op.parts[i].err; e != nil {
			op.r.CountError(e.Code, 1)
		}
	}
}
