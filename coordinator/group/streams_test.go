package group

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStreamsJoinCreatesInternalTopics: the first member joins with its topology while
// the changelog is missing: the answer reports MISSING_INTERNAL_TOPICS and hands the
// broker the changelog to create (4 partitions: its subtopology's tasks, Kafka
// Streams' configs); once the topic exists the topology is ready, the group epoch
// moves and the member gets the four tasks.
func TestStreamsJoinCreatesInternalTopics(t *testing.T) {
	h := newHarness(t, nil)
	h.setTopics(1, map[string]int32{"in": 4})
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	r := a.hb()
	mustCode(t, "join", r.ErrorCode, 0)
	if r.MemberEpoch != 1 || r.ActiveTasks == nil || len(r.ActiveTasks) != 0 || !slices.Equal(statusCodes(r), []int8{streamsStatusMissingInternalTopics}) {
		t.Fatalf("join: epoch %d active %v status %+v", r.MemberEpoch, r.ActiveTasks, r.Status)
	}
	if r.HeartbeatIntervalMillis != 5000 || r.TaskOffsetIntervalMillis != 60000 || r.AcceptableRecoveryLag != 10000 {
		t.Fatalf("intervals: %+v", r)
	}
	want := []StreamsTopicInfo{{Name: "store-changelog", Partitions: 4, ReplicationFactor: -1,
		Configs: []StreamsKeyValue{{"cleanup.policy", "compact"}, {"message.timestamp.type", "CreateTime"}}}}
	if !reflect.DeepEqual(a.created, want) {
		t.Fatalf("topics to create: %+v", a.created)
	}
	d := h.describeStreams("app")
	if d.ErrorCode != 0 || d.State != "NotReady" || d.Epoch != 1 || d.AssignmentEpoch != 1 || d.Topology == nil ||
		len(d.Topology.Subtopologies) != 1 || d.Topology.Subtopologies[0].StateChangelogTopics[0].NumPartitions != 0 {
		t.Fatalf("describe before the changelog exists: %+v", d)
	}
	// The broker created the changelog.
	h.setTopics(2, map[string]int32{"in": 4, "store-changelog": 4})
	r = a.hb()
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || !slices.Equal(a.active(), []int32{0, 1, 2, 3}) || len(r.Status) != 0 || a.created != nil {
		t.Fatalf("after creation: epoch %d active %v status %+v create %v", r.MemberEpoch, a.active(), r.Status, a.created)
	}
	d = h.describeStreams("app")
	if d.State != "Stable" || d.Epoch != 2 || d.AssignmentEpoch != 2 || *d.AssignorName != "sticky" || len(d.Members) != 1 ||
		d.Topology.Subtopologies[0].StateChangelogTopics[0].NumPartitions != 4 {
		t.Fatalf("describe: %+v", d)
	}
	m := d.Members[0]
	if m.MemberID != "A" || m.ProcessID != "p1" || m.ClientID != "client-A" || m.MemberEpoch != 2 || m.TopologyEpoch != 0 ||
		len(m.Assignment.ActiveTasks) != 1 || len(m.Assignment.ActiveTasks[0].Partitions) != 4 || len(m.TargetAssignment.ActiveTasks[0].Partitions) != 4 {
		t.Fatalf("member: %+v", m)
	}
	// A heartbeat that changes nothing carries no tasks.
	if r := a.hb(); r.ErrorCode != 0 || r.ActiveTasks != nil || r.MemberEpoch != 2 {
		t.Fatalf("keepalive: %+v", r)
	}
}

