package group

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newConsumerHarness(t *testing.T, topics map[string]int32) *harness {
	h := newHarness(t, func(c *Config) { c.ConsumerSessionTimeout = 45 * time.Second })
	h.setTopics(1, topics)
	return h
}

func TestConsumerJoinTakesEverything(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 4})
	a := h.cgClient("g", "A", "t")
	r := a.hb()
	mustCode(t, "join", r.ErrorCode, 0)
	if r.MemberEpoch != 1 || !slices.Equal(a.parts("t"), []int32{0, 1, 2, 3}) || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("join: epoch %d parts %v interval %d", r.MemberEpoch, a.parts("t"), r.HeartbeatIntervalMillis)
	}
	d := h.describeConsumer("g")
	if d.ErrorCode != 0 || d.State != "Stable" || d.Epoch != 1 || d.AssignmentEpoch != 1 || d.AssignorName != "uniform" || len(d.Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	m := d.Members[0]
	if m.MemberID != "A" || m.MemberEpoch != 1 || m.ClientID != "client-A" || !slices.Equal(m.SubscribedTopics, []string{"t"}) ||
		len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "t" || m.MemberType != 1 {
		t.Fatalf("member: %+v", m)
	}
	// A keepalive changes nothing and carries no assignment.
	if r := a.keepalive(); r.ErrorCode != 0 || r.Assignment != nil || r.MemberEpoch != 1 {
		t.Fatalf("keepalive: %+v", r)
	}
}

// TestConsumerRevokeBeforeAssign: a second member gets partitions only once the first
// has revoked them.
func TestConsumerRevokeBeforeAssign(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 4})
	a := h.cgClient("g", "A", "t")
	b := h.cgClient("g", "B", "t")
	a.hb()
	r := b.hb()
	if r.MemberEpoch != 2 || len(b.owned) != 0 {
		t.Fatalf("B joins: epoch %d owned %v (A still holds everything)", r.MemberEpoch, b.owned)
	}
	if st := h.describeConsumer("g").State; st != "Reconciling" {
		t.Fatalf("state %s", st)
	}
	// A learns it must give up two: it stays at epoch 1 with two partitions.
	r = a.hb()
	if r.MemberEpoch != 1 || a.owned.count() != 2 {
		t.Fatalf("A revoking: epoch %d owned %v", r.MemberEpoch, a.owned)
	}
	// B still gets nothing: A has not reported the revocation yet.
	if r := b.hb(); len(b.owned) != 0 || r.MemberEpoch != 2 {
		t.Fatalf("B before A revoked: %v", b.owned)
	}
	// A reports it owns two: it moves to epoch 2; then B gets the other two.
	if r := a.hb(); r.MemberEpoch != 2 || a.owned.count() != 2 {
		t.Fatalf("A after revoking: epoch %d owned %v", r.MemberEpoch, a.owned)
	}
	b.hb()
	if b.owned.count() != 2 {
		t.Fatalf("B after A revoked: %v", b.owned)
	}
	all := append(a.parts("t"), b.parts("t")...)
	slices.Sort(all)
	if !slices.Equal(all, []int32{0, 1, 2, 3}) {
		t.Fatalf("partitions %v", all)
	}
	if st := h.describeConsumer("g").State; st != "Stable" {
		t.Fatalf("state %s", st)
	}
	// B leaves: A takes everything at the next epoch.
	if r := b.leave(); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	if r := a.hb(); r.MemberEpoch != 3 || a.owned.count() != 4 {
		t.Fatalf("A after B left: epoch %d owned %v", r.MemberEpoch, a.owned)
	}
}

func TestConsumerEpochFencing(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 2})
	a := h.cgClient("g", "A", "t")
	a.hb()
	req := a.request(true)
	req.MemberEpoch = 5
	mustCode(t, "epoch ahead", a.send(req).ErrorCode, kerr.FencedMemberEpoch.Code)
	b := h.cgClient("g", "B", "t")
	b.hb()
	a.hb() // A revokes one (still epoch 1)
	a.hb() // A at epoch 2
	// A lost the answer that moved it to epoch 2: its previous epoch with a subset of
	// its partitions is accepted.
	req = a.request(true)
	req.MemberEpoch = 1
	if r := a.send(req); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("previous epoch: %+v", r)
	}
	// An older epoch, or the previous one with a partition it no longer has, is fenced.
	req = a.request(true)
	req.MemberEpoch = 0 + 1
	req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicID("t"), Partitions: []int32{0, 1}})
	mustCode(t, "previous epoch with a partition not its", a.send(req).ErrorCode, kerr.FencedMemberEpoch.Code)
	req = a.request(true)
	req.MemberID = "nobody"
	mustCode(t, "unknown member", a.send(req).ErrorCode, kerr.UnknownMemberID.Code)
	// A fenced member rejoins in place with epoch 0 and gets its assignment again.
	a.epoch = 0
	r := a.hb()
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || a.owned.count() != 1 {
		t.Fatalf("rejoin: %+v owned %v", r, a.owned)
	}
}

