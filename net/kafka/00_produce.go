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
//	        (leadership and, for acks=-1, min.insync.replicas are replication's: a
//	        partition this node does not lead is NOT_LEADER_OR_FOLLOWER with the current
//	        leader and its endpoint (KIP-951, v10+); fewer in-sync replicas than
//	        min.insync.replicas is NOT_ENOUGH_REPLICAS, nothing appended)
//	        ─▶ replication.Produce: Log.OnDurable(last offset), per partition; when every
//	           partition of the request is durable: each HW moves (the leader's durable
//	           end, capped by the ISR's fetch offsets), then the fetches waiting on those
//	           logs retry, then acks=-1 waits for the HW to pass each partition's records
//	           (in replication's purgatory, up to TimeoutMillis: REQUEST_TIMED_OUT;
//	           NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
//	           min.insync.replicas meanwhile), then the answer is sent.
//
// The HWs move together so that a waiting fetch woken by the first of them finds the
// records of all the request's partitions, not one partition's: a consumer of n
// partitions gets one answer per produce request instead of up to n.
//
// Records are never decoded, and the request itself is decoded without allocating: the
// API is Raw, and the handler decodes the frame with kmsg's UnsafeReadFrom into a
// ProduceRequest pooled with the op (its slices are reused; its strings and record
// bytes alias the frame, which stays valid until the answer). acks=0 answers nothing (a
// partition error closes the connection, as Kafka does, so the producer notices); acks=1
// answers after the group-committed fdatasync under the fsync policy, right after the
// append otherwise; acks=-1 when the HW passes the records. On one node the ISR is
// {self}, so acks=-1 is acks=1. The read path never waits for the fsync or the ISR: the
// answer is sent from the flusher's callback (or whatever moved the HW), so a
// producer's pipelined requests share one fdatasync. Other acks values:
// INVALID_REQUIRED_ACKS.
//
// v13 (KIP-516) names topics by id (UNKNOWN_TOPIC_ID when unknown).
//
// Records without a key on a compacted topic are refused with INVALID_RECORD and
// their record errors (KIP-467, keylessRecords): the one case where records are
// decoded. Transactional produces are checked in produce_txn.go.
//
// Differences from Apache Kafka: produce never creates topics; record errors are
// reported only for keyless records on compacted topics (Kafka also reports, per
// record, invalid timestamps and such).
package kafka

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/metadatacache"
	"github.com/samsa-broker/samsa/net/quota"
	"github.com/samsa-broker/samsa/replication"
)

func init() {
	register(API{Key: 0, MinVersion: 0, MaxVersion: 13, Raw: true, Handle: handleProduce, Authz: authz.Produce})
}

// produceOp is one Produce request waiting for its partitions. Ops are pooled with
// their response and their replication.Produce (whose per-partition callbacks are
// bound once), so a request allocates nothing here in steady state. An op whose Produce
// waited in replication's purgatory is not pooled again (the purgatory may still list
// it).
type produceOp struct {
	req      kmsg.ProduceRequest // decoded from the frame; aliases it
	r        *Request
	resp     kmsg.ProduceResponse
	topics   []kmsg.ProduceResponseTopic
	partBuf  []kmsg.ProduceResponseTopicPartition
	slots    []*kmsg.ProduceResponseTopicPartition // the answer of pr.Part(i)
	pr       replication.Produce
	fin      func() // op.finish, bound once
	noAnswer bool   // acks=0: answered at once, nothing to send later
}

var produceOps = sync.Pool{New: func() any { return new(produceOp) }}

// finish runs once every partition is settled: it records the outcomes, answers and
// recycles the op (Respond encodes synchronously).
func (op *produceOp) finish() {
	for i, sp := range op.slots {
		if err := op.pr.Part(i).Err; err != nil {
			sp.ErrorCode = engineErr(err).Code
		}
	}
	if !op.noAnswer {
		op.r.Respond(&op.resp)
	}
	if op.pr.Parked() {
		return // left to the collector
	}
	op.release()
}