// TestStreamsMissingSourceTopics: without its source topic the topology cannot be
// configured: MISSING_SOURCE_TOPICS, no tasks, nothing to create; the topic's creation
// moves the group on.
func TestStreamsMissingSourceTopics(t *testing.T) {
	h := newHarness(t, nil)
	h.setTopics(1, map[string]int32{"other": 1})
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	r := a.hb()
	if r.ErrorCode != 0 || !slices.Equal(statusCodes(r), []int8{streamsStatusMissingSourceTopics}) ||
		r.Status[0].StatusDetail != "Source topics in are missing." || a.created != nil || len(r.ActiveTasks) != 0 {
		t.Fatalf("join: %+v create %v", r, a.created)
	}
	if d := h.describeStreams("app"); d.State != "NotReady" {
		t.Fatalf("state %s", d.State)
	}
	h.setTopics(2, map[string]int32{"other": 1, "in": 2})
	r = a.hb()
	if !slices.Equal(statusCodes(r), []int8{streamsStatusMissingInternalTopics}) || len(a.created) != 1 || a.created[0].Partitions != 2 {
		t.Fatalf("source created: %+v create %+v", r.Status, a.created)
	}
	h.setTopics(3, map[string]int32{"other": 1, "in": 2, "store-changelog": 2})
	if r := a.hb(); len(r.Status) != 0 || !slices.Equal(a.active(), []int32{0, 1}) {
		t.Fatalf("ready: %+v active %v", r.Status, a.active())
	}
	// A changelog with another partition count than the topology implies.
	h.setTopics(4, map[string]int32{"other": 1, "in": 3, "store-changelog": 2})
	r = a.hb()
	if !slices.Equal(statusCodes(r), []int8{streamsStatusIncorrectlyPartitionedTopics}) ||
		!strings.Contains(r.Status[0].StatusDetail, "store-changelog") || len(a.owned.active) != 0 {
		t.Fatalf("incorrectly partitioned: %+v active %v", r.Status, a.owned.active)
	}
}

// TestStreamsRevokeBeforeAssign: a second member (another process) gets tasks only
// once the first revoked them; both end with disjoint halves; the one left takes all
// back after the other leaves.
func TestStreamsRevokeBeforeAssign(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	b := h.stClient("app", "B", "p2", streamsTopology(0, "in", "store-changelog"))
	if r := a.hb(); r.MemberEpoch != 1 || !slices.Equal(a.active(), []int32{0, 1, 2, 3}) {
		t.Fatalf("A joins: epoch %d active %v", r.MemberEpoch, a.active())
	}
	r := b.hb()
	if r.MemberEpoch != 2 || len(b.owned.active) != 0 {
		t.Fatalf("B joins: epoch %d active %v (A still holds everything)", r.MemberEpoch, b.owned.active)
	}
	if st := h.describeStreams("app").State; st != "Reconciling" {
		t.Fatalf("state %s", st)
	}
	// A learns it must give up two: it stays at epoch 1 with the two it keeps.
	if r := a.hb(); r.MemberEpoch != 1 || !slices.Equal(a.active(), []int32{0, 1}) {
		t.Fatalf("A revoking: epoch %d active %v", r.MemberEpoch, a.active())
	}
	// B still gets nothing: A has not reported the revocation yet.
	if r := b.hb(); r.ActiveTasks != nil || len(b.owned.active) != 0 {
		t.Fatalf("B before A revoked: %+v", r.ActiveTasks)
	}
	// A reports it owns two: it moves to epoch 2; then B gets the other two.
	if r := a.hb(); r.MemberEpoch != 2 || !slices.Equal(a.active(), []int32{0, 1}) {
		t.Fatalf("A after revoking: epoch %d active %v", r.MemberEpoch, a.active())
	}
	if r := b.hb(); r.MemberEpoch != 2 || !slices.Equal(b.active(), []int32{2, 3}) {
		t.Fatalf("B after A revoked: epoch %d active %v", r.MemberEpoch, b.active())
	}
	if st := h.describeStreams("app").State; st != "Stable" {
		t.Fatalf("state %s", st)
	}
	// B leaves: A takes everything at the next epoch.
	bEpoch := b.epoch
	if r := b.leave(); r.ErrorCode != 0 || r.MemberEpoch != -1 || r.MemberID != "B" {
		t.Fatalf("leave: %+v", r)
	}
	if r := a.hb(); r.MemberEpoch != 3 || !slices.Equal(a.active(), []int32{0, 1, 2, 3}) {
		t.Fatalf("A after B left: epoch %d active %v", r.MemberEpoch, a.active())
	}
	b.epoch = bEpoch
	mustCode(t, "the left member heartbeats", b.send(b.request()).ErrorCode, kerr.UnknownMemberID.Code)
}

