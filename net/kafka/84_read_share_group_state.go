// ReadShareGroupState (key 84), version 0 (KIP-932): inter-broker.
//
// A share partition's leader reads the partition's state from its share coordinator,
// the leader of the key's __share_group_state partition (shares.go). Per partition:
// the state epoch, start offset and state batches; INVALID_REQUEST ("Read operation
// on uninitialized share partition not allowed.", as Kafka) when the share partition
// has no state (never initialized by InitializeShareGroupState, or deleted);
// INVALID_REQUEST for a negative partition and UNKNOWN_TOPIC_OR_PARTITION for a topic
// partition the metadata does not hold, as Kafka's ShareCoordinatorShard checks a
// read; NOT_COORDINATOR when this broker does not lead the state partition,
// COORDINATOR_LOAD_IN_PROGRESS while it loads it. CLUSTER_ACTION with ACLs.
//
// Differences from Apache Kafka: the leader epoch of the request is not checked nor
// recorded (Kafka's read with a newer leader epoch writes it, fencing older leaders'
// writes; here writes are fenced by their own leader epoch).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/net/wire"
)

func init() {
	register(API{Key: 84, MinVersion: 0, MaxVersion: 0, Handle: handleReadShareGroupState})
}

func handleReadShareGroupState(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ReadShareGroupStateRequest)
	resp := kmsg.NewPtrReadShareGroupStateResponse()
	resp.Version = req.Version
	var items []shareStateItem
	parts := map[share.Key]*kmsg.ReadShareGroupStateResponseTopicPartition{}
	resp.Topics = make([]kmsg.ReadShareGroupStateResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.ReadShareGroupStateResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition, rp.StateEpoch, rp.StartOffset = p.Partition, -1, -1
			k := share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			parts[k] = rp
			items = append(items, shareStateItem{key: k, answer: func(code int16, msg *string) {
				if rp.ErrorCode == 0 {
					rp.ErrorCode, rp.ErrorMessage = code, msg
				}
			}})
		}
	}
	b.serveShareState(items, func(st *share.Store, k share.Key, done func(error)) {
		snap, found, err := st.Read(k)
		rp := parts[k]
		switch {
		case err == nil && !found:
			rp.ErrorCode = kerr.InvalidRequest.Code
			rp.ErrorMessage = wire.MessageOr(rp.ErrorCode, "Read operation on uninitialized share partition not allowed.")
		case err == nil:
			rp.StateEpoch, rp.StartOffset = snap.StateEpoch, snap.StartOffset
			for _, sb := range snap.Batches {
				rp.StateBatches = append(rp.StateBatches, kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{
					FirstOffset: sb.First, LastOffset: sb.Last, DeliveryState: int8(sb.State), DeliveryCount: sb.Count})
			}
		}
		done(err)
	}, func() { r.Respond(resp) })
}