func TestConsumerSessionAndRebalanceTimeouts(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 2})
	a := h.cgClient("g", "A", "t")
	b := h.cgClient("g", "B", "t")
	a.hb()
	b.hb()
	// A never revokes: it keeps heartbeating without listing its partitions, so the
	// coordinator takes it as still owning them; the rebalance timeout (30 s) fences it.
	a.keepalive()
	for i := 0; i < 31; i++ {
		h.clock.Advance(time.Second)
		a.keepalive()
		b.keepalive()
	}
	mustCode(t, "fenced after the rebalance timeout", a.keepalive().ErrorCode, kerr.UnknownMemberID.Code)
	b.hb()
	if b.owned.count() != 2 {
		t.Fatalf("B after A was fenced: %v", b.owned)
	}
	// B stops heartbeating: its session (45 s) ends and the group is empty.
	h.clock.Advance(46 * time.Second)
	if d := h.describeConsumer("g"); d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("after the session timeout: %+v", d)
	}
}

func TestConsumerStaticMembership(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 4})
	a := h.cgClient("g", "A1", "t")
	a.instance = strp("inst-a")
	b := h.cgClient("g", "B", "t")
	a.hb()
	b.hb()
	a.hb()
	a.hb()
	b.hb()
	held := a.parts("t")
	epoch := h.describeConsumer("g").Epoch
	// Another process with the same instance id cannot join while A1 is active.
	a2 := h.cgClient("g", "A2", "t")
	a2.instance = strp("inst-a")
	mustCode(t, "unreleased instance", a2.send(a2.request(true)).ErrorCode, kerr.UnreleasedInstanceID.Code)
	// A1 leaves for now (-2): its partitions stay its; then A2 takes its place without a
	// new group epoch and with A1's partitions.
	if r := a.leave(); r.ErrorCode != 0 || r.MemberEpoch != -2 {
		t.Fatalf("static leave: %+v", r)
	}
	b.hb()
	if b.owned.count() != 2 {
		t.Fatalf("B took a static member's partitions: %v", b.owned)
	}
	r := a2.hb()
	if r.ErrorCode != 0 || !slices.Equal(a2.parts("t"), held) {
		t.Fatalf("replacement: %+v parts %v want %v", r, a2.parts("t"), held)
	}
	if d := h.describeConsumer("g"); d.Epoch != epoch || len(d.Members) != 2 {
		t.Fatalf("after the replacement: epoch %d (was %d), %d members", d.Epoch, epoch, len(d.Members))
	}
	// The old member id is fenced by the instance id.
	a.epoch = r.MemberEpoch
	mustCode(t, "old member id", a.send(a.request(true)).ErrorCode, kerr.FencedInstanceID.Code)
	// A static member that stays away past its session is removed.
	a2.leave()
	for i := 0; i < 50; i++ {
		h.clock.Advance(time.Second)
		b.keepalive()
	}
	b.hb()
	if b.owned.count() != 4 {
		t.Fatalf("B after the static member expired: %v", b.owned)
	}
}