// TestStreamsEpochFencing: an epoch ahead of the coordinator's is fenced; the previous
// epoch with a subset of the member's tasks is accepted (the answer that moved it was
// lost); an unknown member is UNKNOWN_MEMBER_ID.
func TestStreamsEpochFencing(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	b := h.stClient("app", "B", "p2", streamsTopology(0, "in", "store-changelog"))
	a.hb()
	req := a.request()
	req.MemberEpoch = 5
	mustCode(t, "epoch ahead", a.send(req).ErrorCode, kerr.FencedMemberEpoch.Code)
	b.hb()
	a.hb() // revokes two, epoch 1
	a.hb() // epoch 2
	req = a.request()
	req.MemberEpoch = 1
	if r := a.send(req); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("previous epoch: %+v", r)
	}
	req = a.request()
	req.MemberEpoch = 1
	req.ActiveTasks = []kmsg.TaskIDs{{SubtopologyID: "0", Partitions: []int32{0, 1, 2}}}
	mustCode(t, "previous epoch with a task not its", a.send(req).ErrorCode, kerr.FencedMemberEpoch.Code)
	req = a.request()
	req.MemberID = "nobody"
	mustCode(t, "unknown member", a.send(req).ErrorCode, kerr.UnknownMemberID.Code)
	req = a.request()
	req.ActiveTasks = []kmsg.TaskIDs{{SubtopologyID: "0", Partitions: []int32{7}}}
	mustCode(t, "a task the topology does not have", a.send(req).ErrorCode, kerr.InvalidRequest.Code)
}

// TestStreamsSessionExpiry: a member that stops heartbeating is fenced after the
// session timeout (the group's streams.session.timeout.ms here); the other takes its
// tasks.
func TestStreamsSessionExpiry(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	b := h.stClient("app", "B", "p2", streamsTopology(0, "in", "store-changelog"))
	a.settings.SessionTimeout, b.settings.SessionTimeout = 20*time.Second, 20*time.Second
	a.hb()
	b.hb()
	settle(t, 6, a, b)
	epoch := h.describeStreams("app").Epoch
	for i := 0; i < 5; i++ { // B is silent for 25 s
		h.clock.Advance(5 * time.Second)
		a.hb()
	}
	d := h.describeStreams("app")
	if len(d.Members) != 1 || d.Members[0].MemberID != "A" || d.Epoch != epoch+1 {
		t.Fatalf("after B's session expired: %+v", d)
	}
	settle(t, 4, a)
	if !slices.Equal(a.active(), []int32{0, 1, 2, 3}) {
		t.Fatalf("A after B was fenced: %v", a.active())
	}
}

// TestStreamsRebalanceTimeout: a member that does not revoke within its rebalance
// timeout is fenced.
func TestStreamsRebalanceTimeout(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	b := h.stClient("app", "B", "p2", streamsTopology(0, "in", "store-changelog"))
	a.hb()
	b.hb()
	all := a.owned.clone()
	a.hb() // told to revoke two
	for i := 0; i < 7; i++ {
		h.clock.Advance(5 * time.Second)
		// A keeps reporting every task: it never revokes.
		req := a.request()
		req.ActiveTasks = taskList(all.active)
		a.send(req)
		b.hb()
	}
	mustCode(t, "fenced after the rebalance timeout", a.send(a.request()).ErrorCode, kerr.UnknownMemberID.Code)
	settle(t, 4, b)
	if !slices.Equal(b.active(), []int32{0, 1, 2, 3}) {
		t.Fatalf("B: %v", b.active())
	}
}

// TestStreamsStaticMemberRejoin: a static member leaves for now (epoch -2): its tasks
// stay its own and the group epoch does not move; it comes back under a new member id
// with the same instance id and gets its tasks again, at once.
func TestStreamsStaticMemberRejoin(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	a.instance = strp("instance-a")
	b := h.stClient("app", "B", "p2", streamsTopology(0, "in", "store-changelog"))
	a.hb()
	b.hb()
	settle(t, 6, a, b)
	had := a.active()
	epoch := h.describeStreams("app").Epoch
	if r := a.leave(); r.ErrorCode != 0 || r.MemberEpoch != staticLeaveEpoch {
		t.Fatalf("static leave: %+v", r)
	}
	settle(t, 3, b)
	d := h.describeStreams("app")
	if d.Epoch != epoch || len(d.Members) != 2 || d.Members[0].MemberEpoch != staticLeaveEpoch || len(b.active()) != 2 {
		t.Fatalf("after the static leave: %+v; B has %v", d, b.active())
	}
	// Another instance cannot take the instance id of a member still in the group.
	b2 := h.stClient("app", "B2", "p3", streamsTopology(0, "in", "store-changelog"))
	b2.instance = strp("instance-b")
	b2.hb()
	dup := h.stClient("app", "B3", "p3", streamsTopology(0, "in", "store-changelog"))
	dup.instance = strp("instance-b")
	mustCode(t, "instance id in use", dup.send(dup.request()).ErrorCode, kerr.UnreleasedInstanceID.Code)
	b2.leave()
	settle(t, 6, b, b2)
	// A comes back as A2.
	a2 := h.stClient("app", "A2", "p1", streamsTopology(0, "in", "store-changelog"))
	a2.instance = strp("instance-a")
	r := a2.hb()
	if r.ErrorCode != 0 || !slices.Equal(a2.active(), had) {
		t.Fatalf("rejoin: %+v active %v, had %v", r, a2.active(), had)
	}
	d = h.describeStreams("app")
	for _, m := range d.Members {
		if m.MemberID == "A" {
			t.Fatalf("the replaced member is still there: %+v", d.Members)
		}
	}
	a.epoch = r.MemberEpoch
	mustCode(t, "the replaced member heartbeats", a.send(a.request()).ErrorCode, kerr.FencedInstanceID.Code)
}

