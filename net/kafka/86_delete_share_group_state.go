// DeleteShareGroupState (key 86), version 0 (KIP-932): inter-broker.
//
// The group coordinator deletes a share partition's state at its share coordinator,
// the leader of the key's __share_group_state partition (shares_state.go), when its
// share group is deleted (DeleteGroups) or its offsets of the topic are
// (DeleteShareGroupOffsets). Per partition, as Kafka's ShareCoordinatorShard.deleteState:
// a tombstone for a key with state (none for one without), and the answer leaves once
// it is durable; the key is uninitialized again, so that a leader still holding its
// state has its next write refused, and a group re-created under the same id starts
// afresh. INVALID_REQUEST for a negative partition; UNKNOWN_TOPIC_OR_PARTITION for a
// topic partition the metadata does not hold; NOT_COORDINATOR when this broker does
// not lead the state partition, COORDINATOR_LOAD_IN_PROGRESS while it loads it. An
// empty GroupID or Topics, or a topic without partitions, answers no topics, as
// Kafka's ShareCoordinatorService does. CLUSTER_ACTION with ACLs.
//
// Differences from Apache Kafka: the answer lists the topics in request order.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/share"
)

func init() {
	register(API{Key: 86, MinVersion: 0, MaxVersion: 0, Handle: handleDeleteShareGroupState})
}

func handleDeleteShareGroupState(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DeleteShareGroupStateRequest)
	resp := kmsg.NewPtrDeleteShareGroupStateResponse()
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
	resp.Topics = make([]kmsg.DeleteShareGroupStateResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewDeleteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.DeleteShareGroupStateResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			items = append(items, shareStateItem{key: share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition},
				answer: func(code int16, msg *string) { rp.ErrorCode, rp.ErrorMessage = code, msg }})
		}
	}
	b.serveShareState(items, (*share.Store).Delete, func() { r.Respond(resp) })
}
