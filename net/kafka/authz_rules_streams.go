package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// The streams groups' rules of authz.go (KIP-1071), as Kafka's KafkaApis checks them:
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
// when asked.

func init() {
	authzRules[streamsGroupHeartbeatKey] = authzStreamsGroupHeartbeat
	authzRules[streamsGroupDescribeKey] = authzStreamsGroupDescribe
}

// authzStreamsGroupHeartbeat: READ on the group, DESCRIBE on the topology's topics
// (both refused whole).
func authzStreamsGroupHeartbeat(az *authz) bool {
	req := az.r.Body.(*kmsg.StreamsGroupHeartbeatRequest)
	if !az.group(opRead, req.Group) {
		az.refuseAll(codeGroup)
		return false
	}
	topics := group.StreamsTopologyTopics(req.Topology)
	if invalidTopologyTopics(topics) != "" {
		return true // the handler refuses the topology before any topic is checked, as Kafka
	}
	for _, t := range topics {
		if !az.topic(opDescribe, t) {
			az.refuseAll(codeTopic)
			return false
		}
	}
	return true
}

// authzStreamsGroupDescribe: DESCRIBE on each group and on the topics of its topology
// (amended), authorized operations from the ACLs.
func authzStreamsGroupDescribe(az *authz) bool {
	req := az.r.Body.(*kmsg.StreamsGroupDescribeRequest)
	az.r.amend = func(resp kmsg.Response) {
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
	}
	return true
}

// createDenied returns the topics of topics the principal of r may not create: none
// when it may CREATE on the cluster (or there is no authorizer, or it is a super user).
func (b *Broker) createDenied(r *Request, topics []string) []string {
	cs := r.sec
	if cs == nil || cs.l.sec.Authorizer == nil {
		return nil
	}
	az := &authz{log: b.log, r: r, a: cs.l.sec.Authorizer, ctx: cs.ctx}
	_, az.im = b.Image()
	az.a.Update(az.im.ACLs())
	if az.a.IsSuperUser(az.ctx.Principal) || az.cluster(opCreate) {
		return nil
	}
	var denied []string
	for _, t := range topics {
		if !az.topic(opCreate, t) {
			denied = append(denied, t)
		}
	}
	return denied
}