// twoSubtopologies is topology epoch epoch: the stateful subtopology of
// streamsTopology and a stateless one reading in2.
func twoSubtopologies(epoch int32) *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := streamsTopology(epoch, "in", "store-changelog")
	s := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s.SubtopologyID = "1"
	s.SourceTopics = []string{"in2"}
	t.Subtopologies = append(t.Subtopologies, s)
	return t
}

// TestStreamsTopologyUpdateAndStaleTopology: a member joining with a topology of a
// higher epoch updates the group's (KIP-1071), the epoch moves and the new
// subtopology's tasks are assigned; members behind it get STALE_TOPOLOGY; a different
// topology of the same epoch is refused.
func TestStreamsTopologyUpdateAndStaleTopology(t *testing.T) {
	h := newHarness(t, nil)
	h.setTopics(1, map[string]int32{"in": 4, "store-changelog": 4, "in2": 2})
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	a.hb()
	b := h.stClient("app", "B", "p2", twoSubtopologies(1))
	if r := b.hb(); r.ErrorCode != 0 || len(r.Status) != 0 {
		t.Fatalf("B with topology 1: %+v", r)
	}
	d := h.describeStreams("app")
	if d.Topology.Epoch != 1 || len(d.Topology.Subtopologies) != 2 || d.State != "Reconciling" {
		t.Fatalf("topology after the update: %+v", d)
	}
	r := a.hb()
	if !slices.Equal(statusCodes(r), []int8{streamsStatusStaleTopology}) ||
		r.Status[0].StatusDetail != "The member's topology epoch 0 is behind the group's topology epoch 1." {
		t.Fatalf("A behind: %+v", r.Status)
	}
	settle(t, 6, a, b)
	total := a.owned.active.count() + b.owned.active.count()
	if total != 6 || a.owned.active.intersects(b.owned.active) {
		t.Fatalf("tasks: A %v B %v", a.owned.active, b.owned.active)
	}
	// A member joining with the old topology keeps the group's and is stale.
	c := h.stClient("app", "C", "p3", streamsTopology(0, "in", "store-changelog"))
	if r := c.hb(); r.ErrorCode != 0 || !slices.Equal(statusCodes(r), []int8{streamsStatusStaleTopology}) {
		t.Fatalf("C with topology 0: %+v", r)
	}
	if d := h.describeStreams("app"); d.Topology.Epoch != 1 {
		t.Fatalf("topology went back: %d", d.Topology.Epoch)
	}
	// The same epoch with another topology.
	x := h.stClient("app", "X", "p4", streamsTopology(1, "in2", ""))
	mustCode(t, "same epoch, other topology", x.send(x.request()).ErrorCode, kerr.StreamsInvalidTopologyEpoch.Code)
}

// TestStreamsStandbyTasks: with streams.num.standby.replicas 1, every task has a
// standby on the other process, never where it is active.
func TestStreamsStandbyTasks(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	b := h.stClient("app", "B", "p2", streamsTopology(0, "in", "store-changelog"))
	a.settings.NumStandbyReplicas, b.settings.NumStandbyReplicas = 1, 1
	a.hb()
	b.hb()
	settle(t, 8, a, b)
	for _, c := range []*stClient{a, b} {
		if c.owned.active.count() != 2 || c.owned.standby.count() != 2 || c.owned.active.intersects(c.owned.standby) {
			t.Fatalf("%s: active %v standby %v", c.id, c.owned.active, c.owned.standby)
		}
	}
	if !a.owned.active.equal(b.owned.standby) || !b.owned.active.equal(a.owned.standby) {
		t.Fatalf("standbys: A %v/%v B %v/%v", a.owned.active, a.owned.standby, b.owned.active, b.owned.standby)
	}
	// One process: no standby can be placed.
	c := h.stClient("app2", "C", "p1", streamsTopology(0, "in", "store-changelog"))
	d := h.stClient("app2", "D", "p1", streamsTopology(0, "in", "store-changelog"))
	c.settings.NumStandbyReplicas, d.settings.NumStandbyReplicas = 1, 1
	c.hb()
	d.hb()
	settle(t, 8, c, d)
	if c.owned.standby.count()+d.owned.standby.count() != 0 || c.owned.active.count()+d.owned.active.count() != 4 {
		t.Fatalf("one process: C %v D %v", c.owned, d.owned)
	}
	// The standby count changes: the epoch moves on the next heartbeat.
	epoch := h.describeStreams("app").Epoch
	a.settings.NumStandbyReplicas = 0
	a.hb()
	if d := h.describeStreams("app"); d.Epoch != epoch+1 {
		t.Fatalf("epoch %d after the standby count changed, was %d", d.Epoch, epoch)
	}
}

