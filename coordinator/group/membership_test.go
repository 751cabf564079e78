package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinSyncStable(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 3)
	if gen != 1 {
		t.Fatalf("generation %d, want 1", gen)
	}
	d := h.describe("g")
	if d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 3 {
		t.Fatalf("describe: %+v", d)
	}
	for _, id := range ids {
		if code := h.heartbeat("g", id, gen, nil); code != 0 {
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(code))
		}
	}
	if code := h.heartbeat("g", ids[0], gen-1, nil); code != kerr.IllegalGeneration.Code {
		t.Fatalf("stale heartbeat: %v", kerr.ErrorForCode(code))
	}
	if code := h.heartbeat("g", "nobody", gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown heartbeat: %v", kerr.ErrorForCode(code))
	}
}

func TestJoinLeaderGetsMembersFollowersDoNot(t *testing.T) {
	h := newHarness(t, nil)
	a := h.joinNew("g", joinOpts{})
	b := h.joinNew("g", joinOpts{})
	h.settle(a, b)
	ra, rb := a.get(), b.get()
	if ra == nil || rb == nil {
		t.Fatal("joins not answered")
	}
	if ra.LeaderID != ra.MemberID || len(ra.Members) != 2 || len(rb.Members) != 0 || rb.LeaderID != ra.MemberID {
		t.Fatalf("leader view: a=%+v b=%+v", ra, rb)
	}
	if *ra.Protocol != "range" || *ra.ProtocolType != "consumer" {
		t.Fatalf("protocol: %v %v", *ra.Protocol, *ra.ProtocolType)
	}
}

func TestJoinBadInput(t *testing.T) {
	h := newHarness(t, nil)
	h.stableGroup("g", 1)
	cases := []struct {
		name string
		o    joinOpts
		want int16
	}{
		{"other protocol type", joinOpts{ptype: "connect"}, kerr.InconsistentGroupProtocol.Code},
		{"no common protocol", joinOpts{protocols: []kmsg.JoinGroupRequestProtocol{{Name: "sticky"}}}, kerr.InconsistentGroupProtocol.Code},
		{"no protocols", joinOpts{protocols: []kmsg.JoinGroupRequestProtocol{}}, kerr.InconsistentGroupProtocol.Code},
		{"session too short", joinOpts{session: time.Second}, kerr.InvalidSessionTimeout.Code},
		{"session too long", joinOpts{session: time.Hour}, kerr.InvalidSessionTimeout.Code},
		{"oversized metadata", joinOpts{protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: make([]byte, 2<<20)}}}, kerr.InvalidRequest.Code},
		{"unknown member id", joinOpts{memberID: "ghost"}, kerr.UnknownMemberID.Code},
		{"unknown static instance with id", joinOpts{memberID: "ghost", instance: strp("i-1")}, kerr.UnknownMemberID.Code},
	}
	for _, tc := range cases {
		r := h.join("g", tc.o).get()
		if r == nil || r.ErrorCode != tc.want {
			t.Errorf("%s: got %+v, want %v", tc.name, r, kerr.ErrorForCode(tc.want))
		}
	}
	if r := h.join("", joinOpts{}).get(); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Errorf("empty group id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// the group still works: still Stable, one member
	if d := h.describe("g"); d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("group after bad joins: %+v", d)
	}
}

