package authz

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// The streams groups' rules (KIP-1071), as Kafka's KafkaApis checks them:
// READ on the group for StreamsGroupHeartbeat (the whole request refused with
// GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every topic of a joining member's
// topology (source, repartition and changelog topics; any refused one refuses the
// request with TOPIC_AUTHORIZATION_FAILED); CREATE on the cluster, else on each
// internal topic the group misses, before the broker creates them (checked by the
// handler, 88_streams_group_heartbeat.go, once the coordinator named them: the topics
// refused are named in the MISSING_INTERNAL_TOPICS status). DESCRIBE on each group of
// StreamsGroupDescribe and on every topic of its topology (amended: a refused group
// answers GROUP_AUTHORIZATION_FAILED, one naming a topic the principal may not
// describe TOPIC_AUTHORIZATION_FAILED), with the authorized operations from the ACLs
// when asked. The CREATE check is CreateDenied.

// StreamsGroupHeartbeat returns the rule of StreamsGroupHeartbeat: READ on the group,
// then DESCRIBE on the topics of the member's topology (both refused whole).
// topologyTopics names those topics, or reports false when the handler refuses the
// topology's topic names before any topic is checked, as Kafka does (the handler's
// own check: internal or invalid names).
func StreamsGroupHeartbeat(topologyTopics func(*kmsg.StreamsGroupHeartbeatRequestTopology) ([]string, bool)) Rule {
	return func(az *Check) Decision {
		req := az.req.Body.(*kmsg.StreamsGroupHeartbeatRequest)
		if !az.group(opRead, req.Group) {
			return az.refuseAll(codeGroup)
		}
		topics, ok := topologyTopics(req.Topology)
		if !ok {
			return Decision{}
		}
		for _, t := range topics {
			if !az.topic(opDescribe, t) {
				return az.refuseAll(codeTopic)
			}
		}
		return Decision{}
	}
}

// StreamsGroupDescribe: DESCRIBE on each group and on the topics of its topology
// (amended), authorized operations from the ACLs.
func StreamsGroupDescribe(az *Check) Decision {
	req := az.req.Body.(*kmsg.StreamsGroupDescribeRequest)
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.StreamsGroupDescribeResponse)
		for i := range r.Groups {
			g := &r.Groups[i]
			if !az.group(opDescribe, g.Group) {
				ng := kmsg.NewStreamsGroupDescribeResponseGroup()
				ng.Group, ng.ErrorCode = g.Group, codeGroup
				*g = ng
				continue
			}
			if g.ErrorCode != 0 {
				continue
			}
			if t := g.Topology; t != nil {
				for _, s := range t.Subtopologies {
					names := append(append([]string{}, s.SourceTopics...), s.RepartitionSinkTopics...)
					for _, ti := range append(append([]kmsg.TopicInfo{}, s.StateChangelogTopics...), s.RepartitionSourceTopics...) {
						names = append(names, ti.Topic)
					}
					for _, n := range names {
						if !az.topic(opDescribe, n) {
							ng := kmsg.NewStreamsGroupDescribeResponseGroup()
							msg := "The described group uses topics that the client is not authorized to describe."
							ng.Group, ng.ErrorCode, ng.ErrorMessage = g.Group, codeTopic, &msg
							*g = ng
							break
						}
					}
					if g.ErrorCode != 0 {
						break
					}
				}
			}
			if g.ErrorCode == 0 && req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = az.a.AuthorizedOperations(az.ctx, metadata.ACLResourceGroup, g.Group)
			}
		}
	})
}
