package group

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// stClient is a Kafka Streams client model for tests: it heartbeats with its process,
// its topology when joining and the tasks it owns, and takes the tasks it is given
// (giving up at once what it is no longer given).
type stClient struct {
	h             *harness
	group, id     string
	process       string
	epoch         int32
	instance      *string
	topology      *kmsg.StreamsGroupHeartbeatRequestTopology
	endpoint      *kmsg.StreamsGroupHeartbeatRequestUserEndpoint
	endpointEpoch int32
	owned         tasks
	settings      StreamsSettings
	shutdown      bool
	created       []StreamsTopicInfo // internal topics the last answer asked to create
}

func (h *harness) stClient(group, id, process string, topo *kmsg.StreamsGroupHeartbeatRequestTopology) *stClient {
	return &stClient{h: h, group: group, id: id, process: process, topology: topo, owned: newTasks(), endpointEpoch: -1}
}

// streamsTopology is a one-subtopology topology: source topic in, a changelog of its
// store (stateful when store is not "").
func streamsTopology(epoch int32, in, store string) *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	t.Epoch = epoch
	s := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s.SubtopologyID = "0"
	s.SourceTopics = []string{in}
	if store != "" {
		c := kmsg.NewTopicInfo()
		c.Topic = store
		c.Configs = []kmsg.TopicInfoConfig{{Key: "cleanup.policy", Value: "compact"}}
		s.StateChangelogTopics = []kmsg.TopicInfo{c}
	}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s}
	return &t
}

func taskList(s taskSet) []kmsg.TaskIDs {
	out := []kmsg.TaskIDs{}
	for _, sub := range s.subtopologies() {
		out = append(out, kmsg.TaskIDs{SubtopologyID: sub, Partitions: slices.Clone(s[sub])})
	}
	return out
}

func (c *stClient) request() *kmsg.StreamsGroupHeartbeatRequest {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = c.group, c.id, c.epoch
	req.InstanceID = c.instance
	req.EndpointInformationEpoch = c.endpointEpoch
	req.ShutdownApplication = c.shutdown
	if c.epoch == 0 {
		req.RebalanceTimeoutMillis = 30_000
		req.Topology = c.topology
		p := c.process
		req.ProcessID = &p
		req.UserEndpoint = c.endpoint
		req.ClientTags = []kmsg.StreamsGroupHeartbeatRequestClientTag{}
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		return req
	}
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = taskList(c.owned.active), taskList(c.owned.standby), taskList(c.owned.warmup)
	return req
}

func (c *stClient) send(req *kmsg.StreamsGroupHeartbeatRequest) *kmsg.StreamsGroupHeartbeatResponse {
	c.h.t.Helper()
	type answer struct {
		r      *kmsg.StreamsGroupHeartbeatResponse
		create []StreamsTopicInfo
	}
	ch := make(chan answer, 1)
	c.h.c.StreamsGroupHeartbeat(req, "client-"+c.id, "/10.0.0.1", c.settings, func(r *kmsg.StreamsGroupHeartbeatResponse, create []StreamsTopicInfo) {
		ch <- answer{r, create}
	})
	select {
	case a := <-ch:
		c.created = a.create
		return a.r
	case <-time.After(10 * time.Second):
		c.h.t.Fatal("streams heartbeat not answered")
		return nil
	}
}

// hb sends a heartbeat with the tasks the client owns and takes the answer.
func (c *stClient) hb() *kmsg.StreamsGroupHeartbeatResponse {
	c.h.t.Helper()
	r := c.send(c.request())
	c.take(r)
	return r
}

func (c *stClient) take(r *kmsg.StreamsGroupHeartbeatResponse) {
	if r.ErrorCode != 0 {
		return
	}
	c.epoch = r.MemberEpoch
	c.endpointEpoch = r.EndpointInformationEpoch
	if r.ActiveTasks != nil {
		set := func(ts []kmsg.TaskIDs) taskSet {
			s := taskSet{}
			for _, t := range ts {
				for _, p := range t.Partitions {
					s.add(t.SubtopologyID, p)
				}
			}
			return s
		}
		c.owned = tasks{active: set(r.ActiveTasks), standby: set(r.StandbyTasks), warmup: set(r.WarmupTasks)}
	}
}

func (c *stClient) leave() *kmsg.StreamsGroupHeartbeatResponse {
	c.h.t.Helper()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = c.group, c.id, leaveEpoch, c.instance
	if c.instance != nil {
		req.MemberEpoch = staticLeaveEpoch
	}
	r := c.send(req)
	if r.ErrorCode == 0 {
		c.epoch, c.owned = 0, newTasks()
	}
	return r
}

func (c *stClient) active() []int32 { return slices.Clone(c.owned.active["0"]) }

func statusCodes(r *kmsg.StreamsGroupHeartbeatResponse) []int8 {
	var out []int8
	for _, s := range r.Status {
		out = append(out, s.StatusCode)
	}
	return out
}

func (h *harness) describeStreams(group string) kmsg.StreamsGroupDescribeResponseGroup {
	h.t.Helper()
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Version = 1
	req.Groups = []string{group}
	return h.c.StreamsGroupDescribe(req).Groups[0]
}

// streamsReady is a harness whose cluster has topic in (4 partitions) and the
// changelog store-changelog, so that streamsTopology(0, "in", "store-changelog") is
// ready at once.
func newStreamsHarness(t *testing.T) *harness {
	h := newHarness(t, nil)
	h.setTopics(1, map[string]int32{"in": 4, "store-changelog": 4})
	return h
}

// settle heartbeats every client until none changes its epoch or tasks (at most n
// rounds).
func settle(t *testing.T, n int, cs ...*stClient) {
	t.Helper()
	for i := 0; i < n; i++ {
		moved := false
		for _, c := range cs {
			e, o := c.epoch, c.owned.clone()
			r := c.hb()
			if r.ErrorCode != 0 {
				t.Fatalf("%s: heartbeat error %d %v", c.id, r.ErrorCode, r.ErrorMessage)
			}
			moved = moved || e != c.epoch || !o.equal(c.owned)
		}
		if !moved {
			return
		}
	}
	t.Fatalf("the group did not settle in %d rounds", n)
}
