package txn

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetsTopic is the group coordinator's internal topic, whose partition
// of a group AddOffsetsToTxn adds to a transaction.
const OffsetsTopic = "__consumer_offsets"

// PartitionCheck vets one partition of an AddPartitionsToTxn before
// anything is added: 0 to go on, or the error code the partition gets
// (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION). When any
// partition of a transaction fails it, the others get
// OPERATION_NOT_ATTEMPTED and nothing is added (Kafka's KafkaApis).
type PartitionCheck func(topic string, partition int32) int16

// AddPartitionsToTxn serves AddPartitionsToTxn (key 24). Versions 0-3:
// one transaction, from its producer. Versions 4+ (KIP-890): a batch of
// transactions from brokers; a transaction with VerifyOnly set is only
// checked (the partition leader's verification before it appends a
// transaction's first batch: NONE per partition in the transaction,
// TRANSACTION_ABORTABLE for the others), the others are added (under
// transaction version 2 the leader adds the partitions of a producer's
// first produce on its behalf). check (nil: none) applies to the
// partitions to add, not to verifications. The handler checks the
// version's authorization (v4+: CLUSTER_ACTION) before.
//
// Per transaction, every partition gets one code: NONE, or
// INVALID_REQUEST, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS.
func (c *Coordinator) AddPartitionsToTxn(req *kmsg.AddPartitionsToTxnRequest, check PartitionCheck, done func(*kmsg.AddPartitionsToTxnResponse)) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	fenced := func(code int16) int16 {
		if code == kerr.ProducerFenced.Code && req.Version < 2 {
			return kerr.InvalidProducerEpoch.Code
		}
		return code
	}
	if req.Version < 4 {
		var tps []TopicPartition
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, TopicPartition{t.Topic, p})
			}
		}
		fill := func(codes func(TopicPartition) int16) {
			resp.Topics = resp.Topics[:0]
			for _, t := range req.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, fenced(codes(TopicPartition{t.Topic, p}))
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			done(resp)
		}
		if codes := checkAll(tps, check); codes != nil {
			fill(func(tp TopicPartition) int16 { return codes[tp] })
			return
		}
		c.addPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps, func(code int16) {
			fill(func(TopicPartition) int16 { return code })
		})
		return
	}
	resp.Transactions = make([]kmsg.AddPartitionsToTxnResponseTransaction, len(req.Transactions))
	var mu sync.Mutex
	left := len(req.Transactions) + 1
	finish := func() {
		mu.Lock()
		left--
		last := left == 0
		mu.Unlock()
		if last {
			done(resp)
		}
	}
	for i := range req.Transactions {
		tr := &req.Transactions[i]
		var tps []TopicPartition
		for _, t := range tr.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, TopicPartition{t.Topic, p})
			}
		}
		fill := func(codes func(TopicPartition) int16) {
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = tr.TransactionalID
			for _, t := range tr.Topics {
				tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				tt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, codes(TopicPartition{t.Topic, p})
					tt.Partitions = append(tt.Partitions, rp)
				}
				rt.Topics = append(rt.Topics, tt)
			}
			mu.Lock()
			resp.Transactions[i] = rt
			mu.Unlock()
			finish()
		}
		if tr.VerifyOnly {
			codes := c.VerifyPartitions(tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tps)
			fill(func(tp TopicPartition) int16 { return codes[tp] })
			continue
		}
		if codes := checkAll(tps, check); codes != nil {
			fill(func(tp TopicPartition) int16 { return codes[tp] })
			continue
		}
		c.addPartitions(tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tps, func(code int16) {
			fill(func(TopicPartition) int16 { return code })
		})
	}
	finish()
}

