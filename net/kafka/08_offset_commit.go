// OffsetCommit (key 8), versions 0-10.
//
// Commits offsets (with leader epoch, v6+, and metadata up to
// offset.metadata.max.bytes) to __consumer_offsets; answers once the records are
// durable, and only then are the offsets served by OffsetFetch. Members of a group
// commit with their generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS fence stale ones); a commit with
// generation -1 and no member id (a "simple" consumer) is accepted while the group has
// no members. A commit with a generation to a group that does not exist is
// ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9 on, as Kafka. Members of a
// consumer group (KIP-848) commit with v9+, their member id and member epoch as the
// generation: an epoch ahead of the member's, or, per partition, older than the epoch
// the partition was assigned at, is STALE_MEMBER_EPOCH (the rule as Kafka 4.3
// relaxed it; 4.0 required the current epoch), an unknown member UNKNOWN_MEMBER_ID, v8
// or older UNSUPPORTED_VERSION. v2-v4 retention times set an explicit expiry.
// Partitions of topics the cluster does not have get UNKNOWN_TOPIC_OR_PARTITION, as
// in Kafka.
//
// v10 (KIP-848's follow-up, stable since Kafka 4.2) names topics by id only, in the
// request and the answer: an id the metadata image does not know (the zero id too)
// answers UNKNOWN_TOPIC_ID on each of its partitions, as KafkaApis does; a known id
// commits under the topic's name, as offsets are kept by name. An id of a deleted topic is
// unknown, so a commit by the old id of a topic re-created under the same name never
// reaches the new topic; the coordinator checks the id once more against its own
// topics when it writes (coordinator/group's OffsetCommit).
//
// Differences from Apache Kafka: the answer keeps the request's order, topics refused
// by authorisation last (Kafka lists every refused topic first). Kafka 4.4 also stores
// the topic id beside each offset and OffsetFetch v10 answers -1 for an id other than
// the stored one; Samsa stores names only (see 09_offset_fetch.go).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 8, MinVersion: 0, MaxVersion: 10, Handle: handleOffsetCommit, Authz: authz.OffsetCommit})
}

// groupTopic resolves a topic of an offset request (OffsetCommit, TxnOffsetCommit,
// OffsetFetch) in im: by id when byID (the versions that name topics by id), else by
// name. Unknown, it is nil with the code for its partitions: UNKNOWN_TOPIC_ID by id,
// UNKNOWN_TOPIC_OR_PARTITION by name.
func groupTopic(im *metadata.Image, byID bool, name string, id [16]byte) (*metadata.TopicImage, int16) {
	if byID {
		if t, ok := im.TopicByID(metadata.UUID(id)); ok {
			return t, 0
		}
		return nil, kerr.UnknownTopicID.Code
	}
	if t, ok := im.Topic(name); ok {
		return t, 0
	}
	return nil, kerr.UnknownTopicOrPartition.Code
}

func handleOffsetCommit(b *Broker, r *Request) {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = req.Version
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	known := *req
	known.Topics = nil
	im := b.meta.Image()
	var cs commitSplit
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		name := cs.topic(im, req.Version >= 10, t.Topic, t.TopicID)
		kt := kmsg.OffsetCommitRequestTopic{Topic: name, TopicID: t.TopicID}
		for j, p := range t.Partitions {
			rt.Partitions[j].Partition = p.Partition
			if rt.Partitions[j].ErrorCode = cs.partition(p.Partition); rt.Partitions[j].ErrorCode == -1 {
				kt.Partitions = append(kt.Partitions, p)
			}
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
		var codes []int16
		for _, t := range kr.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
		fill(codesInOrder(codes))
	})
}

// commitSplit sorts the partitions of an OffsetCommit's or a TxnOffsetCommit's topics
// into those the group coordinator answers and those answered at once: topic resolves
// a topic (groupTopic) and returns the name the coordinator keys it by; partition
// then returns -1 for a partition of it the coordinator is to answer, else the error.
type commitSplit struct {
	t    *metadata.TopicImage
	code int16
}

func (cs *commitSplit) topic(im *metadata.Image, byID bool, name string, id [16]byte) string {
	if cs.t, cs.code = groupTopic(im, byID, name, id); cs.t != nil {
		return cs.t.Name
	}
	return ""
}

func (cs *commitSplit) partition(p int32) int16 {
	switch {
	case cs.t == nil:
		return cs.code
	case p < 0 || int(p) >= len(cs.t.Partitions):
		return kerr.UnknownTopicOrPartition.Code
	}
	return -1 // filled from the coordinator's answer
}

// codesInOrder hands out a coordinator's codes in the order of its answer, which keeps
// the request's order of the partitions it was given (UNKNOWN_SERVER_ERROR past
// its end).
func codesInOrder(codes []int16) func() int16 {
	return func() int16 {
		if len(codes) == 0 {
			return kerr.UnknownServerError.Code
		}
		c := codes[0]
		codes = codes[1:]
		return c
	}
}
