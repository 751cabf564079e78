package controller

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func alterPartition(broker int32, epoch int64, id metadata.UUID, p metadata.PartitionImage, isr ...int32) *kmsg.AlterPartitionRequest {
	r := kmsg.NewPtrAlterPartitionRequest()
	r.Version = 3
	r.BrokerID, r.BrokerEpoch = broker, epoch
	t := kmsg.NewAlterPartitionRequestTopic()
	t.TopicID = id
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = 0, p.LeaderEpoch, p.PartitionEpoch
	for _, m := range isr {
		rp.NewEpochISR = append(rp.NewEpochISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: m, BrokerEpoch: -1})
	}
	t.Partitions = []kmsg.AlterPartitionRequestTopicPartition{rp}
	r.Topics = []kmsg.AlterPartitionRequestTopic{t}
	return r
}

func TestAlterPartitionRequests(t *testing.T) {
	h := newHarness(t, nil)
	epochs := h.join(1, 2, 3)
	h.createTopic("t", 1, 3)
	ti := topic(t, h.image(), "t")
	p := ti.Partitions[0]
	leader := p.Leader
	follower := p.Replicas[1]
	got := h.do(alterPartition(leader, epochs[leader], ti.ID, p, leader, p.Replicas[2])).(*kmsg.AlterPartitionResponse)
	rp := got.Topics[0].Partitions[0]
	if got.ErrorCode != 0 || rp.ErrorCode != 0 || rp.PartitionEpoch != 1 || rp.LeaderID != leader || len(rp.ISR) != 2 {
		t.Fatalf("shrink: %+v", got)
	}
	if np := part(t, h.image(), "t", 0); slices.Contains(np.ISR, follower) {
		t.Fatalf("committed ISR %v", np.ISR)
	}
	// The same request again: the partition epoch moved on.
	got = h.do(alterPartition(leader, epochs[leader], ti.ID, p, leader)).(*kmsg.AlterPartitionResponse)
	if rp := got.Topics[0].Partitions[0]; rp.ErrorCode != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("stale partition epoch: %v", code(rp.ErrorCode))
	}
	if got := h.do(alterPartition(leader, epochs[leader]+100, ti.ID, p, leader)).(*kmsg.AlterPartitionResponse); got.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale broker epoch: %v", code(got.ErrorCode))
	}
	if got := h.do(alterPartition(leader, epochs[leader], metadata.UUID{1}, p, leader)).(*kmsg.AlterPartitionResponse); got.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %v", code(got.Topics[0].Partitions[0].ErrorCode))
	}
}

func TestElectLeaders(t *testing.T) {
	h := newHarness(t, nil)
	epochs := h.join(1, 2, 3)
	h.createTopic("t", 3, 2)
	// Fence 1, then bring it back: its partitions are led by others now.
	h.heartbeat(1, epochs[1], func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	h.heartbeat(1, epochs[1], nil)
	// 1 is unfenced but out of the ISRs: the preferred election is not available.
	el := kmsg.NewPtrElectLeadersRequest()
	el.Version = 2
	el.ElectionType = electionPreferred
	var moved int32 = -1
	for i, p := range topic(t, h.image(), "t").Partitions {
		if p.Replicas[0] == 1 {
			moved = int32(i)
		}
	}
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{moved}}}
	got := h.do(el).(*kmsg.ElectLeadersResponse)
	if got.Topics[0].Partitions[0].ErrorCode != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("preferred out of the ISR: %v", code(got.Topics[0].Partitions[0].ErrorCode))
	}
	// The leader adds 1 back to the ISR; now the election moves leadership to it.
	ti := topic(t, h.image(), "t")
	p := ti.Partitions[moved]
	ap := alterPartition(p.Leader, epochs[p.Leader], ti.ID, p, append(slices.Clone(p.ISR), 1)...)
	ap.Topics[0].Partitions[0].Partition = moved
	if r := h.do(ap).(*kmsg.AlterPartitionResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(code(r.Topics[0].Partitions[0].ErrorCode))
	}
	el.Topics = nil // every partition: only those elected are answered
	got = h.do(el).(*kmsg.ElectLeadersResponse)
	if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != 1 || got.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("elect all: %+v", got.Topics)
	}
	if np := part(t, h.image(), "t", int(moved)); np.Leader != 1 || np.LeaderEpoch != p.LeaderEpoch+1 {
		t.Fatalf("after election %+v", np)
	}
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "nope", Partitions: []int32{0}}}
	if got := h.do(el).(*kmsg.ElectLeadersResponse); got.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatal("unknown topic")
	}
}