func TestCommitValidation(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	if code := h.commit("g", "ghost", gen, "t", 0, 5, ""); code != kerr.UnknownMemberID.Code {
		t.Errorf("unknown member: %v", kerr.ErrorForCode(code))
	}
	if code := h.commit("g", ids[0], gen+1, "t", 0, 5, ""); code != kerr.IllegalGeneration.Code {
		t.Errorf("stale generation: %v", kerr.ErrorForCode(code))
	}
	if code := h.commit("g", "", -1, "t", 0, 5, ""); code != kerr.UnknownMemberID.Code {
		t.Errorf("simple commit to live group: %v", kerr.ErrorForCode(code))
	}
	big := string(make([]byte, 5000))
	if code := h.commit("g", ids[0], gen, "t", 0, 5, big); code != kerr.OffsetMetadataTooLarge.Code {
		t.Errorf("big metadata: %v", kerr.ErrorForCode(code))
	}
	if code := h.commit("g", ids[0], gen, "t", 0, 42, "meta"); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	got := h.fetch("g", "t", 0)
	if got.Offset != 42 || got.LeaderEpoch != 7 || *got.Metadata != "meta" {
		t.Fatalf("fetch: %+v", got)
	}
	if got := h.fetch("g", "t", 1); got.Offset != -1 || got.LeaderEpoch != -1 {
		t.Fatalf("fetch uncommitted: %+v", got)
	}
	// a simple commit on a group that never existed (generation -1) creates it
	if code := h.commit("simple", "", -1, "t", 3, 9, ""); code != 0 {
		t.Fatalf("simple commit: %v", kerr.ErrorForCode(code))
	}
	if got := h.fetch("simple", "t", 3); got.Offset != 9 {
		t.Fatalf("simple fetch: %+v", got)
	}
	// a generation >= 0 on an unknown group is stale
	if code := h.commit("nogroup", "m", 3, "t", 0, 1, ""); code != kerr.IllegalGeneration.Code {
		t.Fatalf("commit to unknown group: %v", kerr.ErrorForCode(code))
	}
}

func TestCommitDuringRebalance(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	// a third member joins: PreparingRebalance; commits with the old generation are
	// still accepted (the members learn of the rebalance from heartbeats)
	h.joinNew("g", joinOpts{})
	if code := h.heartbeat("g", ids[0], gen, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat in rebalance: %v", kerr.ErrorForCode(code))
	}
	if code := h.commit("g", ids[0], gen, "t", 0, 10, ""); code != 0 {
		t.Fatalf("commit in PreparingRebalance: %v", kerr.ErrorForCode(code))
	}
	// the old members rejoin; the group reaches CompletingRebalance
	j0 := h.join("g", joinOpts{memberID: ids[0]})
	j1 := h.join("g", joinOpts{memberID: ids[1]})
	r0, r1 := j0.get(), j1.get()
	if r0 == nil || r1 == nil || r0.Generation != gen+1 {
		t.Fatalf("rejoin: %+v %+v", r0, r1)
	}
	if code := h.commit("g", ids[0], gen+1, "t", 0, 11, ""); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit in CompletingRebalance: %v", kerr.ErrorForCode(code))
	}
	if code := h.commit("g", ids[0], gen, "t", 0, 11, ""); code != kerr.IllegalGeneration.Code {
		t.Fatalf("old-generation commit after rebalance: %v", kerr.ErrorForCode(code))
	}
}

func TestSessionExpiryRebalances(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 3)
	// members 0 and 1 heartbeat every 3 s; member 2 stays silent
	for i := 0; i < 4; i++ {
		h.clock.Advance(3 * time.Second)
		h.heartbeat("g", ids[0], gen, nil)
		h.heartbeat("g", ids[1], gen, nil)
	}
	if d := h.describe("g"); d.State != "PreparingRebalance" || len(d.Members) != 2 {
		t.Fatalf("after expiry: %+v", d)
	}
	if code := h.heartbeat("g", ids[2], gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %v", kerr.ErrorForCode(code))
	}
	j0 := h.join("g", joinOpts{memberID: ids[0]})
	j1 := h.join("g", joinOpts{memberID: ids[1]})
	if r := j0.get(); r == nil || r.Generation != gen+1 || len(r.Members)+len(j1.get().Members) != 2 {
		t.Fatalf("rejoin after expiry: %+v", r)
	}
}

func TestRebalanceTimeoutDropsMembersThatDoNotRejoin(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	j := h.join("g", joinOpts{memberID: ids[0]}) // leader rejoins: rebalance
	if j.get() != nil {
		t.Fatal("join answered before the others rejoined")
	}
	h.clock.Advance(5 * time.Second)
	h.heartbeat("g", ids[1], gen, nil) // keeps its session but never rejoins
	h.clock.Advance(26 * time.Second)
	r := j.get()
	if r == nil || r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("join after rebalance timeout: %+v", r)
	}
	if code := h.heartbeat("g", ids[1], gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("dropped member: %v", kerr.ErrorForCode(code))
	}
}

