package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// TestOffsetsSurviveRestart commits through kadm, restarts the broker on the same
// data, and reads the offsets, leader epochs and metadata back.
func TestOffsetsSurviveRestart(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncFsync)
	adm := tb.admin(t)
	mustCreate(t, adm, "orders", 6, nil)
	var os kadm.Offsets
	for p := int32(0); p < 6; p++ {
		os.Add(kadm.Offset{Topic: "orders", Partition: p, At: 100 + int64(p), LeaderEpoch: 4, Metadata: "m"})
	}
	if err := adm.CommitAllOffsets(testCtx(t), "billing", os); err != nil {
		t.Fatal(err)
	}
	check := func(adm *kadm.Client) {
		t.Helper()
		got, err := adm.FetchOffsets(testCtx(t), "billing")
		if err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 6; p++ {
			o, ok := got.Lookup("orders", p)
			if !ok || o.Err != nil || o.At != 100+int64(p) || o.LeaderEpoch != 4 || o.Metadata != "m" {
				t.Fatalf("partition %d: %+v", p, o)
			}
		}
	}
	check(adm)
	tb.a.Close()
	tb.restart()
	check(tb.admin(t))
}

func TestOffsetCommitUnknownTopic(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncNone)
	mustCreate(t, tb.admin(t), "known", 1, nil)
	rc := tb.raw(t)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "simple", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "nope", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
		{Topic: "known", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}, {Partition: 9, Offset: 5}}},
	}
	var resp *kmsg.OffsetCommitResponse
	deadline := time.Now().Add(10 * time.Second)
	for { // the first requests may find the offsets topic loading
		resp = rc.roundTrip(req).(*kmsg.OffsetCommitResponse)
		if resp.Topics[1].Partitions[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	if resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code ||
		resp.Topics[1].Partitions[0].ErrorCode != 0 ||
		resp.Topics[1].Partitions[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit: %+v", resp)
	}
	got, err := tb.admin(t).FetchOffsets(testCtx(t), "simple")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("known", 0); !ok || o.At != 5 {
		t.Fatalf("fetch: %+v", got)
	}
}

func TestGroupAdminAPIs(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncNone)
	adm := tb.admin(t)
	mustCreate(t, adm, "a", 2, nil)
	mustCreate(t, adm, "b", 1, nil)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "a", Partition: 0, At: 1, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "a", Partition: 1, At: 2, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "b", Partition: 0, At: 3, LeaderEpoch: -1})
	for _, g := range []string{"g1", "g2"} {
		if err := adm.CommitAllOffsets(testCtx(t), g, os); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := adm.ListGroups(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := listed.Groups(); len(got) != 2 {
		t.Fatalf("list: %v", got)
	}
	if listed, err = adm.ListGroups(testCtx(t), "Stable"); err != nil || len(listed) != 0 {
		t.Fatalf("list Stable: %v %v", listed, err)
	}
	described, err := adm.DescribeGroups(testCtx(t), "g1")
	if err != nil || described["g1"].State != "Empty" {
		t.Fatalf("describe: %+v %v", described, err)
	}
	// OffsetDelete of one topic
	ts := kadm.TopicsSet{}
	ts.Add("a", 0, 1)
	dr, err := adm.DeleteOffsets(testCtx(t), "g1", ts)
	if err != nil || dr.Error() != nil {
		t.Fatalf("delete offsets: %v %v", err, dr.Error())
	}
	got, _ := adm.FetchOffsets(testCtx(t), "g1")
	if _, ok := got.Lookup("a", 0); ok {
		if o, _ := got.Lookup("a", 0); o.At != -1 {
			t.Fatalf("deleted offset still served: %+v", o)
		}
	}
	if o, ok := got.Lookup("b", 0); !ok || o.At != 3 {
		t.Fatalf("kept offset: %+v", o)
	}
	// DeleteGroups
	del, err := adm.DeleteGroups(testCtx(t), "g2", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if del["g2"].Err != nil || !errors.Is(del["missing"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("delete groups: %+v", del)
	}
	if listed, err = adm.ListGroups(testCtx(t)); err != nil || len(listed) != 1 {
		t.Fatalf("list after delete: %v %v", listed, err)
	}
}

// TestOffsetCommitAssignedConsumer: a consumer that assigns itself its partitions
// (assign(), no group membership) commits with its own member id and epoch -1 (what
// librdkafka's KIP-848 consumer sends, v9) or generation -1 (classic, v8): accepted while
// the group has no members, as Kafka's ConsumerGroup and ClassicGroup accept it (it was
// UNKNOWN_MEMBER_ID); refused while it has members.
func TestOffsetCommitAssignedConsumer(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncNone)
	mustCreate(t, tb.admin(t), "assigned", 1, nil)
	rc := tb.raw(t)
	commit := func(version int16, group, member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = version, group, member, epoch
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "assigned", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3}}}}
		var code int16
		eventually(t, 10*time.Second, "the offsets topic loaded", func() bool {
			code = rc.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
			return code != kerr.CoordinatorLoadInProgress.Code && code != kerr.CoordinatorNotAvailable.Code && code != kerr.NotCoordinator.Code
		})
		return code
	}
	// A group that does not exist yet (created classic, empty).
	if code := commit(9, "assign-new", "rdkafka-own-id", -1); code != 0 {
		t.Fatalf("v9 commit with an own member id to a new group: %v", kerr.ErrorForCode(code))
	}
	if code := commit(8, "assign-new", "rdkafka-own-id", -1); code != 0 {
		t.Fatalf("v8 commit with an own member id to an empty classic group: %v", kerr.ErrorForCode(code))
	}
	// A consumer group whose only member left.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Topics = 1, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames, hb.RebalanceTimeoutMillis = "assign-848", "member-00000000000001", 0, []string{"assigned"}, 30000
	var hr *kmsg.ConsumerGroupHeartbeatResponse
	eventually(t, 10*time.Second, "the member joined", func() bool {
		hr = rc.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
		return hr.ErrorCode == 0
	})
	if code := commit(9, "assign-848", "rdkafka-own-id", -1); code != kerr.UnknownMemberID.Code {
		t.Fatalf("epoch -1 while the group has a member: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Version = 1
	leave.Group, leave.MemberID, leave.MemberEpoch = "assign-848", hb.MemberID, -1
	if r := rc.roundTrip(leave).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("leaving: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if code := commit(9, "assign-848", "rdkafka-own-id", -1); code != 0 {
		t.Fatalf("v9 commit with an own member id to an empty consumer group: %v", kerr.ErrorForCode(code))
	}
}

// TestDeletedTopicOffsetsGo: deleting a topic deletes every group's committed offsets
// of it, as Kafka's group coordinator does, so that a topic re-created under the same
// name starts with none (a consumer resumed at the old topic's offsets, beyond the new
// topic's end or into other data), and this survives a restart (tombstones written).
func TestDeletedTopicOffsetsGo(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncNone)
	adm := tb.admin(t)
	mustCreate(t, adm, "doomed", 2, nil)
	mustCreate(t, adm, "kept", 1, nil)
	var os kadm.Offsets
	for p := int32(0); p < 2; p++ {
		os.Add(kadm.Offset{Topic: "doomed", Partition: p, At: 40 + int64(p)})
	}
	os.Add(kadm.Offset{Topic: "kept", Partition: 0, At: 7})
	if err := adm.CommitAllOffsets(testCtx(t), "g-doomed", os); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopics(testCtx(t), "doomed"); err != nil {
		t.Fatal(err)
	}
	check := func(adm *kadm.Client, what string) {
		t.Helper()
		eventually(t, 10*time.Second, what, func() bool {
			got, err := adm.FetchOffsets(testCtx(t), "g-doomed")
			if err != nil {
				return false
			}
			_, doomed := got.Lookup("doomed", 0)
			k, kept := got.Lookup("kept", 0)
			return !doomed && kept && k.At == 7
		})
	}
	check(adm, "the deleted topic's offsets gone, the other topic's kept")
	mustCreate(t, adm, "doomed", 2, nil)
	check(adm, "no offsets for the re-created topic")
	tb.a.Close()
	tb.restart()
	check(tb.admin(t), "no offsets for the re-created topic after a restart")
}
