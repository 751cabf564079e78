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
// Differences from Apache Kafka: no authorization (CLUSTER_ACTION) is checked.

package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

func init() {
	register(API{Key: 27, MinVersion: 0, MaxVersion: 2, Handle: handleWriteTxnMarkers})
}

func handleWriteTxnMarkers(b *Broker, r *Request) {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	b.txns.writer.WriteTxnMarkers(req, func(resp *kmsg.WriteTxnMarkersResponse) { r.Respond(resp) })
}
