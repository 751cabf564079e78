package group

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StreamsAssignorName is the task assignor of streams groups (Kafka's default and only
// one: "sticky").
const StreamsAssignorName = "sticky"

// Topology description statuses of StreamsGroupDescribe v1.
const (
	topologyDescriptionNotRequested = 0
	topologyDescriptionNotStored    = 1
)

// StreamsGroupDescribe handles StreamsGroupDescribe (v0-v1): each streams group's state
// (Empty, NotReady, Assigning, Reconciling, Stable), group and assignment epochs,
// topology (configured, with the partition counts of its internal topics, once it is
// ready; as the members sent it before) and members with their process, endpoint,
// client tags, current assignment (what they own, not what they still revoke) and
// target assignment. Groups that do not exist, or are not streams groups, get
// GROUP_ID_NOT_FOUND. v1: the assignor's name; a topology description asked for is
// NOT_STORED (descriptions are not kept: StreamsGroupTopologyDescriptionUpdate is not
// served). Task offsets are not kept, so members list none.
func (c *Coordinator) StreamsGroupDescribe(req *kmsg.StreamsGroupDescribeRequest) *kmsg.StreamsGroupDescribeResponse {
	r := kmsg.NewPtrStreamsGroupDescribeResponse()
	r.Version = req.Version
	for _, id := range req.Groups {
		out := kmsg.NewStreamsGroupDescribeResponseGroup()
		out.Group = id
		if req.IncludeAuthorizedOperations {
			out.AuthorizedOperations = groupOperations
		}
		out.ErrorCode, out.ErrorMessage = c.describeModern(id, kindStreams, func(g *group) { g.st.describe(&out) })
		if out.ErrorCode == 0 && req.Version >= 1 {
			name := StreamsAssignorName
			out.AssignorName = &name
			if req.IncludeTopologyDescription {
				out.TopologyDescriptionStatus = topologyDescriptionNotStored
			} else {
				out.TopologyDescriptionStatus = topologyDescriptionNotRequested
			}
		}
		r.Groups = append(r.Groups, out)
	}
	return r
}

func describeTasks(t tasks) kmsg.StreamsAssignment {
	a := kmsg.NewStreamsAssignment()
	a.ActiveTasks = heartbeatTaskIDs(t.active)
	a.StandbyTasks = heartbeatTaskIDs(t.standby)
	a.WarmupTasks = heartbeatTaskIDs(t.warmup)
	return a
}

func (st *streamsState) describe(out *kmsg.StreamsGroupDescribeResponseGroup) {
	out.State, out.Epoch, out.AssignmentEpoch = st.stateName(), st.epoch, st.assignmentEpoch
	if st.topology != nil {
		out.Topology = describeTopology(st.topology, st.configured)
	}
	for _, id := range st.sortedIDs() {
		m := st.members[id]
		dm := kmsg.NewStreamsGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch, dm.InstanceID, dm.RackID = m.id, m.epoch, m.instanceID, m.rackID
		dm.ClientID, dm.ClientHost, dm.TopologyEpoch, dm.ProcessID = m.clientID, m.clientHost, m.topologyEpoch, m.processID
		if m.endpoint != nil {
			dm.UserEndpoint = &kmsg.StreamsGroupDescribeResponseGroupMemberUserEndpoint{Host: m.endpoint.Host, Port: m.endpoint.Port}
		}
		dm.ClientTags = []kmsg.StreamsGroupDescribeResponseGroupMemberClientTag{}
		for _, t := range m.clientTags {
			dm.ClientTags = append(dm.ClientTags, kmsg.StreamsGroupDescribeResponseGroupMemberClientTag{Key: t.Key, Value: t.Value})
		}
		dm.TaskOffsets, dm.TaskEndOffsets = []kmsg.TaskOffset{}, []kmsg.TaskOffset{}
		dm.Assignment = describeTasks(m.assigned)
		dm.TargetAssignment = describeTasks(st.targetOf(id))
		out.Members = append(out.Members, dm)
	}
	if out.Members == nil {
		out.Members = []kmsg.StreamsGroupDescribeResponseGroupMember{}
	}
}