func (op *produceOp) release() {
	clear(op.topics)
	clear(op.partBuf)
	clear(op.slots)
	op.slots = op.slots[:0]
	op.clearRequest()
	op.resp = kmsg.ProduceResponse{}
	op.r, op.noAnswer = nil, false
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
func decodeProduce(pr *producer, r *Request, op *produceOp) bool {
	op.req.SetVersion(r.Header.Version)
	if err := op.req.UnsafeReadFrom(r.Raw); err != nil {
		pr.metrics.Rejected()
		pr.log.Debug("closing connection: bad request", "remote", r.Conn.RemoteAddr(), "key", r.Header.Key,
			"version", r.Header.Version, "err", fmt.Errorf("%w: Produce v%d: %w", ErrMalformedBody, r.Header.Version, err))
		r.CloseConn()
		return false
	}
	return true
}

func handleProduce(b *Broker, r *Request) { b.produce.handle(r) }

// producer is the Produce handler's part of the broker: what a request's partitions
// are resolved, checked and appended with, the order of the transactional requests of
// each transactional id, and their verification at the transaction coordinator
// (produce_txn.go). Safe for concurrent use.
type producer struct {
	parts   metadatacache.Partitions
	route   metadatacache.Routing
	repl    *replication.Manager
	quotas  *quota.Manager
	metrics *metrics
	log     *slog.Logger
	verify  TxnVerifier      // Deps.TxnVerifier
	txns    txnProduceQueues // transactional requests in verification
}

// handle serves one Produce request.
func (pr *producer) handle(r *Request) {
	v := r.Header.Version
	op := produceOps.Get().(*produceOp)
	if !decodeProduce(pr, r, op) {
		op.release()
		return
	}
	req := &op.req
	op.r, op.noAnswer = r, req.Acks == 0
	if op.fin == nil {
		op.fin = op.finish
	}
	op.resp.Default()
	op.resp.SetVersion(v)
	im := pr.parts.View.Image()
	op.resp.ThrottleMillis = r.MuteFor(pr.quotas.Produce(im.ClientQuotas(), quotaClientOf(r), len(r.Raw))) // quotas.go
	op.pr.Begin(pr.repl, req.Acks, time.Duration(req.TimeoutMillis)*time.Millisecond, op.fin)

	var fixed *kerr.Error
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		fixed = kerr.InvalidRequiredAcks
	}
	if req.TransactionID != nil && fixed == nil {
		pr.produceTransactional(op) // produce_txn.go
		return
	}
	pr.layoutProduce(op)
	failed := false
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &op.topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			err := fixed
			if err == nil {
				err = pr.producePartition(op, v, rt, rp, sp)
			}
			if err != nil {
				failed = true
				sp.ErrorCode = err.Code
			}
		}
	}
	op.sealProduce(failed)
}

// layoutProduce sizes op's answer to its request: a topic per request topic, a
// partition per request partition, each without an offset yet.
func (pr *producer) layoutProduce(op *produceOp) {
	req := &op.req
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
	k := 0
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &op.topics[i]
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = op.partBuf[k : k+len(rt.Partitions) : k+len(rt.Partitions)]
		k += len(rt.Partitions)
		for j := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Partition, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = rt.Partitions[j].Partition, -1, -1, -1
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
		}
	}
}

// sealProduce ends the handler's part of op once every partition was appended or
// failed: acks=0 answers now (nothing, or a closed connection when a partition
// failed), and the op proceeds in replication, whose completion answers and recycles
// it.
func (op *produceOp) sealProduce(failed bool) {
	if op.req.Acks == 0 {
		if failed {
			op.r.CloseConn()
		} else {
			op.r.NoResponse()
		}
	}
	op.pr.Seal()
}

// producePartition validates and appends one partition's records of a request
// without a transactional id, recording the part in op.
func (pr *producer) producePartition(op *produceOp, v int16, rt *kmsg.ProduceRequestTopic, rp *kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) *kerr.Error {
	p, rep, _, ke := pr.produceTarget(op, v, rt, rp, sp, false)
	if ke != nil {
		return ke
	}
	return pr.produceAppend(op, v, p, rep, rp.Records, sp)
}

// txnBatch is the first transactional batch of a partition's records.
type txnBatch struct {
	ok       bool
	pid      int64
	epoch    int16
	sequence int32
}

// produceTarget resolves the partition of rp and checks its records' batch headers:
// magic 2, zstd from v7, no control batch and no producer batch without a sequence
// (INVALID_RECORD: only coordinators write those), transactional batches only in a
// transactional request (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka). It
// returns this node's leader replica and the first transactional batch. A partition
// this node does not lead gets the current leader in sp (KIP-951).
func (pr *producer) produceTarget(op *produceOp, v int16, rt *kmsg.ProduceRequestTopic, rp *kmsg.ProduceRequestTopicPartition,
	sp *kmsg.ProduceResponseTopicPartition, transactional bool) (Partition, *replication.Partition, txnBatch, *kerr.Error) {
	var p Partition
	var err error
	var first txnBatch
	if v >= 13 {
		p, err = pr.parts.LookupByID(rt.TopicID, rp.Partition)
	} else {
		p, err = pr.parts.Lookup(rt.Topic, rp.Partition)
	}
	if err != nil {
		ke := engineErr(err)
		if ke == kerr.NotLeaderForPartition && p.Topic != nil {
			pr.notLeader(op, v, p, sp)
		}
		return p, nil, first, ke
	}
	recs := rp.Records
	for pos := 0; pos+engine.BatchHeaderSize <= len(recs); {
		// Byte 16 is the magic in batches v2 and in message sets v0/v1 alike.
		if recs[pos+16] != 2 {
			return p, nil, first, kerr.UnsupportedVersion
		}
		h, herr := engine.ParseBatchHeader(recs[pos:])
		if herr != nil {
			break // Append reports it
		}
		if v < 7 && h.Compression() == 4 {
			return p, nil, first, kerr.UnsupportedCompressionType
		}
		if h.Control() || h.ProducerID >= 0 && h.BaseSequence < 0 {
			return p, nil, first, kerr.InvalidRecord
		}
		if h.Transactional() {
			switch {
			case !transactional:
				return p, nil, first, kerr.TransactionalIDAuthorizationFailed
			case h.ProducerID < 0:
				return p, nil, first, kerr.InvalidRecord
			case !first.ok:
				first = txnBatch{ok: true, pid: h.ProducerID, epoch: h.ProducerEpoch, sequence: h.BaseSequence}
			}
		}
		pos += int(h.Size())
	}
	if len(recs) > 16 && len(recs) < engine.BatchHeaderSize && recs[16] != 2 {
		return p, nil, first, kerr.UnsupportedVersion
	}
	if p.Log != nil && p.Log.Config().Compact && !isInternalTopic(p.Topic.Name) {
		if ke := keylessRecords(p, recs, sp); ke != nil {
			return p, nil, first, ke
		}
	}
	rep, ke := p.Leader()
	if ke != nil {
		if ke == kerr.NotLeaderForPartition {
			pr.notLeader(op, v, p, sp)
		}
		return p, nil, first, ke
	}
	return p, rep, first, nil
}

