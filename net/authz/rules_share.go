package authz

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The share groups' rules (KIP-932), as Kafka checks them: READ on the
// group for ShareGroupHeartbeat, ShareFetch and ShareAcknowledge (the whole request
// refused with GROUP_AUTHORIZATION_FAILED), READ on each topic of ShareFetch and
// ShareAcknowledge (split: refused partitions answer TOPIC_AUTHORIZATION_FAILED),
// DESCRIBE on each group of ShareGroupDescribe (amended), DESCRIBE on each group and
// topic of DescribeShareGroupOffsets (amended), READ (Alter) or DELETE (Delete) on the
// group and READ on each topic of AlterShareGroupOffsets and DeleteShareGroupOffsets
// (split). ReadShareGroupState and WriteShareGroupState are CLUSTER_ACTION rows
// (clusterRow). Not done: Kafka also asks DESCRIBE on the subscribed topics of a
// ShareGroupHeartbeat and leaves the undescribable ones out of the subscription.

// ShareGroupHeartbeat: READ on the group (refused whole).
func ShareGroupHeartbeat(az *Check) Decision {
	return az.oneGroup(opRead, az.req.Body.(*kmsg.ShareGroupHeartbeatRequest).GroupID)
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ShareGroupDescribe: DESCRIBE on each group (amended).
func ShareGroupDescribe(az *Check) Decision {
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.ShareGroupDescribeResponse)
		for i := range r.Groups {
			g := &r.Groups[i]
			if !az.group(opDescribe, g.GroupID) {
				ng := kmsg.NewShareGroupDescribeResponseGroup()
				ng.GroupID, ng.ErrorCode = g.GroupID, codeGroup
				*g = ng
			}
		}
	})
}

// ShareFetch: READ on the group (refused whole), READ on each topic (split).
func ShareFetch(az *Check) Decision {
	req := az.req.Body.(*kmsg.ShareFetchRequest)
	if !az.group(opRead, strOr(req.GroupID)) {
		return az.refuseAll(codeGroup)
	}
	var allowed []kmsg.ShareFetchRequestTopic
	var refused []kmsg.ShareFetchResponseTopic
	for _, t := range req.Topics {
		if az.topicOK(opRead, "", t.TopicID) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewShareFetchResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewShareFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codeTopic
			if len(p.AcknowledgementBatches) > 0 {
				rp.AcknowledgeErrorCode = codeTopic
			}
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		refused = append(refused, rt)
	}
	if len(refused) == 0 {
		return Decision{}
	}
	// Unlike other splits, a request left without topics still runs: it carries the
	// session's epoch, which must move on.
	req.Topics = allowed
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.ShareFetchResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// ShareAcknowledge: READ on the group (refused whole), READ on each topic
// (split).
func ShareAcknowledge(az *Check) Decision {
	req := az.req.Body.(*kmsg.ShareAcknowledgeRequest)
	if !az.group(opRead, strOr(req.GroupID)) {
		return az.refuseAll(codeGroup)
	}
	var allowed []kmsg.ShareAcknowledgeRequestTopic
	var refused []kmsg.ShareAcknowledgeResponseTopic
	for _, t := range req.Topics {
		if az.topicOK(opRead, "", t.TopicID) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codeTopic
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		refused = append(refused, rt)
	}
	if len(refused) == 0 {
		return Decision{}
	}
	req.Topics = allowed
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.ShareAcknowledgeResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// DescribeShareGroupOffsets: DESCRIBE on each group and on each topic (amended:
// a refused group answers GROUP_AUTHORIZATION_FAILED, a refused topic's partitions
// TOPIC_AUTHORIZATION_FAILED; with every topic asked, refused topics are left out).
func DescribeShareGroupOffsets(az *Check) Decision {
	req := az.req.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	all := map[string]bool{}
	for _, g := range req.Groups {
		all[g.GroupID] = g.Topics == nil
	}
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.DescribeShareGroupOffsetsResponse)
		for i := range r.Groups {
			g := &r.Groups[i]
			if !az.group(opDescribe, g.GroupID) {
				ng := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
				ng.GroupID, ng.ErrorCode = g.GroupID, codeGroup
				*g = ng
				continue
			}
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				if az.topic(opDescribe, t.Topic) {
					kept = append(kept, t)
					continue
				}
				if all[g.GroupID] {
					continue
				}
				for j := range t.Partitions {
					t.Partitions[j] = kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition{Partition: t.Partitions[j].Partition,
						StartOffset: -1, LeaderEpoch: -1, Lag: -1, ErrorCode: codeTopic}
				}
				kept = append(kept, t)
			}
			g.Topics = kept
		}
	})
}

// AlterShareGroupOffsets: READ on the group (refused whole), READ on each topic
// (split).
func AlterShareGroupOffsets(az *Check) Decision {
	req := az.req.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	if !az.group(opRead, req.GroupID) {
		return az.refuseAll(codeGroup)
	}
	var allowed []kmsg.AlterShareGroupOffsetsRequestTopic
	var refused []kmsg.AlterShareGroupOffsetsResponseTopic
	for _, t := range req.Topics {
		if az.topic(opRead, t.Topic) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.AlterShareGroupOffsetsResponseTopicPartition{Partition: p.Partition, ErrorCode: codeTopic})
		}
		refused = append(refused, rt)
	}
	return az.split(len(allowed), len(refused), func() { req.Topics = allowed }, func(resp kmsg.Response) {
		r := resp.(*kmsg.AlterShareGroupOffsetsResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// DeleteShareGroupOffsets: DELETE on the group (refused whole), READ on each
// topic (split).
func DeleteShareGroupOffsets(az *Check) Decision {
	req := az.req.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	if !az.group(opDelete, req.GroupID) {
		return az.refuseAll(codeGroup)
	}
	var allowed []kmsg.DeleteShareGroupOffsetsRequestTopic
	var refused []kmsg.DeleteShareGroupOffsetsResponseTopic
	for _, t := range req.Topics {
		if az.topic(opRead, t.Topic) {
			allowed = append(allowed, t)
			continue
		}
		refused = append(refused, kmsg.DeleteShareGroupOffsetsResponseTopic{Topic: t.Topic, ErrorCode: codeTopic})
	}
	return az.split(len(allowed), len(refused), func() { req.Topics = allowed }, func(resp kmsg.Response) {
		r := resp.(*kmsg.DeleteShareGroupOffsetsResponse)
		r.Topics = append(r.Topics, refused...)
	})
}
