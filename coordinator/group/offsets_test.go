package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetsAndGroupSurviveRestart(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	for p := int32(0); p < 6; p++ {
		if code := h.commit("g", ids[p%2], gen, "orders", p, int64(100+p), fmt.Sprint("m", p)); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	h.commit("g", ids[0], gen, "orders", 0, 500, "last") // the last commit wins
	h.c.Close()
	h.start(nil) // a new coordinator replays the same log
	got := h.fetch("g", "orders", 0)
	if got.Offset != 500 || got.LeaderEpoch != 7 || *got.Metadata != "last" {
		t.Fatalf("offset after restart: %+v", got)
	}
	if got := h.fetch("g", "orders", 5); got.Offset != 105 || *got.Metadata != "m5" {
		t.Fatalf("offset after restart: %+v", got)
	}
	d := h.describe("g")
	if d.State != "Stable" || len(d.Members) != 2 || d.Protocol != "range" {
		t.Fatalf("group after restart: %+v", d)
	}
	// members that heartbeat in time keep their generation and assignment
	for _, id := range ids {
		if code := h.heartbeat("g", id, gen, nil); code != 0 {
			t.Fatalf("heartbeat after restart: %v", kerr.ErrorForCode(code))
		}
	}
	if s := h.sync("g", ids[1], gen, nil, nil).get(); s.ErrorCode != 0 || string(s.MemberAssignment) != "a-1" {
		t.Fatalf("assignment after restart: %+v", s)
	}
	// a member that does not come back expires
	h.clock.Advance(8 * time.Second)
	h.heartbeat("g", ids[0], gen, nil)
	h.clock.Advance(3 * time.Second)
	if d := h.describe("g"); len(d.Members) != 1 {
		t.Fatalf("silent member kept: %+v", d)
	}
}

func TestDeleteGroupsAndRestart(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 1)
	h.commit("g", ids[0], gen, "t", 0, 5, "")
	del := func(groups ...string) *kmsg.DeleteGroupsResponse {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = 2
		req.Groups = groups
		var got *kmsg.DeleteGroupsResponse
		h.c.DeleteGroups(req, func(r *kmsg.DeleteGroupsResponse) { got = r })
		if got == nil {
			t.Fatal("delete not answered")
		}
		return got
	}
	r := del("g", "nope")
	if r.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code || r.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete: %+v", r)
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 3, "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[0]}}
	h.c.LeaveGroup(leave)
	if r := del("g"); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete empty: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	if d := h.describe("g"); d.State != "Dead" {
		t.Fatalf("deleted group: %+v", d)
	}
	h.start(nil)
	if got := h.fetch("g", "t", 0); got.Offset != -1 {
		t.Fatalf("offset of deleted group after restart: %+v", got)
	}
	if d := h.describe("g"); d.State != "Dead" {
		t.Fatalf("deleted group after restart: %+v", d)
	}
}