// keylessRecords refuses records without a key on a compacted topic, as Kafka's
// LogValidator does (KIP-467): INVALID_RECORD, each such record named in sp's
// RecordErrors by its index in its batch, and the partition's ErrorMessage. This is
// the one place the produce path decodes records, and only for compacted topics (a
// compressed batch is decompressed to look). A batch that does not decode is left
// to Log.Append, which reports it.
func keylessRecords(p Partition, recs []byte, sp *kmsg.ProduceResponseTopicPartition) *kerr.Error {
	var errs []kmsg.ProduceResponseTopicPartitionErrorRecord
	for pos := 0; pos+engine.BatchHeaderSize <= len(recs); {
		h, err := engine.ParseBatchHeader(recs[pos:])
		if err != nil || pos+int(h.Size()) > len(recs) {
			break
		}
		i := int32(0)
		engine.ForEachRecord(recs[pos:pos+int(h.Size())], func(r engine.Record) error {
			if r.Key == nil {
				msg := fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", p.Topic.Name, p.Index)
				errs = append(errs, kmsg.ProduceResponseTopicPartitionErrorRecord{RelativeOffset: i, ErrorMessage: &msg})
			}
			i++
			return nil
		})
		pos += int(h.Size())
	}
	if len(errs) == 0 {
		return nil
	}
	shown := errs[:min(3, len(errs))]
	var list []string
	for _, e := range shown {
		list = append(list, fmt.Sprintf("%d: %s", e.RelativeOffset, *e.ErrorMessage))
	}
	msg := fmt.Sprintf("One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [%s]", len(errs), strings.Join(list, ", "))
	sp.ErrorRecords, sp.ErrorMessage = errs, &msg
	return kerr.InvalidRecord
}

// produceAppend appends recs to rep, recording the part in op.
func (pr *producer) produceAppend(op *produceOp, v int16, p Partition, rep *replication.Partition, recs []byte, sp *kmsg.ProduceResponseTopicPartition) *kerr.Error {
	i, err := op.pr.Append(rep, recs)
	if err != nil {
		pr.log.Debug("produce refused", "topic", p.Topic.Name, "partition", p.Index, "err", err)
		ke := engineErr(err)
		pr.metrics.topics.ProduceFailed(p.Topic.Name, ke) // net/brokermetrics
		if ke == kerr.NotLeaderForPartition {
			pr.notLeader(op, v, p, sp)
		}
		return ke
	}
	res := op.pr.Part(i).Result
	pr.metrics.topics.Produced(p.Topic.Name, len(recs), res) // net/brokermetrics
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
	op.slots = append(op.slots, sp)
	return nil
}

// notLeader fills the current leader of p into sp and, from v10, the leader's endpoint
// into the response's NodeEndpoints (KIP-951).
func (pr *producer) notLeader(op *produceOp, v int16, p Partition, sp *kmsg.ProduceResponseTopicPartition) {
	id, epoch := pr.parts.LeaderOf(engine.TopicPartition{Topic: p.Topic.Name, Partition: p.Index}, p.Image)
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = id, epoch
	if v < 10 || id < 0 || slices.ContainsFunc(op.resp.Brokers, func(br kmsg.ProduceResponseBroker) bool { return br.NodeID == id }) {
		return
	}
	if host, port, rack, ok := pr.route.LeaderEndpoint(listenerOf(op.r), id); ok {
		br := kmsg.NewProduceResponseBroker()
		br.NodeID, br.Host, br.Port, br.Rack = id, host, port, rack
		op.resp.Brokers = append(op.resp.Brokers, br)
	}
}
