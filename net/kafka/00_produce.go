// Produce (key 0), versions 0-13 (v0 stays advertised: librdkafka probes for it).
//
// Behaviour, per partition, inline on the connection's read path:
//
//	records ─▶ magic 2? (else UNSUPPORTED_VERSION) ─▶ zstd before v7? (UNSUPPORTED_COMPRESSION_TYPE)
//	        ─▶ Log.Append: framing, CRC-32C (CORRUPT_MESSAGE), max.message.bytes
//	           (MESSAGE_TOO_LARGE), record count (INVALID_RECORD), idempotence: a retried
//	           duplicate answers its original offsets, a gap OUT_OF_ORDER_SEQUENCE_NUMBER,
//	           an old epoch INVALID_PRODUCER_EPOCH; offsets, leader epoch and
//	           LogAppendTime stamped in place
//	        ─▶ Log.OnDurable(last offset), per partition; when every partition of the
//	           request is durable: each HW moves to its last+1, then the fetches waiting
//	           on those logs retry, then the answer is sent.
//
// The HWs move together so that a waiting fetch woken by the first of them finds the
// records of all the request's partitions, not one partition's: a consumer of n
// partitions gets one answer per produce request instead of up to n.
//
// Records are never decoded, and the request itself is decoded without allocating: the
// API is Raw, and the handler decodes the frame with kmsg's UnsafeReadFrom into a
// ProduceRequest pooled with the op (its slices are reused; its strings and record
// bytes alias the frame, which stays valid until the answer). acks=0 answers nothing (a partition error closes the
// connection, as Kafka does, so the producer notices); acks=1 and acks=-1 answer after
// the group-committed fdatasync under the fsync policy, right after the append
// otherwise. On one node the ISR is {self}, so acks=-1 is acks=1. The read path never
// waits for the fsync: the answer is sent from the flusher's callback, so a producer's
// pipelined requests share one fdatasync. Other acks values: INVALID_REQUIRED_ACKS.
//
// v13 (KIP-516) names topics by id (UNKNOWN_TOPIC_ID when unknown).
//
// Differences from Apache Kafka: transactions are not served: a request with a
// transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition;
// produce never creates topics; record-level errors (ErrorRecords) are not reported.
package kafka

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

func init() {
	register(API{Key: 0, MinVersion: 0, MaxVersion: 13, Raw: true, Handle: handleProduce})
}

// produceOp is one Produce request waiting for its partitions to be durable. Ops are
// pooled with their response and per-partition callbacks, so a request allocates
// nothing here in steady state.
type produceOp struct {
	req      kmsg.ProduceRequest // decoded from the frame; aliases it
	r        *Request
	dp       *dataPath
	resp     kmsg.ProduceResponse
	topics   []kmsg.ProduceResponseTopic
	partBuf  []kmsg.ProduceResponseTopicPartition
	cbs      []*produceCB
	ncbs     int          // callbacks in use
	noAnswer bool         // acks=0: answered at once, nothing to send later
	pending  atomic.Int32 // partitions not yet durable, +1 while the handler runs
}

// produceCB is the durability callback of one partition; fn is bound once.
type produceCB struct {
	op      *produceOp
	sp      *kmsg.ProduceResponseTopicPartition
	l       *engine.Log
	last    int64
	durable bool
	fn      func(error)
}

func (c *produceCB) onDurable(err error) {
	if err != nil {
		c.sp.ErrorCode = engineErr(err).Code
	} else {
		c.durable = true
	}
	c.op.done()
}

var produceOps = sync.Pool{New: func() any { return new(produceOp) }}

// cb returns the i-th callback slot.
func (op *produceOp) cb(i int) *produceCB {
	for len(op.cbs) <= i {
		c := &produceCB{}
		c.fn = c.onDurable
		op.cbs = append(op.cbs, c)
	}
	return op.cbs[i]
}

// done is called once per partition (and once by the handler); the last call answers
// and recycles the op (Respond encodes synchronously).
func (op *produceOp) done() {
	if op.pending.Add(-1) != 0 {
		return
	}
	cbs := op.cbs[:op.ncbs]
	for _, c := range cbs {
		if c.durable {
			c.l.SetHighWatermark(c.last + 1)
		}
	}
	for i, c := range cbs {
		if c.durable && (i == 0 || c.l != cbs[i-1].l) {
			op.dp.waits.CheckAndComplete(c.l)
		}
	}
	for _, c := range cbs {
		c.op, c.sp, c.l, c.durable = nil, nil, nil, false
	}
	if !op.noAnswer {
		op.r.Respond(&op.resp)
	}
	op.release()
}

func (op *produceOp) release() {
	clear(op.topics)
	clear(op.partBuf)
	op.clearRequest()
	op.resp = kmsg.ProduceResponse{}
	op.r, op.dp, op.noAnswer, op.ncbs = nil, nil, false, 0
	produceOps.Put(op)
}