func TestPendingSyncExpiry(t *testing.T) {
	h := newHarness(t, nil)
	a := h.joinNew("g", joinOpts{rebalance: 10 * time.Second})
	b := h.joinNew("g", joinOpts{rebalance: 10 * time.Second})
	h.settle(a, b)
	ra, rb := a.get(), b.get()
	leader, follower := ra, rb
	if rb.LeaderID == rb.MemberID {
		leader, follower = rb, ra
	}
	s := h.sync("g", leader.MemberID, leader.Generation, nil, map[string][]byte{leader.MemberID: []byte("x"), follower.MemberID: []byte("y")})
	if s.get() == nil {
		t.Fatal("leader sync not answered")
	}
	// the follower never syncs: after the rebalance timeout it is removed
	h.clock.Advance(6 * time.Second)
	h.heartbeat("g", leader.MemberID, leader.Generation, nil)
	h.clock.Advance(5 * time.Second)
	d := h.describe("g")
	if len(d.Members) != 1 || d.State != "PreparingRebalance" {
		t.Fatalf("after pending sync expiry: %+v", d)
	}
}

func TestSyncErrors(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	cases := []struct {
		member string
		gen    int32
		want   int16
	}{
		{"ghost", gen, kerr.UnknownMemberID.Code},
		{ids[0], gen + 5, kerr.IllegalGeneration.Code},
	}
	for _, c := range cases {
		if r := h.sync("g", c.member, c.gen, nil, nil).get(); r.ErrorCode != c.want {
			t.Errorf("sync %s/%d: %v want %v", c.member, c.gen, kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(c.want))
		}
	}
	// inconsistent protocol name
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation, req.Protocol = 5, "g", ids[0], gen, strp("roundrobin")
	var got int16 = -2
	h.c.SyncGroup(req, func(r *kmsg.SyncGroupResponse) { got = r.ErrorCode })
	if got != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("protocol mismatch: %v", kerr.ErrorForCode(got))
	}
	if r := h.sync("nogroup", "m", 1, nil, nil).get(); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("unknown group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func TestSyncAnswersWaitForDurableAssignment(t *testing.T) {
	h := newHarness(t, nil)
	a := h.joinNew("g", joinOpts{})
	h.settle(a)
	r := a.get()
	h.log.hold = true
	s := h.sync("g", r.MemberID, r.Generation, nil, map[string][]byte{r.MemberID: []byte("mine")})
	if s.get() != nil {
		t.Fatal("sync answered before the assignment was durable")
	}
	h.log.hold = false
	h.log.release()
	if got := s.get(); got == nil || string(got.MemberAssignment) != "mine" {
		t.Fatalf("sync after release: %+v", got)
	}
}

func TestSyncStoreFailure(t *testing.T) {
	h := newHarness(t, nil)
	j := h.joinNew("g", joinOpts{})
	h.settle(j)
	r := j.get()
	h.log.failWith = errInjected
	s := h.sync("g", r.MemberID, r.Generation, nil, map[string][]byte{r.MemberID: []byte("mine")}).get()
	if s == nil || s.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("sync with failing log: %+v", s)
	}
	h.log.failWith = nil
	// the group rebalances and works again
	r2 := h.join("g", joinOpts{memberID: r.MemberID}).get()
	if r2 == nil || r2.ErrorCode != 0 || r2.Generation != r.Generation+1 {
		t.Fatalf("rejoin: %+v", r2)
	}
	if s := h.sync("g", r.MemberID, r2.Generation, nil, map[string][]byte{r.MemberID: []byte("x")}).get(); s.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(s.ErrorCode))
	}
}

