package controller

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrorResponse returns the response to req with code (and msg, where the version
// carries messages) on every item: what the controller answers when it is not
// active (NOT_CONTROLLER) or a change did not commit in time (REQUEST_TIMED_OUT).
// Other request types get their zero response.
func ErrorResponse(req kmsg.Request, code int16, msg string) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	var m *string
	if msg != "" {
		m = &msg
	}
	v := req.GetVersion()
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		out := resp.(*kmsg.BrokerRegistrationResponse)
		out.ErrorCode, out.BrokerEpoch = code, -1
	case *kmsg.BrokerHeartbeatRequest:
		out := resp.(*kmsg.BrokerHeartbeatResponse)
		out.ErrorCode, out.IsFenced = code, true
	case *kmsg.AlterPartitionRequest:
		resp.(*kmsg.AlterPartitionResponse).ErrorCode = code
	case *kmsg.AllocateProducerIDsRequest:
		resp.(*kmsg.AllocateProducerIDsResponse).ErrorCode = code
	case *kmsg.CreateTopicsRequest:
		out := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, code, -1, -1
			if v >= 1 {
				rt.ErrorMessage = m
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.DeleteTopicsRequest:
		out := resp.(*kmsg.DeleteTopicsResponse)
		if v < 6 {
			for _, name := range r.TopicNames {
				rt := kmsg.NewDeleteTopicsResponseTopic()
				rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), code
				out.Topics = append(out.Topics, rt)
			}
		} else {
			for _, t := range r.Topics {
				rt := kmsg.NewDeleteTopicsResponseTopic()
				rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = t.Topic, t.TopicID, code, m
				out.Topics = append(out.Topics, rt)
			}
		}
	case *kmsg.CreatePartitionsRequest:
		out := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, m
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.AlterConfigsRequest:
		out := resp.(*kmsg.AlterConfigsResponse)
		for _, res := range r.Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, code, m
			out.Resources = append(out.Resources, rr)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		out := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, res := range r.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, code, m
			out.Resources = append(out.Resources, rr)
		}
	case *kmsg.ElectLeadersRequest:
		out := resp.(*kmsg.ElectLeadersResponse)
		out.ErrorCode = code
		for _, t := range r.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, m
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		out := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		out.ErrorCode, out.ErrorMessage = code, m
	case *kmsg.ListPartitionReassignmentsRequest:
		out := resp.(*kmsg.ListPartitionReassignmentsResponse)
		out.ErrorCode, out.ErrorMessage = code, m
	case *kmsg.DescribeQuorumRequest:
		out := resp.(*kmsg.DescribeQuorumResponse)
		out.ErrorCode = code
		if v >= 2 {
			out.ErrorMessage = m
		}
	case *kmsg.CreateACLsRequest:
		out := resp.(*kmsg.CreateACLsResponse)
		for range r.Creations {
			rr := kmsg.NewCreateACLsResponseResult()
			rr.ErrorCode, rr.ErrorMessage = code, m
			out.Results = append(out.Results, rr)
		}
	case *kmsg.DeleteACLsRequest:
		out := resp.(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			rr := kmsg.NewDeleteACLsResponseResult()
			rr.ErrorCode, rr.ErrorMessage = code, m
			out.Results = append(out.Results, rr)
		}
	case *kmsg.DescribeACLsRequest:
		out := resp.(*kmsg.DescribeACLsResponse)
		out.ErrorCode, out.ErrorMessage = code, m
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		out := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		add := func(user string) {
			if seen[user] {
				return
			}
			seen[user] = true
			rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			rr.User, rr.ErrorCode, rr.ErrorMessage = user, code, m
			out.Results = append(out.Results, rr)
		}
		for _, d := range r.Deletions {
			add(d.Name)
		}
		for _, u := range r.Upsertions {
			add(u.Name)
		}
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		out := resp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
		out.ErrorCode, out.ErrorMessage = code, m
	case *kmsg.UpdateFeaturesRequest:
		out := resp.(*kmsg.UpdateFeaturesResponse)
		out.ErrorCode, out.ErrorMessage = code, m
	case *kmsg.AddRaftVoterRequest:
		out := resp.(*kmsg.AddRaftVoterResponse)
		out.ErrorCode, out.ErrorMessage = code, m
	case *kmsg.RemoveRaftVoterRequest:
		out := resp.(*kmsg.RemoveRaftVoterResponse)
		out.ErrorCode, out.ErrorMessage = code, m
	case *kmsg.UpdateRaftVoterRequest:
		resp.(*kmsg.UpdateRaftVoterResponse).ErrorCode = code
	}
	return resp
}

// NotController reports whether resp says its receiver is not the active controller
// (NOT_CONTROLLER on the response, or on every item of one whose errors are per
// item): a ControllerChannel tries another voter.
func NotController(resp kmsg.Response) bool {
	nc := kerr.NotController.Code
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode == nc
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterPartitionResponse:
		return r.ErrorCode == nc
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterPartitionAssignmentsResponse:
		return r.ErrorCode == nc
	case *kmsg.ListPartitionReassignmentsResponse:
		return r.ErrorCode == nc
	case *kmsg.DescribeQuorumResponse:
		return r.ErrorCode == nc
	case *kmsg.ElectLeadersResponse:
		if r.ErrorCode == nc {
			return true
		}
		n := 0
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != nc {
					return false
				}
				n++
			}
		}
		return n > 0
	case *kmsg.CreateTopicsResponse:
		return allCodes(len(r.Topics), func(i int) int16 { return r.Topics[i].ErrorCode })
	case *kmsg.DeleteTopicsResponse:
		return allCodes(len(r.Topics), func(i int) int16 { return r.Topics[i].ErrorCode })
	case *kmsg.CreatePartitionsResponse:
		return allCodes(len(r.Topics), func(i int) int16 { return r.Topics[i].ErrorCode })
	case *kmsg.AlterConfigsResponse:
		return allCodes(len(r.Resources), func(i int) int16 { return r.Resources[i].ErrorCode })
	case *kmsg.IncrementalAlterConfigsResponse:
		return allCodes(len(r.Resources), func(i int) int16 { return r.Resources[i].ErrorCode })
	case *kmsg.CreateACLsResponse:
		return allCodes(len(r.Results), func(i int) int16 { return r.Results[i].ErrorCode })
	case *kmsg.DeleteACLsResponse:
		return allCodes(len(r.Results), func(i int) int16 { return r.Results[i].ErrorCode })
	case *kmsg.DescribeACLsResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		return allCodes(len(r.Results), func(i int) int16 { return r.Results[i].ErrorCode })
	case *kmsg.DescribeUserSCRAMCredentialsResponse:
		return r.ErrorCode == nc
	case *kmsg.UpdateFeaturesResponse:
		return r.ErrorCode == nc
	case *kmsg.AddRaftVoterResponse:
		return r.ErrorCode == nc
	case *kmsg.RemoveRaftVoterResponse:
		return r.ErrorCode == nc
	case *kmsg.UpdateRaftVoterResponse:
		return r.ErrorCode == nc
	}
	return false
}

func allCodes(n int, code func(int) int16) bool {
	if n == 0 {
		return false
	}
	for i := range n {
		if code(i) != kerr.NotController.Code {
			return false
		}
	}
	return true
}