func TestConsumerRegexAndTopicChanges(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"orders-eu": 2, "orders-us": 1, "other": 3})
	a := h.cgClient("g", "A")
	a.regex = strp("orders-.*")
	r := a.hb()
	if r.ErrorCode != 0 || len(a.parts("orders-eu")) != 2 || len(a.parts("orders-us")) != 1 || len(a.parts("other")) != 0 {
		t.Fatalf("regex: %+v owned %v", r, a.owned)
	}
	epoch := r.MemberEpoch
	// A topic that matches appears: the next heartbeat brings it in a new epoch.
	h.setTopics(2, map[string]int32{"orders-eu": 2, "orders-us": 1, "other": 3, "orders-ap": 2})
	r = a.keepalive()
	if r.MemberEpoch != epoch+1 || len(a.parts("orders-ap")) != 2 {
		t.Fatalf("new matching topic: epoch %d owned %v", r.MemberEpoch, a.owned)
	}
	// Partitions are added to a subscribed topic.
	h.setTopics(3, map[string]int32{"orders-eu": 4, "orders-us": 1, "other": 3, "orders-ap": 2})
	a.keepalive()
	if len(a.parts("orders-eu")) != 4 {
		t.Fatalf("added partitions: %v", a.owned)
	}
	// A subscribed topic is deleted: revoked first (it is still owned), then gone.
	h.setTopics(4, map[string]int32{"orders-eu": 4, "other": 3, "orders-ap": 2})
	a.hb()
	a.hb()
	if len(a.parts("orders-us")) != 0 || a.owned.count() != 6 {
		t.Fatalf("deleted topic: %v", a.owned)
	}
	if d := h.describeConsumer("g"); d.Members[0].SubscribedTopicRegex == nil || *d.Members[0].SubscribedTopicRegex != "orders-.*" {
		t.Fatalf("describe regex: %+v", d.Members[0])
	}
	// An invalid regex is refused.
	b := h.cgClient("g", "B")
	b.regex = strp("orders-(")
	mustCode(t, "bad regex", b.send(b.request(true)).ErrorCode, kerr.InvalidRegularExpression.Code)
}

func TestConsumerAssignorChoice(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"x": 3, "y": 3})
	a := h.cgClient("g", "A", "x", "y")
	a.assignor = strp("range")
	b := h.cgClient("g", "B", "x", "y")
	b.assignor = strp("range")
	a.hb()
	b.hb()
	a.hb()
	a.hb()
	b.hb()
	if d := h.describeConsumer("g"); d.AssignorName != "range" {
		t.Fatalf("assignor %s", d.AssignorName)
	}
	// range co-partitions: A has the same partitions of x and y.
	if !slices.Equal(a.parts("x"), a.parts("y")) || !slices.Equal(a.parts("x"), []int32{0, 1}) {
		t.Fatalf("range: %v", a.owned)
	}
	c := h.cgClient("g", "C", "x")
	c.assignor = strp("sticky")
	mustCode(t, "unknown assignor", c.send(c.request(true)).ErrorCode, kerr.UnsupportedAssignor.Code)
}

func TestConsumerRequestValidation(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 1})
	c := h.cgClient("g", "A", "t")
	for _, tc := range []struct {
		name string
		edit func(*kmsg.ConsumerGroupHeartbeatRequest)
		code int16
	}{
		{"no group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidGroupID.Code},
		{"v1 join without member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest.Code},
		{"join without rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest.Code},
		{"join with partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicID("t"), Partitions: []int32{0}}}
		}, kerr.InvalidRequest.Code},
		{"join without topics", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest.Code},
		{"bad epoch", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest.Code},
		{"static leave without instance", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }, kerr.InvalidRequest.Code},
		{"empty instance", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = strp("") }, kerr.InvalidRequest.Code},
	} {
		req := c.request(true)
		tc.edit(req)
		if got := c.send(req); got.ErrorCode != tc.code || got.ErrorMessage == nil {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
	// v0: the server names the member.
	c.version, c.id = 0, ""
	r := c.hb()
	if r.ErrorCode != 0 || r.MemberID == nil || len(*r.MemberID) != 22 {
		t.Fatalf("v0 join: %+v", r)
	}
	// A heartbeat for a group that does not exist.
	d := h.cgClient("nope", "X", "t")
	d.epoch = 3
	mustCode(t, "unknown group", d.send(d.request(true)).ErrorCode, kerr.GroupIDNotFound.Code)
}

func TestConsumerMaxSize(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ConsumerMaxSize = 1 })
	h.setTopics(1, map[string]int32{"t": 1})
	h.cgClient("g", "A", "t").hb()
	b := h.cgClient("g", "B", "t")
	mustCode(t, "second member", b.send(b.request(true)).ErrorCode, kerr.GroupMaxSizeReached.Code)
}

func commitReq(group, member string, epoch int32, version int16, topic string, part int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	req.Group, req.MemberID, req.Generation = group, member, epoch
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: part, Offset: offset, LeaderEpoch: -1}}}}
	return req
}

