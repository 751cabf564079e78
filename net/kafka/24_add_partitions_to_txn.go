// AddPartitionsToTxn (key 24), versions 0-5.
//
// v0-3, from a transactional producer: its partitions join its ongoing transaction
// at the transaction coordinator (coordinator/txn's AddPartitionsToTxn), answered once
// the new state is durable in __transaction_state. A partition the image does not
// have gets UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED (nothing
// is added). Errors, per partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS.
//
// v4-5 (KIP-890), from partition leaders: a batch of transactions; one with
// VerifyOnly is only checked (the produce path's verification, produce_txn.go: NONE
// per partition in the transaction, TRANSACTION_ABORTABLE for the others), the others
// are added as above, unchecked against the image.
//
// Differences from Apache Kafka: no authorization (WRITE on the transactional id,
// DESCRIBE on the topics; CLUSTER_ACTION for v4+) is checked.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 24, MinVersion: 0, MaxVersion: 5, Handle: handleAddPartitionsToTxn, Authz: authz.AddPartitionsToTxn})
}

func handleAddPartitionsToTxn(b *Broker, r *Request) {
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	c := b.txnCoordinatorOr(func(code int16) { r.Respond(addPartitionsError(req, code)) })
	if c == nil {
		return
	}
	var check func(topic string, partition int32) int16
	if req.Version < 4 {
		im := b.meta.Image()
		check = func(topic string, partition int32) int16 {
			if t, ok := im.Topic(topic); ok && partition >= 0 && int(partition) < len(t.Partitions) {
				return 0
			}
			return kerr.UnknownTopicOrPartition.Code
		}
	}
	c.AddPartitionsToTxn(req, check, func(resp *kmsg.AddPartitionsToTxnResponse) { r.Respond(resp) })
}

// addPartitionsError answers every partition of req with code.
func addPartitionsError(req *kmsg.AddPartitionsToTxnRequest, code int16) *kmsg.AddPartitionsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		resp.ErrorCode = code
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