// clearRequest drops the decoded request's references into the frame, keeping the
// capacity of its slices for the next request.
func (op *produceOp) clearRequest() {
	ts := op.req.Topics[:cap(op.req.Topics)]
	for i := range ts {
		ps := ts[i].Partitions[:cap(ts[i].Partitions)]
		clear(ps)
		ts[i] = kmsg.ProduceRequestTopic{Partitions: ps[:0]}
	}
	op.req = kmsg.ProduceRequest{Topics: ts[:0]}
}

// decodeProduce decodes r's frame into op.req. A body that does not parse closes the
// connection, as the dispatcher does for kmsg-decoded APIs.
func decodeProduce(b *Broker, r *Request, op *produceOp) bool {
	op.req.SetVersion(r.Header.Version)
	if err := op.req.UnsafeReadFrom(r.Raw); err != nil {
		b.metrics.rejected.Inc()
		b.log.Debug("closing connection: bad request", "remote", r.Conn.RemoteAddr(), "key", r.Header.Key,
			"version", r.Header.Version, "err", fmt.Errorf("%w: Produce v%d: %w", ErrMalformedBody, r.Header.Version, err))
		r.CloseConn()
		return false
	}
	return true
}

func handleProduce(b *Broker, r *Request) {
	v := r.Header.Version
	op := produceOps.Get().(*produceOp)
	if !decodeProduce(b, r, op) {
		op.release()
		return
	}
	req := &op.req
	op.r, op.dp, op.noAnswer = r, b.data(), req.Acks == 0
	op.resp.Default()
	op.resp.SetVersion(v)
	op.pending.Store(1)

	var fixed *kerr.Error
	switch {
	case req.TransactionID != nil:
		fixed = kerr.TransactionalIDAuthorizationFailed
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		fixed = kerr.InvalidRequiredAcks
	}
	nparts := 0
	for i := range req.Topics {
		nparts += len(req.Topics[i].Partitions)
	}
	if cap(op.topics) < len(req.Topics) {
		op.topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	}
	if cap(op.partBuf) < nparts {
		op.partBuf = make([]kmsg.ProduceResponseTopicPartition, nparts)
	}
	op.topics, op.partBuf = op.topics[:len(req.Topics)], op.partBuf[:nparts]
	op.resp.Topics = op.topics
	failed := false
	k := 0
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &op.topics[i]
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = op.partBuf[k : k+len(rt.Partitions) : k+len(rt.Partitions)]
		k += len(rt.Partitions)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Partition, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = rp.Partition, -1, -1, -1
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
			err := fixed
			var l *engine.Log
			var res engine.AppendResult
			if err == nil {
				l, res, err = b.producePartition(v, rt, rp)
			}
			if err != nil {
				failed = true
				sp.ErrorCode = err.Code
				continue
			}
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
			c := op.cb(op.ncbs)
			op.ncbs++
			c.op, c.sp, c.l, c.last = op, sp, l, res.LastOffset
			op.pending.Add(1)
			l.OnDurable(res.LastOffset, c.fn)
		}
	}
	if req.Acks == 0 {
		// The appends are made; durability and the HW follow in the callbacks, and
		// the last of them recycles the op.
		if failed {
			r.CloseConn()
		} else {
			r.NoResponse()
		}
	}
	op.done()
}

// producePartition validates and appends one partition's records.
func (b *Broker) producePartition(v int16, rt *kmsg.ProduceRequestTopic, rp *kmsg.ProduceRequestTopicPartition) (*engine.Log, engine.AppendResult, *kerr.Error) {
	var p Partition
	var err error
	if v >= 13 {
		p, err = b.LookupPartitionByID(rt.TopicID, rp.Partition)
	} else {
		p, err = b.LookupPartition(rt.Topic, rp.Partition)
	}
	if err != nil {
		return nil, engine.AppendResult{}, engineErr(err)
	}
	recs := rp.Records
	for pos := 0; pos+engine.BatchHeaderSize <= len(recs); {
		// Byte 16 is the magic in batches v2 and in message sets v0/v1 alike.
		if recs[pos+16] != 2 {
			return nil, engine.AppendResult{}, kerr.UnsupportedVersion
		}
		h, herr := engine.ParseBatchHeader(recs[pos:])
		if herr != nil {
			break // Append reports it
		}
		if v < 7 && h.Compression() == 4 {
			return nil, engine.AppendResult{}, kerr.UnsupportedCompressionType
		}
		if h.Transactional() || h.Control() {
			return nil, engine.AppendResult{}, kerr.TransactionalIDAuthorizationFailed
		}
		pos += int(h.Size())
	}
	if len(recs) > 16 && len(recs) < engine.BatchHeaderSize && recs[16] != 2 {
		return nil, engine.AppendResult{}, kerr.UnsupportedVersion
	}
	res, err := p.Log.Append(recs, engine.AppendOptions{LeaderEpoch: p.Image.LeaderEpoch})
	if err != nil {
		b.log.Debug("produce refused", "topic", p.Topic.Name, "partition", rp.Partition, "err", err)
		return nil, res, engineErr(err)
	}
	return p.Log, res, nil
}
