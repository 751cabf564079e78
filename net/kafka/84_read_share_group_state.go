// ReadShareGroupState (key 84), version 0 (KIP-932): inter-broker.
//
// A share partition's leader reads the partition's state from its share coordinator,
// the leader of the key's __share_group_state partition (shares.go). Per partition:
// the state epoch, start offset and state batches; INVALID_REQUEST ("Read operation
// on uninitialized share partition not allowed.", as Kafka) when the share partition
// has no state (never initialized by InitializeShareGroupState, or deleted);
// NOT_COORDINATOR when this broker does not lead the state partition,
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
	st := b.coord.ShareStore()
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition, rp.StateEpoch, rp.StartOffset = p.Partition, -1, -1
			switch {
			case !b.features().share:
				rp.ErrorCode = kerr.UnsupportedVersion.Code
			case st == nil:
				rp.ErrorCode = kerr.NotCoordinator.Code
			default:
				snap, found, err := st.Read(share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition})
				rp.ErrorCode = share.ErrorCode(err)
				if err == nil && !found {
					rp.ErrorCode = kerr.InvalidRequest.Code
					rp.ErrorMessage = wire.MessageOr(rp.ErrorCode, "Read operation on uninitialized share partition not allowed.")
				}
				if err == nil && found {
					rp.StateEpoch, rp.StartOffset = snap.StateEpoch, snap.StartOffset
					for _, sb := range snap.Batches {
						rp.StateBatches = append(rp.StateBatches, kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{
							FirstOffset: sb.First, LastOffset: sb.Last, DeliveryState: int8(sb.State), DeliveryCount: sb.Count})
					}
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}
