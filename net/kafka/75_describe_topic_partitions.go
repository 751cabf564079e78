// DescribeTopicPartitions (key 75), version 0 (KIP-966): topics and their
// partitions, as Metadata reports them, paged by a partition count with a cursor.
// Kafka 3.8+ admin clients describe topics with it.
//
// Topics: the ones asked for, or every topic when the list is empty, in name order;
// with a Cursor the answer starts at its topic (which must be one of those asked
// for: else INVALID_REQUEST) and partition. At most ResponsePartitionLimit
// partitions are answered, capped at max.request.partition.size.limit (2,000, as
// Kafka's default; the key is not configurable here); when more remain, NextCursor
// names the first one left out. Unknown topics: UNKNOWN_TOPIC_OR_PARTITION; invalid
// names INVALID_TOPIC_EXCEPTION. Partitions carry their leader, leader epoch,
// replicas, ISR and offline replicas as in Metadata, and the eligible leader replicas
// and last known ELR (KIP-966, kept at eligible.leader.replicas.version 1; empty
// otherwise) that Metadata does not report, as Kafka. Authorization (authz.DescribeTopicPartitions): DESCRIBE on
// each topic, as Kafka.

package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 75, MinVersion: 0, MaxVersion: 0, Handle: handleDescribeTopicPartitions, Authz: authz.DescribeTopicPartitions})
}

// maxPartitionsPerDescribe is max.request.partition.size.limit's default.
const maxPartitionsPerDescribe = 2000

func handleDescribeTopicPartitions(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DescribeTopicPartitionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	im := b.meta.Image()
	var names []string
	if len(req.Topics) == 0 {
		for _, t := range im.Topics() {
			names = append(names, t.Name)
		}
	} else {
		for _, t := range req.Topics {
			names = append(names, t.Topic)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	start, startPart := 0, int32(0)
	if c := req.Cursor; c != nil {
		i, found := slices.BinarySearch(names, c.Topic)
		if !found || c.Partition < 0 {
			resp.Topics = nil
			for _, n := range names {
				rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
				rt.Topic, rt.ErrorCode, rt.AuthorizedOperations = kmsg.StringPtr(n), kerr.InvalidRequest.Code, authorizedOpsUnknown
				resp.Topics = append(resp.Topics, rt)
			}
			r.Respond(resp)
			return
		}
		start, startPart = i, c.Partition
	}
	limit := req.ResponsePartitionLimit
	if limit <= 0 || limit > maxPartitionsPerDescribe {
		limit = maxPartitionsPerDescribe
	}
	offline := b.dirs.Offline()
	left := limit
	for i := start; i < len(names); i++ {
		name := names[i]
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.AuthorizedOperations = kmsg.StringPtr(name), authorizedOpsUnknown
		t, ok := im.Topic(name)
		if !ok {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if metadata.ValidTopicName(name) != nil {
				rt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		from := int32(0)
		if i == start {
			from = startPart
		}
		if left == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: from}
			break
		}
		mt := b.metadataTopic(im, t, offline)
		rt.TopicID, rt.IsInternal = mt.TopicID, mt.IsInternal
		rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		for p := from; p < int32(len(mt.Partitions)); p++ {
			if left == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: p}
				break
			}
			mp := mt.Partitions[p]
			ip := t.Partitions[p]
			rt.Partitions = append(rt.Partitions, kmsg.DescribeTopicPartitionsResponseTopicPartition{
				ErrorCode: mp.ErrorCode, Partition: mp.Partition, LeaderID: mp.Leader, LeaderEpoch: mp.LeaderEpoch,
				Replicas: mp.Replicas, ISR: mp.ISR, EligibleLeaderReplicas: orEmpty(slices.Clone(ip.ELR)),
				LastKnownELR: orEmpty(slices.Clone(ip.LastKnownELR)), OfflineReplicas: orEmpty(mp.OfflineReplicas),
			})
			left--
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	r.Respond(resp)
}

func orEmpty(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