// TestStreamsEndpointMap: members with a user endpoint are told which partitions each
// endpoint serves (Interactive Queries) when their endpoint epoch is behind.
func TestStreamsEndpointMap(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	b := h.stClient("app", "B", "p2", streamsTopology(0, "in", "store-changelog"))
	a.endpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "a.example", Port: 7001}
	b.endpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "b.example", Port: 7002}
	a.hb()
	b.hb()
	settle(t, 6, a, b)
	a.endpointEpoch = -100
	r := a.hb()
	if len(r.PartitionsByUserEndpoint) != 2 {
		t.Fatalf("endpoints: %+v", r.PartitionsByUserEndpoint)
	}
	for _, e := range r.PartitionsByUserEndpoint {
		c := map[string]*stClient{"a.example": a, "b.example": b}[e.UserEndpoint.Host]
		if c == nil || len(e.ActivePartitions) != 1 || e.ActivePartitions[0].Topic != "in" || !slices.Equal(e.ActivePartitions[0].Partitions, c.active()) {
			t.Fatalf("endpoint %+v", e)
		}
	}
	if r := a.hb(); r.PartitionsByUserEndpoint != nil {
		t.Fatalf("map sent again at the same epoch: %+v", r.PartitionsByUserEndpoint)
	}
}

// TestStreamsShutdownApplication: a member's request to shut the application down is
// passed to every member's next heartbeat.
func TestStreamsShutdownApplication(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	b := h.stClient("app", "B", "p2", streamsTopology(0, "in", "store-changelog"))
	a.hb()
	b.hb()
	a.shutdown = true
	if r := a.hb(); !slices.Contains(statusCodes(r), streamsStatusShutdownApplication) {
		t.Fatalf("A: %+v", r.Status)
	}
	if r := b.hb(); !slices.Contains(statusCodes(r), streamsStatusShutdownApplication) || !strings.Contains(r.Status[len(r.Status)-1].StatusDetail, "A") {
		t.Fatalf("B: %+v", r.Status)
	}
}

// TestStreamsReload: a reloaded coordinator (the partition moved) has the same group,
// topology, members, epochs and tasks; members carry on at their epochs and the group
// epoch does not move.
func TestStreamsReload(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	b := h.stClient("app", "B", "p2", streamsTopology(0, "in", "store-changelog"))
	b.instance = strp("b-inst")
	b.endpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "b", Port: 1}
	a.settings.NumStandbyReplicas, b.settings.NumStandbyReplicas = 1, 1
	a.hb()
	b.hb()
	a.hb() // A mid-revocation
	before := h.describeStreams("app")
	h.start(nil)
	h.setTopics(1, map[string]int32{"in": 4, "store-changelog": 4})
	after := h.describeStreams("app")
	after.Topology, before.Topology = nil, nil // configured again at the next heartbeat
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("reload:\nbefore %+v\nafter  %+v", before, after)
	}
	settle(t, 8, a, b)
	d := h.describeStreams("app")
	if d.Epoch != before.Epoch || d.State != "Stable" {
		t.Fatalf("after the reload the group moved: epoch %d (was %d), state %s", d.Epoch, before.Epoch, d.State)
	}
	if a.owned.active.count()+b.owned.active.count() != 4 || a.owned.active.intersects(b.owned.active) {
		t.Fatalf("tasks: A %v B %v", a.owned.active, b.owned.active)
	}
}

func deleteGroup(h *harness, id string) int16 {
	ch := make(chan *kmsg.DeleteGroupsResponse, 1)
	h.c.DeleteGroups(&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{id}}, func(r *kmsg.DeleteGroupsResponse) { ch <- r })
	return (<-ch).Groups[0].ErrorCode
}

