// OffsetCommit (key 8), versions 0-9.
//
// Commits offsets (with leader epoch, v6+, and metadata up to
// offset.metadata.max.bytes) to __consumer_offsets; answers once the records are
// durable, and only then are the offsets served by OffsetFetch. Members of a group
// commit with their generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS fence stale ones); a commit with
// generation -1 and no member id (a "simple" consumer) is accepted while the group has
// no members. Members of a consumer group (KIP-848) commit with v9+, their member id
// and member epoch as the generation: an epoch ahead of the member's, or, per
// partition, older than the epoch the partition was assigned at, is
// STALE_MEMBER_EPOCH (the rule as Kafka 4.3 relaxed it; 4.0 required the current epoch),
// an unknown member UNKNOWN_MEMBER_ID, v8 or older UNSUPPORTED_VERSION. v2-v4
// retention times set an explicit expiry. Partitions of topics the
// cluster does not have get UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
//
// Not served: v10+ (topic ids).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(API{Key: 8, MinVersion: 0, MaxVersion: 9, Handle: handleOffsetCommit})
}

func handleOffsetCommit(b *Broker, r *Request) {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = req.Version
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	known := *req
	known.Topics = nil
	im := b.meta.Image()
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		ti, ok := im.Topic(t.Topic)
		kt := kmsg.OffsetCommitRequestTopic{Topic: t.Topic}
		for j, p := range t.Partitions {
			rt.Partitions[j].Partition = p.Partition
			if !ok || p.Partition < 0 || int(p.Partition) >= len(ti.Partitions) {
				rt.Partitions[j].ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			rt.Partitions[j].ErrorCode = -1 // filled from the coordinator's answer
			kt.Partitions = append(kt.Partitions, p)
		}
		if len(kt.Partitions) > 0 {
			known.Topics = append(known.Topics, kt)
		}
	}
	fill := func(code func() int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == -1 {
					resp.Topics[i].Partitions[j].ErrorCode = code()
				}
			}
		}
		r.Respond(resp)
	}
	if len(known.Topics) == 0 {
		r.Respond(resp)
		return
	}
	c := b.groupCoordinatorOr(func(code int16) { fill(func() int16 { return code }) })
	if c == nil {
		return
	}
	c.OffsetCommit(&known, func(kr *kmsg.OffsetCommitResponse) {
		// known keeps the request's order: walk both in step.
		var codes []int16
		for _, t := range kr.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
		fill(func() int16 {
			if len(codes) == 0 {
				return kerr.UnknownServerError.Code
			}
			c := codes[0]
			codes = codes[1:]
			return c
		})
	})
}