func TestLeaveGroupBatched(t *testing.T) {
	h := newHarness(t, nil)
	ids, _ := h.stableGroup("g", 3)
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 5
	req.Group = "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[0]}, {MemberID: "ghost"}, {MemberID: ids[2]}}
	r := h.c.LeaveGroup(req)
	if r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 || r.Members[1].ErrorCode != kerr.UnknownMemberID.Code || r.Members[2].ErrorCode != 0 {
		t.Fatalf("leave: %+v", r)
	}
	if d := h.describe("g"); len(d.Members) != 1 || d.State != "PreparingRebalance" {
		t.Fatalf("after leave: %+v", d)
	}
	// v0 form; the last member leaves and the rebalance completes to Empty
	old := kmsg.NewPtrLeaveGroupRequest()
	old.Version, old.Group, old.MemberID = 0, "g", ids[1]
	if r := h.c.LeaveGroup(old); r.ErrorCode != 0 {
		t.Fatalf("v0 leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if d := h.describe("g"); d.State != "Empty" {
		t.Fatalf("after all left: %+v", d)
	}
	if r := h.c.LeaveGroup(old); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("second leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	h := newHarness(t, nil)
	inst := strp("instance-1")
	a := h.join("g", joinOpts{instance: inst}) // static: no MEMBER_ID_REQUIRED
	b := h.joinNew("g", joinOpts{})
	h.settle(a, b)
	ra, rb := a.get(), b.get()
	if ra == nil || rb == nil || ra.ErrorCode != 0 {
		t.Fatalf("joins: %+v %+v", ra, rb)
	}
	gen := ra.Generation
	assign := map[string][]byte{ra.MemberID: []byte("A"), rb.MemberID: []byte("B")}
	sa := h.sync("g", ra.MemberID, gen, inst, assign)
	sb := h.sync("g", rb.MemberID, gen, nil, nil)
	if sa.get().ErrorCode != 0 || sb.get().ErrorCode != 0 {
		t.Fatal("sync failed")
	}
	// the static member restarts: joins with no member id, same instance id
	r := h.join("g", joinOpts{instance: inst}).get()
	if r == nil || r.ErrorCode != 0 || r.Generation != gen || r.MemberID == ra.MemberID {
		t.Fatalf("static rejoin: %+v", r)
	}
	if !r.SkipAssignment || r.LeaderID != r.MemberID {
		t.Fatalf("static leader rejoin should skip assignment: %+v", r)
	}
	if d := h.describe("g"); d.State != "Stable" {
		t.Fatalf("rebalance happened: %+v", d)
	}
	// the new id gets the old assignment back, with no rebalance
	s := h.sync("g", r.MemberID, gen, inst, nil).get()
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("static sync: %+v", s)
	}
	if code := h.heartbeat("g", rb.MemberID, gen, nil); code != 0 {
		t.Fatalf("other member disturbed: %v", kerr.ErrorForCode(code))
	}
	// the old incarnation is fenced
	if code := h.heartbeat("g", ra.MemberID, gen, inst); code != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation: %v", kerr.ErrorForCode(code))
	}
	if code := h.commit("g", ra.MemberID, gen, "t", 0, 1, ""); code != kerr.UnknownMemberID.Code {
		t.Fatalf("old incarnation commit: %v", kerr.ErrorForCode(code))
	}
	// leave by instance id only (v3+)
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = 4, "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: inst}}
	if lr := h.c.LeaveGroup(req); lr.Members[0].ErrorCode != 0 {
		t.Fatalf("static leave: %v", kerr.ErrorForCode(lr.Members[0].ErrorCode))
	}
}

func TestStaticMemberOldClientGetsOldLeader(t *testing.T) {
	h := newHarness(t, nil)
	inst := strp("i")
	j := h.join("g", joinOpts{instance: inst, version: 5})
	h.settle(j)
	r := j.get()
	h.sync("g", r.MemberID, r.Generation, inst, map[string][]byte{r.MemberID: []byte("A")})
	r2 := h.join("g", joinOpts{instance: inst, version: 5}).get()
	if r2.ErrorCode != 0 || r2.LeaderID != r.MemberID || r2.MemberID == r.MemberID || len(r2.Members) != 0 {
		t.Fatalf("v5 static rejoin: %+v", r2)
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	a := h.joinNew("g", joinOpts{})
	h.clock.Advance(2 * time.Second)
	b := h.joinNew("g", joinOpts{})
	h.clock.Advance(2 * time.Second) // first delay ends; a member was added: wait again
	if a.get() != nil {
		t.Fatal("join completed although a member arrived during the delay")
	}
	h.clock.Advance(2 * time.Second)
	ra, rb := a.get(), b.get()
	if ra == nil || rb == nil || ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("joins after delay: %+v %+v", ra, rb)
	}
}

