package broker

import (
	"context"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/txn"
)

// txnVerifier is kafka.TxnVerifier (Kafka's AddPartitionsToTxnManager, beside its
// ReplicaManager): a transactional produce's or offset commit's partitions checked
// (KIP-890 part 1: AddPartitionsToTxn v4 VerifyOnly) or added (part 2: v5 without
// VerifyOnly) at the transaction coordinator of the transactional id: this node's
// (Coordinator.VerifyPartitions inline, Coordinator.AddPartitionsToTxn answered once
// the addition is logged) or another broker's (over Deps.Peer, from a goroutine).
// Neither a coordinator in the image nor one that has loaded the id here (this node
// named, not loaded yet): no codes, which the callers answer as retriable.
type txnVerifier struct{ b *Broker }

// verifyTimeout bounds a verification at another broker's transaction coordinator
// (Kafka's request.timeout.ms).
const verifyTimeout = 30 * time.Second

// Verify asks id's coordinator about tps of producer pid at epoch (add: adds them).
// It returns the codes and true when it has them at once; otherwise false, and done
// gets them later on a goroutine of the broker's. id may alias a request's frame: it
// is copied before Verify returns.
func (v txnVerifier) Verify(id string, pid int64, epoch int16, tps []txn.TopicPartition, add bool,
	done func(map[txn.TopicPartition]int16)) (map[txn.TopicPartition]int16, bool) {
	b := v.b
	producer := txnProducer{pid: pid, epoch: epoch}
	var req *kmsg.AddPartitionsToTxnRequest
	if add {
		req = addRequest(id, producer, tps)
		id = req.Transactions[0].TransactionalID // a copy: the caller's frame may go once it is answered
	}
	if c := b.txns.coordinator(); c != nil && c.Status(id) == 0 {
		if !add {
			return c.VerifyPartitions(id, pid, epoch, tps), true
		}
		// The answer may come on replication's goroutine (the addition's append):
		// the caller goes on from one of the broker's.
		c.AddPartitionsToTxn(req, nil, func(resp *kmsg.AddPartitionsToTxnResponse) {
			codes := verifyCodes(resp, nil)
			b.async(func(context.Context) { done(codes) })
		})
		return nil, false
	}
	coord := b.txnCoordinatorOf(id)
	if coord < 0 || coord == b.cfg.NodeID || b.peer == nil {
		// No coordinator in the image, or this node is named but has not loaded the
		// partition yet: retriable.
		return nil, true
	}
	if !add {
		req = verifyRequest(id, producer, tps)
		id = req.Transactions[0].TransactionalID // a copy, as above
	}
	b.async(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
		resp, err := b.peer(ctx, coord, req)
		cancel()
		if err != nil && add {
			b.log.Debug("adding partitions to a transaction failed", "transactional_id", id, "coordinator", coord, "err", err)
		} else if err != nil {
			b.log.Debug("transaction verification failed", "transactional_id", id, "coordinator", coord, "err", err)
		}
		done(verifyCodes(resp, err))
	})
	return nil, false
}

// txnCoordinatorOf returns the broker leading id's __transaction_state partition in
// the image (-1 when there is none, or it is not a live broker).
func (b *Broker) txnCoordinatorOf(id string) int32 {
	im := b.meta.Image()
	t, ok := im.Topic(txn.StateTopic)
	if id == "" || !ok || len(t.Partitions) == 0 {
		return -1
	}
	leader := t.Partitions[txn.PartitionFor(id, int32(len(t.Partitions)))].Leader
	if bi, ok := im.Broker(leader); leader < 0 || !ok || bi.Fenced {
		return -1
	}
	return leader
}

// txnProducer is the producer id and epoch of a transaction.
type txnProducer struct {
	pid   int64
	epoch int16
}

// verifyRequest asks the coordinator whether tps are in id's transaction of
// producer: AddPartitionsToTxn v4 with VerifyOnly.
func verifyRequest(id string, producer txnProducer, tps []txn.TopicPartition) *kmsg.AddPartitionsToTxnRequest {
	return txnPartitionsRequest(4, true, id, producer, tps)
}

// addRequest asks the coordinator to add tps to id's transaction of producer (KIP-890
// part 2): AddPartitionsToTxn v5 without VerifyOnly.
func addRequest(id string, producer txnProducer, tps []txn.TopicPartition) *kmsg.AddPartitionsToTxnRequest {
	return txnPartitionsRequest(5, false, id, producer, tps)
}

// txnPartitionsRequest is a broker's AddPartitionsToTxn (v4+) of one transaction.
func txnPartitionsRequest(version int16, verifyOnly bool, id string, producer txnProducer, tps []txn.TopicPartition) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(version)
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = strings.Clone(id), producer.pid, producer.epoch, verifyOnly
	for _, tp := range tps {
		j := -1
		for n := range tr.Topics {
			if tr.Topics[n].Topic == tp.Topic {
				j = n
			}
		}
		if j < 0 {
			t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			t.Topic = tp.Topic
			tr.Topics = append(tr.Topics, t)
			j = len(tr.Topics) - 1
		}
		tr.Topics[j].Partitions = append(tr.Topics[j].Partitions, tp.Partition)
	}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tr}
	return req
}

// verifyCodes reads a verification answer: per partition its code (none when the
// request failed or the answer carries a top-level error).
func verifyCodes(resp kmsg.Response, err error) map[txn.TopicPartition]int16 {
	ar, ok := resp.(*kmsg.AddPartitionsToTxnResponse)
	if err != nil || !ok {
		return nil
	}
	out := map[txn.TopicPartition]int16{}
	for _, tr := range ar.Transactions {
		for _, t := range tr.Topics {
			for _, p := range t.Partitions {
				code := p.ErrorCode
				if ar.ErrorCode != 0 {
					code = ar.ErrorCode
				}
				out[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = code
			}
		}
	}
	return out
}