// checkAll applies check; nil when every partition passes.
func checkAll(tps []TopicPartition, check PartitionCheck) map[TopicPartition]int16 {
	if check == nil {
		return nil
	}
	var codes map[TopicPartition]int16
	for _, tp := range tps {
		if code := check(tp.Topic, tp.Partition); code != 0 {
			if codes == nil {
				codes = map[TopicPartition]int16{}
			}
			codes[tp] = code
		}
	}
	if codes == nil {
		return nil
	}
	for _, tp := range tps {
		if _, ok := codes[tp]; !ok {
			codes[tp] = kerr.OperationNotAttempted.Code
		}
	}
	return codes
}

// AddOffsetsToTxn serves AddOffsetsToTxn (key 25): the group's
// __consumer_offsets partition joins the transaction, so that its
// TxnOffsetCommits are committed or aborted with it (by the markers the
// group coordinator's partition receives). Errors as AddPartitionsToTxn's
// (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2); the handler
// checks the group's authorization (GROUP_AUTHORIZATION_FAILED) first.
func (c *Coordinator) AddOffsetsToTxn(req *kmsg.AddOffsetsToTxnRequest, done func(*kmsg.AddOffsetsToTxnResponse)) {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	tp := TopicPartition{OffsetsTopic, PartitionFor(req.Group, c.cfg.OffsetsPartitions)}
	c.addPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []TopicPartition{tp}, func(code int16) {
		if code == kerr.ProducerFenced.Code && req.Version < 2 {
			code = kerr.InvalidProducerEpoch.Code
		}
		resp.ErrorCode = code
		done(resp)
	})
}

// addPartitions adds tps to id's transaction (Kafka's
// handleAddPartitionsToTransaction); cb gets one code for all, with no
// lock held.
//
// While another transition of the producer is being logged (the additions
// of several partition leaders, each adding its own partitions on the
// producer's behalf under transaction version 2, arrive together), or its
// previous transaction is ending (its markers being written, its completion
// logged), Kafka answers CONCURRENT_TRANSACTIONS at once and the client, or
// under version 2 the partition leader, tries again after a backoff (20 ms
// in the Java client and in franz-go; a franz-go Produce waits for a
// metadata refresh). Here the request waits for that to be over instead,
// up to addWaitMax in all, and is then served as if it had just arrived
// (answered CONCURRENT_TRANSACTIONS if it is still not over): the same
// answers, sooner.
func (c *Coordinator) addPartitions(id string, pid int64, epoch int16, tps []TopicPartition, cb func(code int16)) {
	c.addPartitionsOnce(id, pid, epoch, tps, c.nowMs()+addWaitMax.Milliseconds(), cb)
}

// addWaitMax bounds how long an AddPartitionsToTxn or EndTxn waits for the
// producer's transition in flight or previous transaction's end before it is
// answered CONCURRENT_TRANSACTIONS.
const addWaitMax = 200 * time.Millisecond

// addPartitionsOnce serves an AddPartitionsToTxn that may wait (waitTurnLocked)
// until deadline (Unix ms).
func (c *Coordinator) addPartitionsOnce(id string, pid int64, epoch int16, tps []TopicPartition, deadline int64, cb func(code int16)) {
	if id == "" {
		cb(kerr.InvalidRequest.Code)
		return
	}
	c.withLock(func(fx *effects) {
		answer := func(code int16) { fx.add(func() { cb(code) }) }
		part, m, code := c.lookupLocked(id)
		concurrent := func() {
			if !c.waitTurnLocked(m, deadline, func() { c.addPartitionsOnce(id, pid, epoch, tps, deadline, cb) }) {
				answer(kerr.ConcurrentTransactions.Code)
			}
		}
		switch {
		case code != 0:
			answer(code)
			return
		case m == nil:
			answer(kerr.InvalidProducerIDMapping.Code)
			return
		case m.markers != nil && m.markers.complete.producerID == pid && pid != m.producerID:
			// The completion that moves to this producer id (an exhausted
			// epoch, version 2) is not logged yet.
			concurrent()
			return
		case m.producerID != pid:
			answer(kerr.InvalidProducerIDMapping.Code)
			return
		case m.epoch != epoch:
			answer(kerr.ProducerFenced.Code)
			return
		case m.pending != noState, m.state == PrepareCommit, m.state == PrepareAbort:
			concurrent()
			return
		}
		if m.state == Ongoing {
			all := true
			for _, tp := range tps {
				if _, ok := m.partitions[tp]; !ok {
					all = false
					break
				}
			}
			if all {
				answer(0)
				return
			}
		}
		t, err := m.prepareAdd(tps, c.nowMs())
		if err != nil {
			c.logger.Error("AddPartitionsToTxn transition", "transactional_id", id, "err", err)
			answer(kerr.UnknownServerError.Code)
			return
		}
		c.appendLocked(fx, part, m, t, nil, func(fx *effects, code int16) { fx.add(func() { cb(code) }) })
	})
}

