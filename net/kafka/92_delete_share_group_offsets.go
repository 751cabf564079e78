// DeleteShareGroupOffsets (key 92), version 0 (KIP-932).
//
// Asked of a share group's coordinator: deletes the share-partition state of every
// partition of each named topic from __share_group_state (DeleteShareGroupState to
// each partition's share coordinator: a tombstone), then the topic from the group's
// ShareGroupStatePartitionMetadata, as Kafka does; the group's next use of the topic
// initializes it again and starts where share.auto.offset.reset says. A leader still
// holding the deleted state has its next write refused (the share partition is
// uninitialized) and reads it again. The group must have no members
// (NON_EMPTY_GROUP); a topic the image does not know answers
// UNKNOWN_TOPIC_OR_PARTITION. With ACLs: DELETE on the group, READ on each topic
// (authz.DeleteShareGroupOffsets).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 92, MinVersion: 0, MaxVersion: 0, Handle: handleDeleteShareGroupOffsets, Authz: authz.DeleteShareGroupOffsets})
}

func handleDeleteShareGroupOffsets(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
	resp.Version = req.Version
	fail := func(code int16) {
		resp.ErrorCode = code
		r.Respond(resp)
	}
	if !b.emptyShareGroup(req.GroupID, fail) {
		return
	}
	im := b.meta.Image()
	type reset struct {
		topic int
		key   share.Key
	}
	var resets []reset
	resp.Topics = make([]kmsg.DeleteShareGroupOffsetsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		out.Topic = rt.Topic
		t, ok := im.Topic(rt.Topic)
		if !ok {
			out.ErrorCode = kerr.UnknownTopicOrPartition.Code
			continue
		}
		out.TopicID = [16]byte(t.ID)
		for p := range t.Partitions {
			resets = append(resets, reset{topic: i, key: share.Key{Group: req.GroupID, TopicID: [16]byte(t.ID), Partition: int32(p)}})
		}
	}
	eachShareState(len(resets), func(i int, finish func(int16)) {
		b.shares.states.Delete(resets[i].key, finish)
	}, func(i int, code int16) {
		if out := &resp.Topics[resets[i].topic]; out.ErrorCode == 0 {
			out.ErrorCode = code
		}
	}, func() {
		// The topics whose state is gone leave the group's share-state record.
		var gone [][16]byte
		for _, out := range resp.Topics {
			if out.ErrorCode == 0 && out.TopicID != [16]byte{} {
				gone = append(gone, out.TopicID)
			}
		}
		c := b.coord.Group()
		if len(gone) == 0 || c == nil {
			r.Respond(resp)
			return
		}
		c.ForgetShareState(req.GroupID, gone, func(code int16) {
			if code != 0 {
				resp.ErrorCode = code
			}
			r.Respond(resp)
		})
	})
}
