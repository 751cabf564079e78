// WriteTxnMarkers (key 27), versions 0-2, from transaction coordinators.
//
// Each marker (COMMIT or ABORT of a producer id and epoch, with the coordinator's
// epoch) is appended as a control batch to this node's leader replica of each of its
// partitions, acks=all (coordinator/txn's MarkerWriter): the engine checks it against
// the producer state (an older producer epoch: INVALID_PRODUCER_EPOCH; an older
// coordinator epoch: TRANSACTION_COORDINATOR_FENCED) and closes the producer's
// transaction there, so the last stable offset moves once the marker is below the
// high watermark. Per partition also UNKNOWN_TOPIC_OR_PARTITION (no replica here),
// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,
// CORRUPT_MESSAGE, KAFKA_STORAGE_ERROR. A marker on __consumer_offsets commits or
// drops the producer's pending transactional offsets there (once TxnOffsetCommit is
// served).
//
// Authorization (on a listener with an authorizer, authz.WriteTxnMarkers): ALTER or
// CLUSTER_ACTION on the cluster, as Kafka checks it (KIP-664: the ALTER of an operator
// aborting a hanging transaction with kafka-transactions.sh abort or samsa
// transactions abort); a refusal is CLUSTER_AUTHORIZATION_FAILED on every partition.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 27, MinVersion: 0, MaxVersion: 2, Handle: handleWriteTxnMarkers, Authz: authz.WriteTxnMarkers})
}

func handleWriteTxnMarkers(b *Broker, r *Request) {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	b.markers.WriteTxnMarkers(req, func(resp *kmsg.WriteTxnMarkersResponse) { r.Respond(resp) })
}