// TestStreamsListDeleteAndMigrate: ListGroups reports the group as type "streams";
// DeleteGroups deletes it once empty, with its records; an empty classic group (offsets
// only) becomes a streams group keeping its offsets, and an empty streams group becomes
// classic on a JoinGroup; a consumer-protocol heartbeat is refused.
func TestStreamsListDeleteAndMigrate(t *testing.T) {
	h := newStreamsHarness(t)
	mustCode(t, "simple commit", h.commit("app", "", -1, "in", 0, 42, ""), 0)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	mustCode(t, "join", a.hb().ErrorCode, 0)
	if got := h.fetch("app", "in", 0); got.Offset != 42 {
		t.Fatalf("offset after the conversion: %+v", got)
	}
	lg := h.c.ListGroups(&kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"streams"}})
	if len(lg.Groups) != 1 || lg.Groups[0].GroupType != "streams" || lg.Groups[0].ProtocolType != "streams" || lg.Groups[0].GroupState != "Stable" {
		t.Fatalf("list: %+v", lg.Groups)
	}
	if d := h.describe("app"); d.State != "Dead" {
		t.Fatalf("DescribeGroups of a streams group: %+v", d)
	}
	c := h.cgClient("app", "C", "in")
	mustCode(t, "consumer heartbeat", c.send(c.request(true)).ErrorCode, kerr.GroupIDNotFound.Code)
	mustCode(t, "classic join with members", h.join("app", joinOpts{}).get().ErrorCode, kerr.InconsistentGroupProtocol.Code)
	mustCode(t, "delete with a member", deleteGroup(h, "app"), kerr.NonEmptyGroup.Code)
	a.leave()
	if lg := h.c.ListGroups(&kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"empty"}}); len(lg.Groups) != 1 {
		t.Fatalf("empty filter: %+v", lg.Groups)
	}
	mustCode(t, "delete", deleteGroup(h, "app"), 0)
	if d := h.describeStreams("app"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleted: %+v", d)
	}
	h.start(nil)
	if d := h.describeStreams("app"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleted group came back: %+v", d)
	}
	// Empty streams group -> classic.
	h.setTopics(1, map[string]int32{"in": 4, "store-changelog": 4})
	b := h.stClient("app2", "B", "p1", streamsTopology(0, "in", "store-changelog"))
	b.hb()
	b.leave()
	res := h.joinNew("app2", joinOpts{})
	h.settle(res)
	if j := res.get(); j.ErrorCode != 0 {
		t.Fatalf("classic join of an empty streams group: %+v", j)
	}
	if d := h.describeStreams("app2"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("still a streams group: %+v", d)
	}
}

// TestStreamsNotReadyStateFilter: ListGroups' state filter takes Kafka's not_ready.
func TestStreamsNotReadyStateFilter(t *testing.T) {
	h := newHarness(t, nil)
	h.setTopics(1, map[string]int32{})
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", ""))
	a.hb()
	lg := h.c.ListGroups(&kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"not_ready"}})
	if len(lg.Groups) != 1 || lg.Groups[0].GroupState != "NotReady" {
		t.Fatalf("list: %+v", lg.Groups)
	}
}