func TestReassignment(t *testing.T) {
	h := newHarness(t, nil)
	epochs := h.join(1, 2, 3, 4)
	h.createTopic("t", 1, 2)
	p := part(t, h.image(), "t", 0)
	target := minus([]int32{1, 2, 3, 4}, p.Replicas) // two brokers it is not on
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "t", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: target}}}}
	got := h.do(req).(*kmsg.AlterPartitionAssignmentsResponse)
	if got.ErrorCode != 0 || got.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("reassign: %+v", got)
	}
	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	lr := h.do(list).(*kmsg.ListPartitionReassignmentsResponse)
	if len(lr.Topics) != 1 || !reflect.DeepEqual(lr.Topics[0].Partitions[0].AddingReplicas, target) {
		t.Fatalf("list: %+v", lr.Topics)
	}
	// The leader adds both new replicas to the ISR: the reassignment completes, the
	// old replicas (the leader among them) leave, the target's first leads.
	ti := topic(t, h.image(), "t")
	p = ti.Partitions[0]
	r := h.do(alterPartition(p.Leader, epochs[p.Leader], ti.ID, p, append(slices.Clone(p.ISR), target...)...)).(*kmsg.AlterPartitionResponse)
	if rp := r.Topics[0].Partitions[0]; rp.ErrorCode != 0 || rp.LeaderID != target[0] {
		t.Fatalf("completion: %+v", rp)
	}
	np := part(t, h.image(), "t", 0)
	if !reflect.DeepEqual(np.Replicas, target) || np.Adding != nil || np.Removing != nil || np.Leader != target[0] {
		t.Fatalf("completed: %+v", np)
	}
	if lr := h.do(list).(*kmsg.ListPartitionReassignmentsResponse); len(lr.Topics) != 0 {
		t.Fatalf("list after completion: %+v", lr.Topics)
	}
	// Cancel with nothing in progress.
	req.Topics[0].Partitions[0].Replicas = nil
	if got := h.do(req).(*kmsg.AlterPartitionAssignmentsResponse); got.Topics[0].Partitions[0].ErrorCode != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("cancel: %v", code(got.Topics[0].Partitions[0].ErrorCode))
	}
}

func TestAutoRebalance(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RebalanceInterval = 30 * time.Second })
	epochs := h.join(1, 2)
	h.createTopic("t", 4, 2)
	// Fence 1 and bring it back into every ISR: its preferred partitions are led by 2.
	h.heartbeat(1, epochs[1], func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	h.heartbeat(1, epochs[1], nil)
	ti := topic(t, h.image(), "t")
	for i, p := range ti.Partitions {
		if !slices.Contains(p.ISR, 1) {
			ap := alterPartition(p.Leader, epochs[p.Leader], ti.ID, p, append(slices.Clone(p.ISR), 1)...)
			ap.Topics[0].Partitions[0].Partition = int32(i)
			h.do(ap)
		}
	}
	notLeading := func() int {
		n := 0
		for _, p := range topic(t, h.image(), "t").Partitions {
			if p.Leader != p.Replicas[0] {
				n++
			}
		}
		return n
	}
	if notLeading() == 0 {
		t.Fatal("no imbalance to fix")
	}
	for range 16 { // 32 s, with heartbeats
		h.clock.Advance(2 * time.Second)
		h.heartbeat(1, epochs[1], nil)
		h.heartbeat(2, epochs[2], nil)
		h.settle()
	}
	if n := notLeading(); n != 0 {
		t.Fatalf("%d partitions still off their preferred leader", n)
	}
}