func (h *harness) commitWith(req *kmsg.OffsetCommitRequest) int16 {
	h.t.Helper()
	ch := make(chan *kmsg.OffsetCommitResponse, 1)
	h.c.OffsetCommit(req, func(r *kmsg.OffsetCommitResponse) { ch <- r })
	select {
	case r := <-ch:
		return r.Topics[0].Partitions[0].ErrorCode
	case <-time.After(10 * time.Second):
		h.t.Fatal("commit not answered")
		return -1
	}
}

func TestConsumerOffsets(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 2, "old": 1})
	// An admin's commit (no member, epoch -1) before anyone joins: a classic-style
	// simple commit creates the group's offsets.
	mustCode(t, "admin commit", h.commitWith(commitReq("g", "", -1, 9, "old", 0, 3)), 0)
	a := h.cgClient("g", "A", "t")
	a.hb() // the empty group becomes a consumer group; the offset stays
	if got := h.fetch("g", "old", 0); got.Offset != 3 {
		t.Fatalf("offset after migration: %+v", got)
	}
	mustCode(t, "member commit", h.commitWith(commitReq("g", "A", 1, 9, "t", 0, 10)), 0)
	mustCode(t, "commit ahead of the member epoch", h.commitWith(commitReq("g", "A", 2, 9, "t", 0, 11)), kerr.StaleMemberEpoch.Code)
	mustCode(t, "classic OffsetCommit version", h.commitWith(commitReq("g", "A", 1, 8, "t", 0, 11)), kerr.UnsupportedVersion.Code)
	mustCode(t, "unknown member", h.commitWith(commitReq("g", "Z", 1, 9, "t", 0, 11)), kerr.UnknownMemberID.Code)
	mustCode(t, "admin commit with members", h.commitWith(commitReq("g", "", -1, 9, "t", 0, 11)), kerr.UnknownMemberID.Code)
	// B joins; A moves to epoch 2 and keeps partition 0. A commit of partition 0 with
	// epoch 1 is still fine (it had it since epoch 1); B's partition 1, given at epoch 2,
	// cannot be committed by B with epoch 1.
	b := h.cgClient("g", "B", "t")
	b.hb()
	a.hb()
	a.hb()
	b.hb()
	owner, other := a, b
	if !owner.owned.has(topicID("t"), 0) {
		owner, other = b, a
	}
	mustCode(t, "older epoch, partition held since", h.commitWith(commitReq("g", owner.id, 1, 9, "t", 0, 12)), 0)
	mustCode(t, "older than the partition's assignment", h.commitWith(commitReq("g", other.id, 1, 9, "t", 1, 5)), kerr.StaleMemberEpoch.Code)
	// OffsetFetch v9 with the member's epoch, a stale one, an unknown member.
	fetch := func(member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", MemberID: &member, MemberEpoch: epoch, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
		return h.c.OffsetFetch(req).Groups[0].ErrorCode
	}
	mustCode(t, "fetch with the member epoch", fetch(a.id, a.epoch), 0)
	mustCode(t, "fetch with a stale epoch", fetch(a.id, a.epoch-1), kerr.StaleMemberEpoch.Code)
	mustCode(t, "fetch by an unknown member", fetch("Z", 1), kerr.UnknownMemberID.Code)
	// OffsetDelete: a subscribed topic is protected, an unsubscribed one is not.
	del := func(topic string) (int16, int16) {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = "g"
		req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		ch := make(chan *kmsg.OffsetDeleteResponse, 1)
		h.c.OffsetDelete(req, func(r *kmsg.OffsetDeleteResponse) { ch <- r })
		r := <-ch
		return r.ErrorCode, r.Topics[0].Partitions[0].ErrorCode
	}
	if g, p := del("t"); g != 0 || p != kerr.GroupSubscribedToTopic.Code {
		t.Fatalf("delete subscribed: %d %d", g, p)
	}
	if g, p := del("old"); g != 0 || p != 0 {
		t.Fatalf("delete unsubscribed: %d %d", g, p)
	}
}