// TestStreamsHeartbeatValidation: requests Kafka refuses before they reach the group.
func TestStreamsHeartbeatValidation(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	for _, c := range []struct {
		name string
		mut  func(*kmsg.StreamsGroupHeartbeatRequest)
		code int16
	}{
		{"no member id", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest.Code},
		{"no group id", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest.Code},
		{"no rebalance timeout", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest.Code},
		{"no topology", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.Topology = nil }, kerr.InvalidRequest.Code},
		{"tasks when joining", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.ActiveTasks = []kmsg.TaskIDs{{SubtopologyID: "0", Partitions: []int32{0}}}
		}, kerr.InvalidRequest.Code},
		{"one task list null", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.StandbyTasks = nil }, kerr.InvalidRequest.Code},
		{"epoch -3", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest.Code},
		{"static leave without instance", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.MemberEpoch = -2 }, kerr.InvalidRequest.Code},
		{"topology with a non-zero epoch", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.MemberEpoch = 3 }, kerr.InvalidRequest.Code},
		{"regex", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.Topology = streamsTopology(0, "in", "")
			r.Topology.Subtopologies[0].SourceTopicRegex = []string{"in.*"}
		}, kerr.InvalidRequest.Code},
		{"changelog with partitions", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.Topology = streamsTopology(0, "in", "store-changelog")
			r.Topology.Subtopologies[0].StateChangelogTopics[0].NumPartitions = 4
		}, kerr.StreamsInvalidTopology.Code},
		{"repartition topic never written", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.Topology = streamsTopology(0, "in", "")
			r.Topology.Subtopologies[0].RepartitionSourceTopics = []kmsg.TopicInfo{{Topic: "app-rep"}}
		}, kerr.StreamsInvalidTopology.Code},
		{"repartition loop", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
			t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{
				{SubtopologyID: "0", RepartitionSourceTopics: []kmsg.TopicInfo{{Topic: "x"}}, RepartitionSinkTopics: []string{"y"}},
				{SubtopologyID: "1", RepartitionSourceTopics: []kmsg.TopicInfo{{Topic: "y"}}, RepartitionSinkTopics: []string{"x"}},
			}
			r.Topology = &t
		}, kerr.StreamsInvalidTopology.Code},
	} {
		req := a.request()
		c.mut(req)
		if r := a.send(req); r.ErrorCode != c.code || r.ErrorMessage == nil {
			t.Errorf("%s: code %d %v, want %d", c.name, r.ErrorCode, r.ErrorMessage, c.code)
		}
	}
	req := a.request()
	req.MemberEpoch = 1
	req.Topology = nil
	mustCode(t, "heartbeat of a group that does not exist", a.send(req).ErrorCode, kerr.GroupIDNotFound.Code)
}

// TestStreamsRepartitionTopics: a two-subtopology topology with a repartition topic:
// its partition count is the writing subtopology's largest input, co-partitioned with
// the other source of its reader; the changelog of the reader follows.
func TestStreamsRepartitionTopics(t *testing.T) {
	h := newHarness(t, nil)
	h.setTopics(1, map[string]int32{"orders": 6, "customers": 3})
	topo := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	topo.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{
		{SubtopologyID: "0", SourceTopics: []string{"orders"}, RepartitionSinkTopics: []string{"app-rekey-repartition"}},
		{SubtopologyID: "1", SourceTopics: []string{"customers"},
			RepartitionSourceTopics: []kmsg.TopicInfo{{Topic: "app-rekey-repartition"}},
			StateChangelogTopics:    []kmsg.TopicInfo{{Topic: "app-join-changelog"}},
			CopartitionGroups:       []kmsg.StreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup{{SourceTopics: []int16{0}, RepartitionSourceTopics: []int16{0}}}},
	}
	a := h.stClient("app", "A", "p1", &topo)
	a.hb()
	got := map[string]int32{}
	for _, c := range a.created {
		got[c.Name] = c.Partitions
	}
	// The repartition topic would get 6 (orders), but it is co-partitioned with
	// customers (3); the join's changelog has its subtopology's 3 tasks.
	if !reflect.DeepEqual(got, map[string]int32{"app-rekey-repartition": 3, "app-join-changelog": 3}) {
		t.Fatalf("to create: %+v", a.created)
	}
	for _, c := range a.created {
		if c.Name == "app-rekey-repartition" && !slices.Contains(c.Configs, StreamsKeyValue{"cleanup.policy", "delete"}) {
			t.Fatalf("repartition configs: %+v", c.Configs)
		}
	}
	h.setTopics(2, map[string]int32{"orders": 6, "customers": 3, "app-rekey-repartition": 3, "app-join-changelog": 3})
	settle(t, 4, a)
	if a.owned.active.count() != 9 || len(a.owned.active["0"]) != 6 || len(a.owned.active["1"]) != 3 {
		t.Fatalf("tasks: %v", a.owned.active)
	}
}