// TestAutoRebalanceAfterReturn: a broker that returns (fenced, then unfenced, then
// back in the ISRs) gets its preferred leaderships back only once
// leader.imbalance.check.interval.seconds has passed since its return, at a check
// brought forward to that moment, not at a check within it.
func TestAutoRebalanceAfterReturn(t *testing.T) {
	const interval = 30 * time.Second
	h := newHarness(t, func(c *Config) { c.RebalanceInterval = interval })
	epochs := h.join(1, 2)
	h.createTopic("t", 4, 2)
	start := h.clock.Now()
	beat := func(until time.Duration) {
		for h.clock.Now().Sub(start) < until {
			h.clock.Advance(time.Second)
			h.heartbeat(1, epochs[1], nil)
			h.heartbeat(2, epochs[2], nil)
			h.settle()
		}
	}
	beat(40 * time.Second) // past the first check (at most 30 s after activation): balanced
	// Broker 1 fails and returns at 40 s: fenced, unfenced, back in every ISR.
	h.heartbeat(1, epochs[1], func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	h.heartbeat(1, epochs[1], nil)
	returned := h.clock.Now()
	ti := topic(t, h.image(), "t")
	for i, p := range ti.Partitions {
		if !slices.Contains(p.ISR, 1) {
			ap := alterPartition(p.Leader, epochs[p.Leader], ti.ID, p, append(slices.Clone(p.ISR), 1)...)
			ap.Topics[0].Partitions[0].Partition = int32(i)
			h.do(ap)
		}
	}
	notLeading := func() int {
		n := 0
		for _, p := range topic(t, h.image(), "t").Partitions {
			if p.Leader != p.Replicas[0] {
				n++
			}
		}
		return n
	}
	off := notLeading()
	if off == 0 {
		t.Fatal("no imbalance to fix")
	}
	// A check comes within the interval of the return (at 60 s or before): no move.
	for h.clock.Now().Sub(returned) < interval-2*time.Second {
		beat(h.clock.Now().Sub(start) + time.Second)
		if n := notLeading(); n != off {
			t.Fatalf("%v after broker 1's return, within the interval: %d partitions moved back", h.clock.Now().Sub(returned), off-n)
		}
	}
	// Just past it: moved back, without waiting for the next regular check.
	beat(h.clock.Now().Sub(start) + 4*time.Second)
	if n := notLeading(); n != 0 {
		t.Fatalf("%v after the return: %d partitions still off their preferred leader", h.clock.Now().Sub(returned), n)
	}
}

func TestAllocateProducerIDs(t *testing.T) {
	h := newHarness(t, nil)
	e := h.join(1)[1]
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = 1, e
	a := h.do(req).(*kmsg.AllocateProducerIDsResponse)
	b := h.do(req).(*kmsg.AllocateProducerIDsResponse)
	if a.ErrorCode != 0 || a.ProducerIDLen != 1000 || b.ProducerIDStart != a.ProducerIDStart+1000 {
		t.Fatalf("blocks %+v %+v", a, b)
	}
	req.BrokerEpoch = e + 9
	if r := h.do(req).(*kmsg.AllocateProducerIDsResponse); r.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale: %v", code(r.ErrorCode))
	}
}

func TestDescribeQuorum(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.VoterListeners = map[int32][]kmsg.DescribeQuorumResponseNodeListener{1: {{Name: "CONTROLLER", Host: "h", Port: 9093}}}
	})
	h.join(1, 2)
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	req.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: MetadataTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	got := h.do(req).(*kmsg.DescribeQuorumResponse)
	p := got.Topics[0].Partitions[0]
	if got.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch != 1 || p.HighWatermark != int64(h.offset()+1) ||
		len(p.CurrentVoters) != 1 || len(p.Observers) != 2 || len(got.Nodes) != 1 {
		t.Fatalf("describe quorum: %+v", got)
	}
}