func TestConsumerMigrationBothWays(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 2})
	// A classic group with members stays classic: a consumer-protocol join is refused.
	ids, gen := h.stableGroup("g", 1)
	c := h.cgClient("g", "C", "t")
	mustCode(t, "join a classic group with members", c.send(c.request(true)).ErrorCode, kerr.GroupIDNotFound.Code)
	h.commit("g", ids[0], gen, "t", 0, 42, "md")
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group, req.MemberID = 1, "g", ids[0]
	mustCode(t, "leave", h.c.LeaveGroup(req).ErrorCode, 0)
	// Empty now: the consumer protocol takes it, the offset stays.
	if r := c.hb(); r.ErrorCode != 0 || c.owned.count() != 2 {
		t.Fatalf("upgrade: %+v", r)
	}
	if got := h.fetch("g", "t", 0); got.Offset != 42 {
		t.Fatalf("offset after upgrade: %+v", got)
	}
	lg := h.c.ListGroups(&kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"consumer"}})
	if len(lg.Groups) != 1 || lg.Groups[0].GroupType != "consumer" || lg.Groups[0].GroupState != "Stable" || lg.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("list: %+v", lg.Groups)
	}
	if lg := h.c.ListGroups(&kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"classic"}}); len(lg.Groups) != 0 {
		t.Fatalf("classic filter: %+v", lg.Groups)
	}
	if d := h.describe("g"); d.State != "Dead" {
		t.Fatalf("DescribeGroups of a consumer group: %+v", d)
	}
	// A classic join while the consumer group has a member is refused.
	jr := h.join("g", joinOpts{}).get()
	mustCode(t, "classic join of a consumer group with members", jr.ErrorCode, kerr.InconsistentGroupProtocol.Code)
	c.leave()
	// Empty consumer group: a classic member takes it back; the offset stays.
	res := h.joinNew("g", joinOpts{})
	h.settle(res)
	if j := res.get(); j.ErrorCode != 0 {
		t.Fatalf("downgrade join: %+v", j)
	}
	if got := h.fetch("g", "t", 0); got.Offset != 42 {
		t.Fatalf("offset after downgrade: %+v", got)
	}
	if d := h.describeConsumer("g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe of a classic group: %+v", d)
	}
	// Reloaded (before the classic group's first SyncGroup wrote its metadata), the
	// consumer group's records are gone and the offset is there.
	h.start(nil)
	if d := h.describeConsumer("g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("after reload: %+v", d)
	}
	if got := h.fetch("g", "t", 0); got.Offset != 42 {
		t.Fatalf("offset after reload: %+v", got)
	}
}

func TestConsumerDeleteGroups(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 1})
	a := h.cgClient("g", "A", "t")
	a.hb()
	mustCode(t, "commit", h.commitWith(commitReq("g", "A", 1, 9, "t", 0, 5)), 0)
	del := func() int16 {
		ch := make(chan *kmsg.DeleteGroupsResponse, 1)
		h.c.DeleteGroups(&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"g"}}, func(r *kmsg.DeleteGroupsResponse) { ch <- r })
		return (<-ch).Groups[0].ErrorCode
	}
	mustCode(t, "delete with a member", del(), kerr.NonEmptyGroup.Code)
	a.leave()
	mustCode(t, "delete empty", del(), 0)
	if got := h.fetch("g", "t", 0); got.Offset != -1 {
		t.Fatalf("offset survived the deletion: %+v", got)
	}
	h.start(nil)
	if d := h.describeConsumer("g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleted group came back: %+v", d)
	}
}

// TestConsumerReload: a reloaded coordinator (the partition moved, or the broker
// restarted) has the same groups, members, epochs and assignments, and members carry
// on with their epochs.
func TestConsumerReload(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 6, "u": 2})
	a := h.cgClient("g", "A", "t", "u")
	b := h.cgClient("g", "B", "t")
	b.instance = strp("b-inst")
	c := h.cgClient("g", "C")
	c.regex = strp("[tu]")
	for _, m := range []*cgClient{a, b, c, a, b, c, a} {
		m.hb()
	}
	// A is left mid-revocation or stable; C may be waiting on partitions.
	before := h.describeConsumer("g")
	h.start(nil)
	h.setTopics(1, map[string]int32{"t": 6, "u": 2})
	after := h.describeConsumer("g")
	if before.Epoch != after.Epoch || before.AssignmentEpoch != after.AssignmentEpoch || before.State != after.State || len(before.Members) != len(after.Members) {
		t.Fatalf("before %+v\nafter %+v", before, after)
	}
	for i := range before.Members {
		x, y := before.Members[i], after.Members[i]
		if x.MemberID != y.MemberID || x.MemberEpoch != y.MemberEpoch || !sameDescribed(x.Assignment, y.Assignment) ||
			!sameDescribed(x.TargetAssignment, y.TargetAssignment) || !slices.Equal(x.SubscribedTopics, y.SubscribedTopics) {
			t.Fatalf("member %d before %+v\nafter %+v", i, x, y)
		}
	}
	for i := 0; i < 4; i++ {
		for _, m := range []*cgClient{a, b, c} {
			if r := m.hb(); r.ErrorCode != 0 {
				t.Fatalf("%s after reload: %+v", m.id, r)
			}
		}
	}
	total := a.owned.count() + b.owned.count() + c.owned.count()
	if total != 8 || h.describeConsumer("g").State != "Stable" {
		t.Fatalf("after reload: %d partitions owned, %+v", total, h.describeConsumer("g"))
	}
}

