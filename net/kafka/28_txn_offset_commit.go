// TxnOffsetCommit (key 28), versions 0-6, to the group coordinator.
//
// A transactional producer's offsets for a group (consume-transform-produce) are
// written to the group's __consumer_offsets partition as a transactional batch of the
// producer (coordinator/group's TxnOffsetCommit) and become the group's committed
// offsets only when the transaction's COMMIT marker reaches that partition (the
// marker writer calls the group coordinator, txns.go); an ABORT drops them. Before
// the producer's first batch there in a transaction the partition's membership of the
// transaction is verified with the transaction coordinator, as a Produce's (KIP-890
// part 1; AddOffsetsToTxn added it): locally, or with AddPartitionsToTxn v4
// VerifyOnly at another broker's. From v5 on (KIP-890 part 2: a client under
// transaction.version 2 sends no AddOffsetsToTxn) the partition is added to the
// transaction instead, as Kafka's group coordinator does: AddPartitionsToTxn v5
// without VerifyOnly, to this node's transaction coordinator or another broker's
// (Deps.TxnVerifier either way).
// Errors per partition: the group coordinator's
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, OFFSET_METADATA_TOO_LARGE;
// from v6, KIP-1319, GROUP_ID_NOT_FOUND for a commit with a generation to a group that
// does not exist and STALE_MEMBER_EPOCH, both ILLEGAL_GENERATION before),
// INVALID_PRODUCER_EPOCH (fenced), INVALID_TXN_STATE (no transaction open),
// TRANSACTION_ABORTABLE (the partition not in the transaction; INVALID_TXN_STATE
// before v4, as Kafka since KIP-890 part 1), UNKNOWN_TOPIC_OR_PARTITION for
// partitions of topics the cluster does not have.
//
// v6 (KIP-1319, Kafka 4.4) names topics by id only, in the request and the answer, as
// OffsetCommit v10: an id the metadata image does not know (the zero id too) answers
// UNKNOWN_TOPIC_ID on each of its partitions (KafkaApis.handleTxnOffsetCommitRequest);
// a known id commits under the topic's name. The old id of a topic deleted and
// re-created under the same name is unknown: its offsets never reach the new topic.
//
// Until their marker the offsets are pending: OffsetFetch answers the last committed
// ones, or UNSTABLE_OFFSET_COMMIT with RequireStable (v7+); a coordinator that loads
// the partition again applies them at their COMMIT marker, never after an ABORT
// (coordinator/group's txn_offsets.go).
//
// Authorization (authz.TxnOffsetCommit): WRITE on the transactional id, READ on the
// group and on each topic (by name or, v6, by id), as KafkaApis.
//
// Differences from Apache Kafka: the answer keeps the request's order; Kafka 4.4 also
// stores the topic id beside each offset (OffsetCommit's header).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/txn"
	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 28, MinVersion: 0, MaxVersion: 6, Handle: handleTxnOffsetCommit, Authz: authz.TxnOffsetCommit})
}

func handleTxnOffsetCommit(b *Broker, r *Request) {
	req := r.Body.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	known := *req
	known.Topics = nil
	im := b.meta.Image()
	var cs commitSplit
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(t.Partitions))
		name := cs.topic(im, req.Version >= 6, t.Topic, t.TopicID)
		kt := kmsg.TxnOffsetCommitRequestTopic{Topic: name, TopicID: t.TopicID}
		for j, p := range t.Partitions {
			rt.Partitions[j].Partition = p.Partition
			if rt.Partitions[j].ErrorCode = cs.partition(p.Partition); rt.Partitions[j].ErrorCode == -1 {
				kt.Partitions = append(kt.Partitions, p)
			}
		}
		if len(kt.Partitions) > 0 {
			known.Topics = append(known.Topics, kt)
		}
	}
	fill := func(code func() int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == -1 {
					resp.Topics[i].Partitions[j].ErrorCode = code()
				}
			}
		}
		r.Respond(resp)
	}
	all := func(code int16) { fill(func() int16 { return code }) }
	if len(known.Topics) == 0 {
		r.Respond(resp)
		return
	}
	c := b.groupCoordinatorOr(all)
	if c == nil {
		return
	}
	commit := func() {
		c.TxnOffsetCommit(&known, func(kr *kmsg.TxnOffsetCommitResponse, err error) {
			if ke := engineErr(err); ke == kerr.InvalidProducerEpoch || ke == kerr.InvalidTxnState {
				all(ke.Code)
				return
			}
			var codes []int16
			for _, t := range kr.Topics {
				for _, p := range t.Partitions {
					codes = append(codes, p.ErrorCode)
				}
			}
			fill(codesInOrder(codes))
		})
	}
	p := c.PartitionFor(req.Group)
	part, err := b.parts.Lookup(group.OffsetsTopic, p)
	if err != nil || part.Log == nil {
		commit() // the coordinator answers (NOT_COORDINATOR)
		return
	}
	add := req.Version >= 5 // KIP-890 part 2: the partition is added on the producer's behalf
	guard, needed := part.Log.StartTxnVerification(req.ProducerID, req.ProducerEpoch, -1)
	late := false
	if !needed && add {
		// The previous transaction's offsets may still be open here (produce_txn.go).
		needed, late = additionNeeded(part.Log, req.ProducerID, req.ProducerEpoch)
	}
	if !needed {
		commit()
		return
	}
	tp := txn.TopicPartition{Topic: group.OffsetsTopic, Partition: p}
	verified := func(codes map[txn.TopicPartition]int16) {
		code, ok := codes[tp]
		switch {
		case !ok:
			code = kerr.CoordinatorNotAvailable.Code
		case code == 0 && late:
			completeLateVerification(part.Log, req.ProducerID, req.ProducerEpoch, -1)
			commit()
			return
		case code == 0:
			part.Log.CompleteTxnVerification(req.ProducerID, guard)
			commit()
			return
		case code == kerr.ProducerFenced.Code:
			code = kerr.InvalidProducerEpoch.Code
		case code == kerr.TransactionAbortable.Code && req.Version < 4:
			code = kerr.InvalidTxnState.Code
		case code == kerr.NotCoordinator.Code, code == kerr.CoordinatorLoadInProgress.Code, code == kerr.ConcurrentTransactions.Code:
			code = kerr.CoordinatorNotAvailable.Code
		}
		all(code)
	}
	tps := []txn.TopicPartition{tp}
	if codes, now := b.produce.verify.Verify(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps, add, verified); now {
		verified(codes)
	}
}
