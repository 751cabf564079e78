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
//	        ─▶ Log.OnDurable(last offset): the HW moves to last+1, waiting fetches retry,
//	           and when every partition is durable the answer is sent.
//
// Records are never decoded. acks=0 answers nothing (a partition error closes the
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
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

func init() {
	register(API{Key: 0, MinVersion: 0, MaxVersion: 13, Handle: handleProduce})
}

// produceOp is one Produce request waiting for its partitions to be durable.
type produceOp struct {
	r       *Request
	resp    *kmsg.ProduceResponse
	pending atomic.Int32 // partitions not yet durable, +1 while the handler runs
}

// done is called once per partition (and once by the handler); the last call answers.
func (op *produceOp) done() {
	if op.pending.Add(-1) == 0 {
		op.r.Respond(op.resp)
	}
}

func handleProduce(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ProduceRequest)
	v := r.Header.Version
	dp := b.data()
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	op := &produceOp{r: r, resp: resp}
	op.pending.Store(1)

	var fixed *kerr.Error
	switch {
	case req.TransactionID != nil:
		fixed = kerr.TransactionalIDAuthorizationFailed
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		fixed = kerr.InvalidRequiredAcks
	}
	failed := false
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
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
			op.pending.Add(1)
			last := res.LastOffset
			l.OnDurable(last, func(err error) {
				if err != nil {
					sp.ErrorCode = engineErr(err).Code
				} else {
					dp.advance(l, last+1)
				}
				op.done()
			})
		}
	}
	if req.Acks == 0 {
		// The appends are made; durability and the HW follow in the callbacks.
		if failed {
			r.CloseConn()
		} else {
			r.NoResponse()
		}
		return
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