func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 1) // subscribes to "t"
	h.commit("g", ids[0], gen, "t", 0, 5, "")
	h.commit("g", ids[0], gen, "old", 0, 6, "")
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	req.Topics = []kmsg.OffsetDeleteRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "old", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
	}
	var r *kmsg.OffsetDeleteResponse
	h.c.OffsetDelete(req, func(x *kmsg.OffsetDeleteResponse) { r = x })
	if r == nil || r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || r.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", r)
	}
	if got := h.fetch("g", "old", 0); got.Offset != -1 {
		t.Fatalf("deleted offset: %+v", got)
	}
	if got := h.fetch("g", "t", 0); got.Offset != 5 {
		t.Fatalf("kept offset: %+v", got)
	}
	h.start(nil)
	if got := h.fetch("g", "old", 0); got.Offset != -1 {
		t.Fatalf("deleted offset after restart: %+v", got)
	}
	req.Group = "nope"
	h.c.OffsetDelete(req, func(x *kmsg.OffsetDeleteResponse) { r = x })
	if r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func TestOffsetExpiry(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.OffsetRetention = time.Hour
		c.RetentionCheckInterval = 10 * time.Minute
	})
	ids, gen := h.stableGroup("g", 1)
	h.commit("g", ids[0], gen, "t", 0, 5, "")
	h.commit("g", ids[0], gen, "gone", 0, 5, "") // not subscribed: expires while Stable
	if code := h.commit("simple", "", -1, "t", 0, 9, ""); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	// keep the member alive past the retention and the next expiry scan
	for d := time.Duration(0); d < 75*time.Minute; d += 5 * time.Second {
		h.clock.Advance(5 * time.Second)
		h.heartbeat("g", ids[0], gen, nil)
	}
	if got := h.fetch("g", "gone", 0); got.Offset != -1 {
		t.Fatalf("unsubscribed offset kept: %+v", got)
	}
	if got := h.fetch("g", "t", 0); got.Offset != 5 {
		t.Fatalf("subscribed offset expired: %+v", got)
	}
	if got := h.fetch("simple", "t", 0); got.Offset != -1 {
		t.Fatalf("simple group offset kept: %+v", got)
	}
	// the member leaves; an hour after the group became empty its offsets expire
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.MemberID = 1, "g", ids[0]
	h.c.LeaveGroup(leave)
	h.clock.Advance(50 * time.Minute)
	if got := h.fetch("g", "t", 0); got.Offset != 5 {
		t.Fatalf("expired too early: %+v", got)
	}
	h.clock.Advance(20 * time.Minute)
	if got := h.fetch("g", "t", 0); got.Offset != -1 {
		t.Fatalf("empty group offset kept: %+v", got)
	}
	if d := h.describe("g"); d.State != "Dead" {
		t.Fatalf("empty group without offsets kept: %+v", d)
	}
	h.start(nil)
	if got := h.fetch("g", "t", 0); got.Offset != -1 {
		t.Fatalf("expired offset back after restart: %+v", got)
	}
}

func TestCommitRetentionV2(t *testing.T) {
	h := newHarness(t, nil)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 2
	req.Group, req.Generation, req.RetentionTimeMillis = "g", -1, 60_000
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3}}}}
	h.c.OffsetCommit(req, func(r *kmsg.OffsetCommitResponse) {
		if r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
		}
	})
	h.c.ExpireOffsets()
	if got := h.fetch("g", "t", 0); got.Offset != 3 {
		t.Fatalf("early: %+v", got)
	}
	h.clock.Advance(61 * time.Second)
	h.c.ExpireOffsets()
	if got := h.fetch("g", "t", 0); got.Offset != -1 {
		t.Fatalf("explicit retention ignored: %+v", got)
	}
}

func TestCommitAppendErrors(t *testing.T) {
	h := newHarness(t, nil)
	cases := []struct {
		err  error
		want int16
	}{
		{errInjected, kerr.CoordinatorNotAvailable.Code},
		{fmt.Errorf("moved: %w", ErrNotLeader), kerr.NotCoordinator.Code},
		{fmt.Errorf("big: %w", ErrRecordTooLarge), kerr.InvalidCommitOffsetSize.Code},
	}
	for _, c := range cases {
		h.log.failWith = c.err
		if code := h.commit("g", "", -1, "t", 0, 1, ""); code != c.want {
			t.Errorf("%v: got %v want %v", c.err, kerr.ErrorForCode(code), kerr.ErrorForCode(c.want))
		}
		if got := h.fetch("g", "t", 0); got.Offset != -1 {
			t.Errorf("failed commit visible: %+v", got)
		}
	}
	h.log.failWith = nil
	if code := h.commit("g", "", -1, "t", 0, 1, ""); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
}

func TestCommitVisibleOnlyWhenDurable(t *testing.T) {
	h := newHarness(t, nil)
	h.log.hold = true
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "g", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	var got *kmsg.OffsetCommitResponse
	h.c.OffsetCommit(req, func(r *kmsg.OffsetCommitResponse) { got = r })
	if got != nil {
		t.Fatal("answered before durable")
	}
	if f := h.fetch("g", "t", 0); f.Offset != -1 {
		t.Fatalf("visible before durable: %+v", f)
	}
	h.log.hold = false
	h.log.release()
	if got == nil || got.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("after release: %+v", got)
	}
	if f := h.fetch("g", "t", 0); f.Offset != 3 {
		t.Fatalf("after release: %+v", f)
	}
}

