package kafka

import (
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/txn"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// Transactional Produce (a request with a transactional id): KIP-890 part 1's
// verification before a producer's first transactional batch in a partition, or,
// from Produce v12 on (KIP-890 part 2, sent by clients only once transaction.version
// 2 is finalized), the partition added to the producer's transaction on its behalf.
//
//	per partition: produceTarget ─▶ first transactional batch (pid, epoch, sequence)
//	    ─▶ Log.StartTxnVerification: needed only when the producer has no transaction
//	       open in the partition (and transaction.partition.verification.enable)
//	all partitions that need it, one question to the transaction coordinator:
//	    this node's (Coordinator.VerifyPartitions, inline) or another broker's
//	    (AddPartitionsToTxn v4 VerifyOnly over the peer client, from a goroutine):
//	    Deps.TxnVerifier
//	    ─▶ NONE: Log.CompleteTxnVerification(guard); else the partition's error:
//	       PRODUCER_FENCED → INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE →
//	       INVALID_TXN_STATE before Produce v11, NOT_COORDINATOR,
//	       COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
//	       CONCURRENT_TRANSACTIONS and an unreachable coordinator → NOT_ENOUGH_REPLICAS
//	       (retriable, no metadata refresh: Kafka's mapping)
//	    ─▶ the appends, in request order, as for any produce.
//
// Produce v12+ (Kafka's addPartition operation): the question is AddPartitionsToTxn
// v5 without VerifyOnly, so the coordinator adds the partitions the producer did not
// add itself (it sends no AddPartitionsToTxn under version 2); this node's coordinator
// is called directly (Coordinator.AddPartitionsToTxn: it logs the addition, so its
// answer comes later, as another broker's does). The answer is mapped as a
// verification's. The addition is asked for even with
// transaction.partition.verification.enable=false when the producer has no
// transaction open in the partition: without it the partition would not be in the
// transaction and would get no marker.
//
// The requests of one transactional id are processed one at a time, in arrival
// order: one that arrives while another waits for its verification waits behind it
// (Kafka gets the same order by reading a connection's next request only once the
// previous one is answered). A request whose verification is not needed is appended
// inline, on the read path, as a non-transactional one; the engine's checks (epoch,
// sequence, a batch that would open a transaction without a verification:
// INVALID_TXN_STATE) apply to every transactional batch.

// TxnVerifier asks the transaction coordinator of a transactional id about partitions
// of its producer's transaction (the node's assembly, net/broker: Kafka's
// AddPartitionsToTxnManager): with add false whether they are in it (KIP-890 part 1),
// with add true to add them (part 2). The codes are the coordinator's, per partition;
// none when it could not be asked or did not answer. Verify returns them and true
// when it has them at once; otherwise false, and done gets them later, on a goroutine
// of the node's. id is copied before Verify returns.
type TxnVerifier interface {
	Verify(id string, pid int64, epoch int16, tps []txn.TopicPartition, add bool,
		done func(map[txn.TopicPartition]int16)) (map[txn.TopicPartition]int16, bool)
}

// txnProduceQueues holds the transactional ids with a produce request in process,
// and the requests waiting behind it.
type txnProduceQueues struct {
	mu sync.Mutex
	m  map[string][]*produceOp
}

// enter reports whether op may be processed now; false: it is queued behind the
// request of its id in process, which runs it when done.
func (q *txnProduceQueues) enter(id string, op *produceOp) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if waiting, busy := q.m[id]; busy {
		q.m[id] = append(waiting, op)
		return false
	}
	if q.m == nil {
		q.m = map[string][]*produceOp{}
	}
	q.m[strings.Clone(id)] = nil // the id aliases the request's frame
	return true
}

// leave ends the request of id in process and returns the next one (nil when none
// waits; the id is then free).
func (q *txnProduceQueues) leave(id string) *produceOp {
	q.mu.Lock()
	defer q.mu.Unlock()
	waiting := q.m[id]
	if len(waiting) == 0 {
		delete(q.m, id)
		return nil
	}
	next := waiting[0]
	waiting[0] = nil
	q.m[id] = waiting[1:]
	return next
}

// txnPart is one partition of a transactional request being processed.
type txnPart struct {
	rt    *kmsg.ProduceRequestTopic
	rp    *kmsg.ProduceRequestTopicPartition
	sp    *kmsg.ProduceResponseTopicPartition
	p     Partition
	rep   *replication.Partition
	err   *kerr.Error
	first txnBatch
	guard engine.VerificationGuard
	check bool // waited for the coordinator's verification
	late  bool // verification starts after the addition (additionNeeded)
}

// additionNeeded is, under version 2, for a producer StartTxnVerification needs no
// verification of (a transaction of it is open in l, or verification is off), whether
// the partition must be added to its transaction at epoch all the same: when no
// transaction of the producer is open (verification is off), or when the open one is
// of an earlier epoch. Every EndTxn bumps the epoch, so that one is the producer's
// previous transaction, ended but whose marker has not reached l yet; the batch must
// not join it. The coordinator answers the addition once the previous transaction is
// complete (its marker here, at the bumped epoch): late, the verification is then
// started and completed before the append (a marker that ends the new transaction
// meanwhile has a higher epoch still, and fences the batch).
func additionNeeded(l *engine.Log, pid int64, epoch int16) (needed, late bool) {
	if _, open := l.OpenTransaction(pid); !open {
		return true, false
	}
	cur, _, ok := l.ProducerState(pid)
	if ok && cur < epoch {
		return true, true
	}
	return false, false
}

