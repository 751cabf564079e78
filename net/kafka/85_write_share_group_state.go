// WriteShareGroupState (key 85), versions 0-1 (KIP-932): inter-broker.
//
// A share partition's leader writes the partition's state to its share coordinator
// (the leader of the key's __share_group_state partition, shares.go); the answer
// leaves once the record is durable there (acks=all on the replicated partition).
// Per partition: NOT_COORDINATOR when this broker does not lead the state partition,
// COORDINATOR_LOAD_IN_PROGRESS while it loads it, FENCED_LEADER_EPOCH for a write of
// an older data-partition leader than the last writer. CLUSTER_ACTION with ACLs.
//
// Differences from Apache Kafka: the batches replace the whole state (Kafka's
// coordinator merges them into the stored state); DeliveryCompleteCount (v1) is
// ignored.

package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
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
	st := b.coord.ShareStore()
	var mu sync.Mutex
	left := 1
	finish := func() {
		mu.Lock()
		left--
		last := left == 0
		mu.Unlock()
		if last {
			r.Respond(resp)
		}
	}
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
			switch {
			case !b.features().share:
				rp.ErrorCode = kerr.UnsupportedVersion.Code
				continue
			case st == nil:
				rp.ErrorCode = kerr.NotCoordinator.Code
				continue
			}
			snap := &share.Snapshot{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset}
			for _, sb := range p.StateBatches {
				snap.Batches = append(snap.Batches, share.Batch{First: sb.FirstOffset, Last: sb.LastOffset, State: share.State(sb.DeliveryState), Count: sb.DeliveryCount})
			}
			mu.Lock()
			left++
			mu.Unlock()
			st.Write(share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}, snap, func(err error) {
				mu.Lock()
				rp.ErrorCode = share.ErrorCode(err)
				mu.Unlock()
				finish()
			})
		}
	}
	finish()
}