func TestOffsetFetchVersions(t *testing.T) {
	h := newHarness(t, nil)
	h.commit("g", "", -1, "a", 0, 10, "x")
	h.commit("g", "", -1, "b", 1, 11, "")
	// v1: one group, named partitions, errors per partition
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 1, "g"
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "a", Partitions: []int32{0, 3}}}
	r := h.c.OffsetFetch(req)
	if len(r.Topics) != 1 || r.Topics[0].Partitions[0].Offset != 10 || r.Topics[0].Partitions[1].Offset != -1 {
		t.Fatalf("v1: %+v", r)
	}
	// v7: all topics
	req = kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.Topics = 7, "g", nil
	r = h.c.OffsetFetch(req)
	n := 0
	for _, tp := range r.Topics {
		n += len(tp.Partitions)
	}
	if n != 2 || r.ErrorCode != 0 {
		t.Fatalf("v7 all: %+v", r)
	}
	// v8: batched groups, one unknown
	req = kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}, {Group: "other", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "a", Partitions: []int32{0}}}}}
	r = h.c.OffsetFetch(req)
	if len(r.Groups) != 2 || len(r.Groups[0].Topics) != 2 || r.Groups[1].Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("v8: %+v", r)
	}
}

func TestListAndDescribe(t *testing.T) {
	h := newHarness(t, nil)
	h.stableGroup("live", 2)
	h.commit("empty", "", -1, "t", 0, 1, "")
	list := func(states ...string) []string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 4
		req.StatesFilter = states
		var out []string
		for _, g := range h.c.ListGroups(req).Groups {
			out = append(out, g.Group+"/"+g.GroupState)
		}
		return out
	}
	if got := fmt.Sprint(list()); got != "[empty/Empty live/Stable]" {
		t.Fatalf("list: %s", got)
	}
	if got := fmt.Sprint(list("stable")); got != "[live/Stable]" {
		t.Fatalf("list stable: %s", got)
	}
	req := kmsg.NewPtrListGroupsRequest()
	req.Version, req.TypesFilter = 5, []string{"consumer"}
	if n := len(h.c.ListGroups(req).Groups); n != 0 {
		t.Fatalf("type filter consumer: %d groups", n)
	}
	d := h.describe("live")
	if len(d.Members) != 2 || len(d.Members[0].MemberAssignment) == 0 || d.Members[0].ClientID != "client" {
		t.Fatalf("describe: %+v", d)
	}
	dr := kmsg.NewPtrDescribeGroupsRequest()
	dr.Version, dr.Groups = 6, []string{"missing"}
	if g := h.c.DescribeGroups(dr).Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || g.State != "Dead" {
		t.Fatalf("describe missing v6: %+v", g)
	}
}

func TestLoadSkipsUndecodableRecords(t *testing.T) {
	h := newHarness(t, nil)
	h.commit("g", "", -1, "t", 0, 4, "")
	p := h.c.PartitionFor("g")
	h.log.Append(p, []Record{
		{Key: []byte{0, 3, 0, 1, 'g'}, Value: []byte{1, 2, 3}},           // a KIP-848 record: ignored
		{Key: []byte{0, 1}, Value: []byte{1}},                            // corrupt key
		{Key: AppendOffsetKey(nil, "g", "t", 1), Value: []byte{0, 9}},    // unknown value version
		{Key: AppendGroupKey(nil, "g"), Value: []byte{0, 3, 0, 0, 0x7f}}, // corrupt group value
	}, func(error) {})
	h.start(nil)
	if got := h.fetch("g", "t", 0); got.Offset != 4 {
		t.Fatalf("good record lost: %+v", got)
	}
}