// completeLateVerification starts and completes the verification of a partition
// added late (additionNeeded).
func completeLateVerification(l *engine.Log, pid int64, epoch int16, seq int32) {
	if g, needed := l.StartTxnVerification(pid, epoch, seq); needed {
		l.CompleteTxnVerification(pid, g)
	}
}

// produceTransactional processes op, a request with a transactional id, now or once
// the requests of its id ahead of it are done.
func (pr *producer) produceTransactional(op *produceOp) {
	id := *op.req.TransactionID
	if !pr.txns.enter(id, op) {
		return
	}
	pr.runTransactional(op)
}

// runTransactional processes op and, when it is done, the requests of its id that
// queued behind it, on this goroutine; it returns at the first that waits for a
// verification from another broker (its answer goes on).
func (pr *producer) runTransactional(op *produceOp) {
	for op != nil {
		id := strings.Clone(*op.req.TransactionID)
		if !pr.verifyTransactional(op) {
			return
		}
		op = pr.txns.leave(id)
	}
}

// verifyTransactional lays out op's answer, resolves its partitions and starts the
// verification they need (Deps.TxnVerifier; from v12 the addition of the partitions
// the producer has no transaction open in). It reports true when op is done (appended
// or failed, sealed); false when it waits for the coordinator's answer, which
// completes it and goes on with its id's queue. The transactional batches of a
// request must all come from one producer id and epoch (else
// INVALID_PRODUCER_ID_MAPPING for the others, as Kafka refuses a request with several).
func (pr *producer) verifyTransactional(op *produceOp) bool {
	req, v := &op.req, op.r.Header.Version
	id := *req.TransactionID
	add := v >= 12 // KIP-890 part 2: the partitions are added on the producer's behalf
	pr.layoutProduce(op)
	parts := make([]txnPart, 0, len(op.partBuf))
	var check []txn.TopicPartition
	var producer txnBatch
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			tp := txnPart{rt: rt, rp: &rt.Partitions[j], sp: &op.topics[i].Partitions[j]}
			tp.p, tp.rep, tp.first, tp.err = pr.produceTarget(op, v, rt, tp.rp, tp.sp, true)
			switch {
			case tp.err != nil || !tp.first.ok:
			case producer.ok && (tp.first.pid != producer.pid || tp.first.epoch != producer.epoch):
				tp.err = kerr.InvalidProducerIDMapping
			default:
				producer = tp.first
				g, needed := tp.p.Log.StartTxnVerification(tp.first.pid, tp.first.epoch, tp.first.sequence)
				if !needed && add {
					needed, tp.late = additionNeeded(tp.p.Log, tp.first.pid, tp.first.epoch)
				}
				if needed {
					tp.guard, tp.check = g, true
					check = append(check, txn.TopicPartition{Topic: tp.p.Topic.Name, Partition: tp.p.Index})
				}
			}
			parts = append(parts, tp)
		}
	}
	if len(check) == 0 {
		pr.appendTransactional(op, parts)
		return true
	}
	id = strings.Clone(id) // op's frame goes once op is answered
	codes, now := pr.verify.Verify(id, producer.pid, producer.epoch, check, add, func(codes map[txn.TopicPartition]int16) {
		pr.applyVerification(op, parts, codes)
		pr.appendTransactional(op, parts)
		pr.runTransactional(pr.txns.leave(id))
	})
	if !now {
		return false
	}
	pr.applyVerification(op, parts, codes)
	pr.appendTransactional(op, parts)
	return true
}

// applyVerification applies the coordinator's codes to the partitions that waited
// for them (one missing: COORDINATOR_NOT_AVAILABLE), with the mapping above.
func (pr *producer) applyVerification(op *produceOp, parts []txnPart, codes map[txn.TopicPartition]int16) {
	for i := range parts {
		tp := &parts[i]
		if !tp.check {
			continue
		}
		code, ok := codes[txn.TopicPartition{Topic: tp.p.Topic.Name, Partition: tp.p.Index}]
		if !ok {
			code = kerr.CoordinatorNotAvailable.Code
		}
		switch code {
		case 0:
			if tp.late {
				completeLateVerification(tp.p.Log, tp.first.pid, tp.first.epoch, tp.first.sequence)
				continue
			}
			// false: a marker or batch of the producer came meanwhile; the append then
			// says whether a transaction is open.
			tp.p.Log.CompleteTxnVerification(tp.first.pid, tp.guard)
			continue
		case kerr.ProducerFenced.Code:
			tp.err = kerr.InvalidProducerEpoch
		case kerr.TransactionAbortable.Code:
			tp.err = kerr.TransactionAbortable
			if op.r.Header.Version <= 10 {
				tp.err = kerr.InvalidTxnState
			}
		case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code,
			kerr.ConcurrentTransactions.Code, kerr.RequestTimedOut.Code, kerr.NetworkException.Code:
			tp.err = kerr.NotEnoughReplicas
		default:
			if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
				tp.err = ke
			} else {
				tp.err = kerr.UnknownServerError
			}
		}
		pr.log.Debug("transactional produce not verified", "transactional_id", *op.req.TransactionID, "topic", tp.p.Topic.Name,
			"partition", tp.p.Index, "code", code)
	}
}

// appendTransactional appends the partitions that passed, in request order, and
// seals op.
func (pr *producer) appendTransactional(op *produceOp, parts []txnPart) {
	v := op.r.Header.Version
	failed := false
	for i := range parts {
		tp := &parts[i]
		err := tp.err
		if err == nil {
			err = pr.produceAppend(op, v, tp.p, tp.rep, tp.rp.Records, tp.sp)
		}
		if err != nil {
			failed = true
			tp.sp.ErrorCode = err.Code
		}
	}
	op.sealProduce(failed)
}
