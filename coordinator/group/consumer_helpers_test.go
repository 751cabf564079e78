package group

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// cgClient is a consumer-protocol client model for tests: it heartbeats with its
// subscription and the partitions it owns, and takes the assignments it is given.
type cgClient struct {
	h        *harness
	group    string
	id       string
	epoch    int32
	instance *string
	names    []string
	regex    *string
	assignor *string
	owned    assignment
	version  int16
}

func (h *harness) cgClient(group, id string, names ...string) *cgClient {
	return &cgClient{h: h, group: group, id: id, names: names, owned: assignment{}, version: 1}
}

// setTopics installs topics named t<i> with ids tid(i) and the given partition counts,
// at a growing version.
func (h *harness) setTopics(version uint64, topics map[string]int32) {
	var ts []TopicInfo
	for name, n := range topics {
		ts = append(ts, TopicInfo{Name: name, ID: topicID(name), Partitions: n})
	}
	h.c.SetTopics(version, ts)
}

// topicID derives a stable topic id from a name.
func topicID(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	id[15] = byte(len(name))
	return id
}

func (c *cgClient) request(full bool) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = c.version
	req.Group, req.MemberID, req.MemberEpoch = c.group, c.id, c.epoch
	req.RebalanceTimeoutMillis = -1
	if full || c.epoch == 0 {
		req.InstanceID = c.instance
		req.RebalanceTimeoutMillis = 30_000
		req.ServerAssignor = c.assignor
		if c.regex != nil {
			req.SubscribedTopicRegex = c.regex
		} else {
			req.SubscribedTopicNames = append([]string{}, c.names...)
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if c.epoch != 0 {
			for _, tp := range assignmentRecordForm(c.owned) {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
			}
		}
	} else if c.instance != nil {
		req.InstanceID = c.instance
	}
	return req
}

// send sends req and waits for the answer (the test Log answers at once unless held).
func (c *cgClient) send(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	c.h.t.Helper()
	ch := make(chan *kmsg.ConsumerGroupHeartbeatResponse, 1)
	c.h.c.ConsumerGroupHeartbeat(req, "client-"+c.id, "/10.0.0.1", func(r *kmsg.ConsumerGroupHeartbeatResponse) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		c.h.t.Fatal("heartbeat not answered")
		return nil
	}
}

// hb sends a full heartbeat and takes the answer as a client does: the assignment (when
// sent) replaces what it owns; errors reset it as their meaning says.
func (c *cgClient) hb() *kmsg.ConsumerGroupHeartbeatResponse {
	c.h.t.Helper()
	r := c.send(c.request(true))
	c.take(r)
	return r
}

// keepalive sends a heartbeat without the optional fields.
func (c *cgClient) keepalive() *kmsg.ConsumerGroupHeartbeatResponse {
	c.h.t.Helper()
	r := c.send(c.request(false))
	c.take(r)
	return r
}

func (c *cgClient) take(r *kmsg.ConsumerGroupHeartbeatResponse) {
	if r.ErrorCode != 0 {
		return
	}
	if r.MemberID != nil {
		c.id = *r.MemberID
	}
	c.epoch = r.MemberEpoch
	if r.Assignment != nil {
		c.owned = assignment{}
		for _, t := range r.Assignment.Topics {
			for _, p := range t.Partitions {
				c.owned.add(t.TopicID, p)
			}
		}
	}
}

func (c *cgClient) leave() *kmsg.ConsumerGroupHeartbeatResponse {
	c.h.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = c.version
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = c.group, c.id, leaveEpoch, c.instance
	if c.instance != nil {
		req.MemberEpoch = staticLeaveEpoch
	}
	req.RebalanceTimeoutMillis = -1
	r := c.send(req)
	if r.ErrorCode == 0 {
		c.epoch, c.owned = 0, assignment{}
	}
	return r
}

// parts lists the client's partitions of topic.
func (c *cgClient) parts(topic string) []int32 { return slices.Clone(c.owned[topicID(topic)]) }

func (h *harness) describeConsumer(group string) kmsg.ConsumerGroupDescribeResponseGroup {
	h.t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = 1
	req.Groups = []string{group}
	return h.c.ConsumerGroupDescribe(req).Groups[0]
}

func mustCode(t testing.TB, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: error code %d, want %d", what, got, want)
	}
}