func TestPendingMemberExpires(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 1)
	// a member asks for an id but never comes back
	first := h.join("g", joinOpts{}).get()
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatal(first)
	}
	j := h.join("g", joinOpts{memberID: ids[0]}) // leader rejoin: rebalance waits for the pending one
	h.clock.Advance(9 * time.Second)
	if j.get() != nil {
		t.Fatal("completed while a pending member was out")
	}
	h.clock.Advance(2 * time.Second)
	if r := j.get(); r == nil || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("after pending expiry: %+v", r)
	}
}

func TestMaxGroupSize(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxGroupSize = 2 })
	h.stableGroup("g", 2)
	if r := h.join("g", joinOpts{}).get(); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("third member: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func TestProtocolSelection(t *testing.T) {
	cases := []struct {
		prefs [][]string
		want  string
		ok    bool
	}{
		{[][]string{{"range", "sticky"}, {"sticky", "range"}, {"sticky"}}, "sticky", true},
		{[][]string{{"range", "sticky"}, {"range", "sticky"}}, "range", true},
		{[][]string{{"a"}, {"b"}}, "", false},
		{[][]string{{"a", "b"}, {"b", "a"}}, "a", true},
	}
	for _, c := range cases {
		var ms []*member
		for _, p := range c.prefs {
			m := &member{}
			for _, n := range p {
				m.protocols = append(m.protocols, protocol{name: n})
			}
			ms = append(ms, m)
		}
		got, ok := selectCommon(ms, nil)
		if got != c.want || ok != c.ok {
			t.Errorf("%v: got %q %v", c.prefs, got, ok)
		}
	}
}

func TestNotCoordinator(t *testing.T) {
	h := newHarness(t, nil)
	p := h.c.PartitionFor("g")
	h.c.UnloadPartition(p)
	if r := h.join("g", joinOpts{}).get(); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if code := h.c.Status("g"); code != kerr.NotCoordinator.Code {
		t.Fatalf("status: %v", kerr.ErrorForCode(code))
	}
	if err := h.c.LoadPartition(p); err != nil {
		t.Fatal(err)
	}
	if code := h.c.Status("g"); code != 0 {
		t.Fatalf("status after load: %v", kerr.ErrorForCode(code))
	}
}

func TestLoadPartitions(t *testing.T) {
	h := newHarness(t, nil)
	h.commit("g", "", -1, "t", 0, 3, "")
	h.c.Close()
	h.c = New(Config{Clock: h.clock, Logger: quietLogger()}, h.log)
	if code := h.c.Status("g"); code != kerr.NotCoordinator.Code {
		t.Fatalf("before load: %v", kerr.ErrorForCode(code))
	}
	all := make([]int32, h.c.NumPartitions())
	for i := range all {
		all[i] = int32(i)
	}
	if err := h.c.LoadPartitions(all...); err != nil {
		t.Fatal(err)
	}
	if got := h.fetch("g", "t", 0); got.Offset != 3 {
		t.Fatalf("after LoadPartitions: %+v", got)
	}
	if err := h.c.LoadPartition(h.c.NumPartitions()); err == nil {
		t.Fatal("loading a partition out of range succeeded")
	}
}

func TestUnloadAnswersParkedJoins(t *testing.T) {
	h := newHarness(t, nil)
	ids, _ := h.stableGroup("g", 2)
	j := h.join("g", joinOpts{memberID: ids[0]})
	h.c.UnloadPartition(h.c.PartitionFor("g"))
	if r := j.get(); r == nil || r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked join on unload: %+v", r)
	}
}
