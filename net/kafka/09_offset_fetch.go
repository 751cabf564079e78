// OffsetFetch (key 9), versions 0-10.
//
// Committed offsets, leader epochs (v5+) and metadata from the coordinator's memory;
// partitions without a commit answer offset -1. A null topic list (v2+) returns every
// committed offset of the group; v8+ fetches a batch of groups (KIP-709). Offsets of a
// commit are visible only once it is durable; with RequireStable (v7+) a partition
// whose transactional offsets wait for their marker answers UNSTABLE_OFFSET_COMMIT,
// as Kafka (TxnOffsetCommit, see coordinator/group). v9+ members of a consumer group
// (KIP-848) fetch with their member id and epoch: another epoch is
// STALE_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID, as Kafka 4.
//
// v10 (KIP-848's follow-up, stable since Kafka 4.2) names topics by id only, in the
// request and the answer. As KafkaApis: a requested id the metadata image does not know (the zero id
// too) answers its partitions with offset -1 and UNKNOWN_TOPIC_ID, after the topics
// the coordinator answered, unless the group has an error; the offsets of all topics
// (a null list) leave out the topics the image does not know (deleted ones).
//
// A deleted topic's offsets are deleted from every group (as Kafka does:
// coordinator/group/topics_deleted.go), so a topic re-created under the same name
// fetches -1 until its group commits again.
//
// Differences from Apache Kafka: offsets are kept by topic name; Kafka, since v10,
// also stores the topic id beside each offset (a commit by the old id of a re-created
// topic is refused here too, 08_offset_commit.go).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 9, MinVersion: 0, MaxVersion: 10, Handle: handleOffsetFetch, Authz: authz.OffsetFetch})
}

func handleOffsetFetch(b *Broker, r *Request) {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrOffsetFetchResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		for _, g := range req.Groups {
			resp.Groups = append(resp.Groups, kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: code})
		}
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	if req.Version < 10 {
		r.Respond(c.OffsetFetch(req))
		return
	}
	// v10: the coordinator is asked by name; unknown ids are answered here.
	im := b.meta.Image()
	named := *req
	named.Groups = make([]kmsg.OffsetFetchRequestGroup, len(req.Groups))
	unknown := make([][]kmsg.OffsetFetchResponseGroupTopic, len(req.Groups))
	for i, g := range req.Groups {
		if g.Topics != nil {
			topics := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(g.Topics))
			for _, t := range g.Topics {
				ti, code := groupTopic(im, true, "", t.TopicID)
				if ti == nil {
					unknown[i] = append(unknown[i], unknownFetchTopic(t, code))
					continue
				}
				t.Topic = ti.Name
				topics = append(topics, t)
			}
			g.Topics = topics
		}
		named.Groups[i] = g
	}
	resp := c.OffsetFetch(&named)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		kept := g.Topics[:0]
		for _, t := range g.Topics {
			ti, ok := im.Topic(t.Topic)
			if !ok {
				continue // all offsets: a topic the image does not have
			}
			t.TopicID = [16]byte(ti.ID)
			kept = append(kept, t)
		}
		g.Topics = kept
		if g.ErrorCode == 0 && i < len(unknown) {
			g.Topics = append(g.Topics, unknown[i]...)
		}
	}
	r.Respond(resp)
}

// unknownFetchTopic answers a requested topic whose id is unknown: each partition
// with offset -1, leader epoch -1, empty metadata and code (Kafka's defaults).
func unknownFetchTopic(t kmsg.OffsetFetchRequestGroupTopic, code int16) kmsg.OffsetFetchResponseGroupTopic {
	out := kmsg.OffsetFetchResponseGroupTopic{TopicID: t.TopicID}
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p, -1, -1, kmsg.StringPtr(""), code
		out.Partitions = append(out.Partitions, rp)
	}
	return out
}
