// InitializeShareGroupState (key 83), version 0 (KIP-932): inter-broker.
//
// The group coordinator initializes a share partition's state at its share
// coordinator, the leader of the key's __share_group_state partition (shares_state.go):
// when its share group first subscribes to the partition's topic (StartOffset -1: the
// share partition's leader picks the start by share.auto.offset.reset), and when
// AlterShareGroupOffsets sets the start. Per partition, as Kafka's
// ShareCoordinatorShard.initializeState: a fresh snapshot (state epoch and start
// offset of the request, leader epoch 0, nothing in flight) replaces any state, and the
// answer leaves once it is durable (acks=all on the replicated partition).
// FENCED_STATE_EPOCH when the stored state epoch is newer (a StateEpoch of -1 is not
// checked); INVALID_REQUEST for a negative partition; UNKNOWN_TOPIC_OR_PARTITION for a
// topic partition the metadata does not hold; NOT_COORDINATOR when this broker does
// not lead the state partition, COORDINATOR_LOAD_IN_PROGRESS while it loads it. An
// empty GroupID or Topics answers no topics, as Kafka's ShareCoordinatorService does.
// CLUSTER_ACTION with ACLs.
//
// Differences from Apache Kafka: the answer lists the topics in request order (Kafka's
// groups them by topic id in a hash map).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/share"
)

func init() {
	register(API{Key: 83, MinVersion: 0, MaxVersion: 0, Handle: handleInitializeShareGroupState})
}

func handleInitializeShareGroupState(b *Broker, r *Request) {
	req := r.Body.(*kmsg.InitializeShareGroupStateRequest)
	resp := kmsg.NewPtrInitializeShareGroupStateResponse()
	resp.Version = req.Version
	if req.GroupID == "" || len(req.Topics) == 0 {
		r.Respond(resp)
		return
	}
	var items []shareStateItem
	start := map[share.Key][2]int64{}
	resp.Topics = make([]kmsg.InitializeShareGroupStateResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewInitializeShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.InitializeShareGroupStateResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			k := share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			start[k] = [2]int64{int64(p.StateEpoch), p.StartOffset}
			items = append(items, shareStateItem{key: k, answer: func(code int16, msg *string) { rp.ErrorCode, rp.ErrorMessage = code, msg }})
		}
	}
	b.serveShareState(items, func(st *share.Store, k share.Key, done func(error)) {
		v := start[k]
		st.Initialize(k, int32(v[0]), v[1], done)
	}, func() { r.Respond(resp) })
}