// TestStreamsOffsetCommitValidation: the rules of Kafka's StreamsGroup for commits and
// fetches by member.
func TestStreamsOffsetCommitValidation(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	a.hb()
	g, _ := h.c.lookup("app", false)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range []struct {
		name    string
		version int16
		epoch   int32
		member  string
		txn     bool
		want    int16
	}{
		{"member at its epoch", 9, a.epoch, "A", false, 0},
		{"old version", 8, a.epoch, "A", false, kerr.UnsupportedVersion.Code},
		{"stale epoch", 9, a.epoch - 1, "A", false, kerr.StaleMemberEpoch.Code},
		{"epoch ahead", 9, a.epoch + 1, "A", false, kerr.StaleMemberEpoch.Code},
		{"unknown member", 9, 1, "Z", false, kerr.UnknownMemberID.Code},
		{"admin while members", 9, -1, "", false, kerr.UnknownMemberID.Code},
		{"transactional without member", 5, -1, "", true, 0},
		{"transactional by member", 3, a.epoch, "A", true, 0},
	} {
		if got := g.validateStreamsCommitLocked(c.version, c.epoch, c.member, nil, c.txn); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	id := "A"
	if code := g.validateStreamsFetchLocked(&id, a.epoch); code != 0 {
		t.Errorf("fetch at the epoch: %d", code)
	}
	if code := g.validateStreamsFetchLocked(&id, a.epoch-1); code != kerr.StaleMemberEpoch.Code {
		t.Errorf("fetch at an old epoch: %d", code)
	}
	if code := g.validateStreamsFetchLocked(nil, -1); code != 0 {
		t.Errorf("admin fetch: %d", code)
	}
}

// TestStreamsOffsetExpiryRule: what ExpireOffsets applies to a streams group (Kafka's
// StreamsGroup): offsets expire a retention after their commit, except those of the
// topology's source topics while the group has members; an empty group left without
// offsets is deleted, its records tombstoned, and does not come back on a reload.
func TestStreamsOffsetExpiryRule(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	a.hb()
	g, _ := h.c.lookup("app", false)
	var recs []Record
	g.with(func(*effects) {
		base, keep := g.streamsOffsetExpiryLocked()
		if _, ok := keep["in"]; !ok || base(OffsetValue{CommitTimestamp: 7}) != 7 {
			t.Errorf("with a member: keep %v", keep)
		}
	})
	a.leave()
	g.with(func(fx *effects) {
		if _, keep := g.streamsOffsetExpiryLocked(); keep != nil {
			t.Errorf("empty group keeps %v", keep)
		}
		g.offsets[topicPartition{"in", 0}] = OffsetValue{Offset: 1}
		if g.dropExpiredStreamsLocked(&recs) {
			t.Errorf("dropped with an offset")
		}
		delete(g.offsets, topicPartition{"in", 0})
		if !g.dropExpiredStreamsLocked(&recs) || g.state != stateDead {
			t.Errorf("not dropped without offsets")
		}
		g.appendLocked(fx, recs, func(error) {})
	})
	if len(recs) != 3 || recs[0].Value != nil || recs[2].Value != nil { // target metadata, metadata, topology
		t.Fatalf("tombstones: %+v", recs)
	}
	if d := h.describeStreams("app"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("dropped group: %+v", d)
	}
	h.start(nil)
	if d := h.describeStreams("app"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("dropped group came back: %+v", d)
	}
}

// TestStreamsCopartitionMismatch: co-partitioned source topics of different partition
// counts cannot be joined: INCORRECTLY_PARTITIONED_TOPICS, no tasks.
func TestStreamsCopartitionMismatch(t *testing.T) {
	h := newHarness(t, nil)
	h.setTopics(1, map[string]int32{"a": 2, "b": 3})
	topo := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	topo.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{{
		SubtopologyID: "0", SourceTopics: []string{"a", "b"},
		CopartitionGroups: []kmsg.StreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup{{SourceTopics: []int16{0, 1}}},
	}}
	a := h.stClient("app", "A", "p1", &topo)
	r := a.hb()
	if !slices.Equal(statusCodes(r), []int8{streamsStatusIncorrectlyPartitionedTopics}) ||
		r.Status[0].StatusDetail != "Following topics do not have the same number of partitions: [a=2, b=3]" || len(a.owned.active) != 0 {
		t.Fatalf("mismatch: %+v", r.Status)
	}
	h.setTopics(2, map[string]int32{"a": 3, "b": 3})
	if r := a.hb(); len(r.Status) != 0 || len(a.owned.active["0"]) != 3 {
		t.Fatalf("after a grew: %+v %v", r.Status, a.owned.active)
	}
}

// TestStreamsMaxSize: group.streams.max.size refuses a new member beyond it; a member
// rejoining in place is not new.
func TestStreamsMaxSize(t *testing.T) {
	h := newStreamsHarness(t)
	a := h.stClient("app", "A", "p1", streamsTopology(0, "in", "store-changelog"))
	b := h.stClient("app", "B", "p2", streamsTopology(0, "in", "store-changelog"))
	a.settings.MaxSize, b.settings.MaxSize = 1, 1
	a.hb()
	mustCode(t, "second member", b.send(b.request()).ErrorCode, kerr.GroupMaxSizeReached.Code)
	a.epoch = 0
	mustCode(t, "rejoin in place", a.hb().ErrorCode, 0)
}
