package group

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe handles ConsumerGroupDescribe (v0-v1): each consumer group's
// state, group and assignment epochs, assignor, and members with their epochs,
// subscriptions, current assignment (what they own, not what they still revoke) and
// target assignment. Groups that do not exist, or are not consumer groups, get
// GROUP_ID_NOT_FOUND.
func (c *Coordinator) ConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	r := kmsg.NewPtrConsumerGroupDescribeResponse()
	r.Version = req.Version
	im := c.topics.load()
	for _, id := range req.Groups {
		out := kmsg.NewConsumerGroupDescribeResponseGroup()
		out.Group = id
		if req.IncludeAuthorizedOperations {
			out.AuthorizedOperations = groupOperations
		}
		out.ErrorCode, out.ErrorMessage = c.describeModern(id, kindConsumer, func(g *group) { g.describeConsumerLocked(&out, im) })
		r.Groups = append(r.Groups, out)
	}
	return r
}

func describeAssignment(a assignment, im *topicImage) kmsg.Assignment {
	out := kmsg.NewAssignment()
	for _, tp := range assignmentRecordForm(a) {
		t := kmsg.NewAssignmentTopicPartition()
		t.TopicID, t.Partitions = tp.TopicID, tp.Partitions
		t.Topic = im.byID[tp.TopicID].Name
		out.TopicPartitions = append(out.TopicPartitions, t)
	}
	return out
}

func (g *group) describeConsumerLocked(out *kmsg.ConsumerGroupDescribeResponseGroup, im *topicImage) {
	cg := g.cg
	out.State, out.Epoch, out.AssignmentEpoch, out.AssignorName = cg.stateName(), cg.epoch, cg.assignmentEpoch, g.assignorLocked()
	for _, id := range cg.sortedIDs() {
		m := cg.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.id, m.instanceID, m.rackID, m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopics = append([]string{}, m.names...)
		dm.SubscribedTopicRegex = m.regex
		dm.Assignment = describeAssignment(m.assigned, im)
		dm.TargetAssignment = describeAssignment(cg.target[id], im)
		dm.MemberType = 1 // a member of the consumer protocol (classic members are not served)
		out.Members = append(out.Members, dm)
	}
}