func sameDescribed(a, b kmsg.Assignment) bool {
	if len(a.TopicPartitions) != len(b.TopicPartitions) {
		return false
	}
	for i := range a.TopicPartitions {
		if a.TopicPartitions[i].TopicID != b.TopicPartitions[i].TopicID || !slices.Equal(a.TopicPartitions[i].Partitions, b.TopicPartitions[i].Partitions) {
			return false
		}
	}
	return true
}

// TestConsumerAnswersWaitForDurability: answers come only once the records are durable;
// a heartbeat that writes nothing still waits for the group's earlier writes.
func TestConsumerAnswersWaitForDurability(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 2})
	a := h.cgClient("g", "A", "t")
	h.log.mu.Lock()
	h.log.hold = true
	h.log.mu.Unlock()
	var got []*kmsg.ConsumerGroupHeartbeatResponse
	h.c.ConsumerGroupHeartbeat(a.request(true), "c", "h", func(r *kmsg.ConsumerGroupHeartbeatResponse) { got = append(got, r) })
	if len(got) != 0 {
		t.Fatal("join answered before its records were durable")
	}
	ka := a.request(false)
	ka.MemberEpoch = 1
	h.c.ConsumerGroupHeartbeat(ka, "c", "h", func(r *kmsg.ConsumerGroupHeartbeatResponse) { got = append(got, r) })
	if len(got) != 0 {
		t.Fatal("a heartbeat answered before the group's earlier write was durable")
	}
	h.log.mu.Lock()
	h.log.hold = false
	h.log.mu.Unlock()
	h.log.release()
	if len(got) != 2 || got[0].ErrorCode != 0 || got[1].ErrorCode != 0 || got[0].MemberEpoch != 1 {
		t.Fatalf("answers: %+v", got)
	}
	// A failed write is answered with the Log's error.
	h.log.mu.Lock()
	h.log.failWith = ErrNotLeader
	h.log.mu.Unlock()
	b := h.cgClient("g", "B", "t")
	mustCode(t, "join on a lost partition", b.send(b.request(true)).ErrorCode, kerr.NotCoordinator.Code)
}

// TestConsumerGroupSettings: a group's own settings (Config.GroupSettings) are read at
// each heartbeat: the interval its answers carry and the session timeout its members'
// timers get; other groups keep the coordinator's.
func TestConsumerGroupSettings(t *testing.T) {
	var own GroupSettings // read under the group's lock, written between heartbeats
	h := newHarness(t, func(c *Config) {
		c.ConsumerSessionTimeout = 45 * time.Second
		c.GroupSettings = func(group string) GroupSettings {
			if group == "own" {
				return own
			}
			return GroupSettings{}
		}
	})
	h.setTopics(1, map[string]int32{"t": 1})
	own = GroupSettings{ConsumerHeartbeatInterval: 6 * time.Second, ConsumerSessionTimeout: 10 * time.Second}
	a, b := h.cgClient("own", "A", "t"), h.cgClient("other", "B", "t")
	if r := a.hb(); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 6000 {
		t.Fatalf("own group: %v interval %d", r.ErrorCode, r.HeartbeatIntervalMillis)
	}
	if r := b.hb(); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("other group: %v interval %d", r.ErrorCode, r.HeartbeatIntervalMillis)
	}
	own.ConsumerHeartbeatInterval = 7 * time.Second
	if r := a.keepalive(); r.HeartbeatIntervalMillis != 7000 {
		t.Fatalf("after the change: interval %d", r.HeartbeatIntervalMillis)
	}
	// The group's 10 s session: A is fenced after it, B (45 s) is not.
	for range 11 {
		h.clock.Advance(time.Second)
	}
	mustCode(t, "A after its group's session timeout", a.keepalive().ErrorCode, kerr.UnknownMemberID.Code)
	mustCode(t, "B within the coordinator's", b.keepalive().ErrorCode, 0)
}
