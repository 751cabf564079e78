// ReadShareGroupStateSummary (key 87), versions 0-1 (KIP-932; v1: KIP-1226's
// DeliveryCompleteCount): inter-broker.
//
// The group coordinator reads a share partition's summary from its share coordinator,
// the leader of the key's __share_group_state partition (shares_state.go), for
// DescribeShareGroupOffsets. Per partition, as Kafka's
// ShareCoordinatorShard.readStateSummary: the state epoch, the leader epoch of the
// last write, the share-partition start offset and (v1) the number of offsets at or
// above it whose delivery is complete (acknowledged or archived; -1 while the start
// is -1); a key without state answers StartOffset -1, epochs 0 and
// DeliveryCompleteCount -1. INVALID_REQUEST for a negative partition;
// UNKNOWN_TOPIC_OR_PARTITION for a topic partition the metadata does not hold;
// NOT_COORDINATOR when this broker does not lead the state partition,
// COORDINATOR_LOAD_IN_PROGRESS while it loads it. An empty GroupID or Topics, or a
// topic without partitions, answers no topics, as Kafka's ShareCoordinatorService
// does. CLUSTER_ACTION with ACLs.
//
// Differences from Apache Kafka: the answer lists the topics in request order; the
// request's LeaderEpoch is not read (Kafka's summary does not read it either).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/share"
)

func init() {
	register(API{Key: 87, MinVersion: 0, MaxVersion: 1, Handle: handleReadShareGroupStateSummary})
}

func handleReadShareGroupStateSummary(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ReadShareGroupStateSummaryRequest)
	resp := kmsg.NewPtrReadShareGroupStateSummaryResponse()
	resp.Version = req.Version
	if req.GroupID == "" || len(req.Topics) == 0 {
		r.Respond(resp)
		return
	}
	for _, t := range req.Topics {
		if len(t.Partitions) == 0 {
			r.Respond(resp)
			return
		}
	}
	var items []shareStateItem
	parts := map[share.Key]*kmsg.ReadShareGroupStateSummaryResponseTopicPartition{}
	resp.Topics = make([]kmsg.ReadShareGroupStateSummaryResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewReadShareGroupStateSummaryResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.ReadShareGroupStateSummaryResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			rp.Partition, rp.StartOffset = p.Partition, -1
			k := share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			parts[k] = rp
			items = append(items, shareStateItem{key: k, answer: func(code int16, msg *string) { rp.ErrorCode, rp.ErrorMessage = code, msg }})
		}
	}
	b.serveShareState(items, func(st *share.Store, k share.Key, done func(error)) {
		s, err := st.Summary(k)
		if err == nil {
			rp := parts[k]
			rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = s.StateEpoch, s.LeaderEpoch, s.StartOffset, s.DeliveryComplete
		}
		done(err)
	}, func() { r.Respond(resp) })
}
