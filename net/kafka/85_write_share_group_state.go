// WriteShareGroupState (key 85), versions 0-1 (KIP-932): inter-broker.
//
// A share partition's leader writes the partition's state to its share coordinator
// (the leader of the key's __share_group_state partition, shares.go); the answer
// leaves once the record is durable there (acks=all on the replicated partition).
// Per partition, after the checks of Kafka's ShareCoordinatorShard (INVALID_REQUEST
// for a negative partition, UNKNOWN_TOPIC_OR_PARTITION for a topic partition the
// metadata does not hold): NOT_COORDINATOR when this broker does not lead the state
// partition, COORDINATOR_LOAD_IN_PROGRESS while it loads it, FENCED_LEADER_EPOCH for
// a write of an older data-partition leader than the last writer. CLUSTER_ACTION with
// ACLs.
//
// Differences from Apache Kafka: the batches replace the whole state (Kafka's
// coordinator merges them into the stored state); DeliveryCompleteCount (v1) is
// ignored.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/share"
)

func init() {
	register(API{Key: 85, MinVersion: 0, MaxVersion: 1, Handle: handleWriteShareGroupState})
}

func handleWriteShareGroupState(b *Broker, r *Request) {
	req := r.Body.(*kmsg.WriteShareGroupStateRequest)
	resp := kmsg.NewPtrWriteShareGroupStateResponse()
	resp.Version = req.Version
	var items []shareStateItem
	snaps := map[share.Key]*share.Snapshot{}
	resp.Topics = make([]kmsg.WriteShareGroupStateResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.WriteShareGroupStateResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			snap := &share.Snapshot{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset}
			for _, sb := range p.StateBatches {
				snap.Batches = append(snap.Batches, share.Batch{First: sb.FirstOffset, Last: sb.LastOffset, State: share.State(sb.DeliveryState), Count: sb.DeliveryCount})
			}
			k := share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			snaps[k] = snap
			items = append(items, shareStateItem{key: k, answer: func(code int16, msg *string) { rp.ErrorCode, rp.ErrorMessage = code, msg }})
		}
	}
	b.serveShareState(items, func(st *share.Store, k share.Key, done func(error)) {
		st.Write(k, snaps[k], done)
	}, func() { r.Respond(resp) })
}