// waitTurnLocked makes again run once m's transition in flight is answered
// or its transaction's end is over (completed, or given up), or at deadline
// (Unix ms), whichever comes first; again runs once, with no lock held. It
// reports false, and does nothing, when the deadline has passed or nothing
// is in flight that would end the wait.
func (c *Coordinator) waitTurnLocked(m *txnMeta, deadline int64, again func()) bool {
	left := deadline - c.nowMs()
	if left <= 0 || m.pending == noState && m.markers == nil {
		return false
	}
	w := &endWaiter{again: again}
	w.timer = c.clock.AfterFunc(time.Duration(left)*time.Millisecond, func() {
		c.withLock(func(fx *effects) { w.fire(fx) })
	})
	m.waiters = append(m.waiters, w)
	return true
}

// endWaiter is a request waiting for its producer's turn.
type endWaiter struct {
	again func()
	timer Timer
	fired bool // guarded by Coordinator.mu
}

func (w *endWaiter) fire(fx *effects) {
	if w.fired {
		return
	}
	w.fired = true
	w.timer.Stop()
	fx.add(w.again)
}

// wakeLocked releases the requests waiting for m's turn: a transition of m
// was answered, or its markers were given up.
func (m *txnMeta) wakeLocked(fx *effects) {
	for _, w := range m.waiters {
		w.fire(fx)
	}
	m.waiters = nil
}

// VerifyPartitions answers a partition leader's verification (KIP-890
// part 1: AddPartitionsToTxn v4+ VerifyOnly, Kafka's
// handleVerifyPartitionsInTransaction): per partition NONE when it is in
// id's ongoing transaction of producer pid at epoch, TRANSACTION_ABORTABLE
// when not; or, for all, INVALID_REQUEST, NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED or CONCURRENT_TRANSACTIONS (the transaction is ending).
// The produce handler turns PRODUCER_FENCED into INVALID_PRODUCER_EPOCH
// and, for Produce before v11, TRANSACTION_ABORTABLE into
// INVALID_TXN_STATE (Kafka's AddPartitionsToTxnManager).
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, tps []TopicPartition) map[TopicPartition]int16 {
	out := make(map[TopicPartition]int16, len(tps))
	all := func(code int16) map[TopicPartition]int16 {
		for _, tp := range tps {
			out[tp] = code
		}
		return out
	}
	if id == "" {
		return all(kerr.InvalidRequest.Code)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, m, code := c.lookupLocked(id)
	switch {
	case code != 0:
		return all(code)
	case m == nil, m.producerID != pid:
		return all(kerr.InvalidProducerIDMapping.Code)
	case m.epoch != epoch:
		return all(kerr.ProducerFenced.Code)
	case m.state == PrepareCommit, m.state == PrepareAbort:
		return all(kerr.ConcurrentTransactions.Code)
	}
	for _, tp := range tps {
		if _, ok := m.partitions[tp]; ok && m.state == Ongoing {
			out[tp] = 0
		} else {
			out[tp] = kerr.TransactionAbortable.Code
		}
	}
	return out
}
