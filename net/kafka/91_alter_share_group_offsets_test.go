package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterShareGroupOffsets and DeleteShareGroupOffsets on an empty share group: a new
// start offset is where the next member starts (records acknowledged above it are
// delivered again); deleted offsets start over by share.auto.offset.reset (earliest
// here). Both are refused while the group has members.
func TestShareGroupOffsetsAlterAndDelete(t *testing.T) {
	tb := startShareBroker(t)
	ctx := testCtx(t)
	adm := tb.admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "so"); err != nil {
		t.Fatal(err)
	}
	produceN(t, tb.client(t), "so", 0, 20)
	startOf := func() int64 {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "sog", Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "so", Partitions: []int32{0}}}}}
		r, err := req.RequestWith(ctx, tb.client(t))
		if err != nil || r.Groups[0].ErrorCode != 0 || r.Groups[0].Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("DescribeShareGroupOffsets: %+v %v", r, err)
		}
		return r.Groups[0].Topics[0].Partitions[0].StartOffset
	}
	// consume accepts every record it gets until it has want distinct offsets, then
	// leaves the group.
	consume := func(want int) map[int64]bool {
		cl := shareClient(t, []string{tb.addr}, "sog", "so", kgo.ShareMaxRecords(5), kgo.ShareMaxRecordsStrict())
		got := map[int64]bool{}
		eventually(t, 15*time.Second, "records", func() bool {
			for _, r := range pollShare(t, cl, 300*time.Millisecond) {
				if len(got) < want {
					r.Ack(kgo.AckAccept)
					got[r.Offset] = true
				} else {
					r.Ack(kgo.AckRelease)
				}
			}
			return len(got) >= want
		})
		if err := cl.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
		// While it is a member, the offsets cannot be changed.
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "so", Partition: 0, At: 0})
		if _, err := adm.AlterShareGroupOffsets(ctx, "sog", offs); !errors.Is(err, kerr.NonEmptyGroup) {
			t.Fatalf("alter with a member: %v, want NON_EMPTY_GROUP", err)
		}
		cl.Close()
		return got
	}
	first := consume(10)
	if startOf() != 10 || len(first) != 10 {
		t.Fatalf("after the first member: start %d, %d records", startOf(), len(first))
	}

	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "so", Partition: 0, At: 5})
	if r, err := adm.AlterShareGroupOffsets(ctx, "sog", offs); err != nil || r.Error() != nil {
		t.Fatalf("alter: %v %v", err, r.Error())
	}
	if s := startOf(); s != 5 {
		t.Fatalf("start after the alter: %d", s)
	}
	second := consume(15)
	for o := int64(5); o < 20; o++ {
		if !second[o] {
			t.Fatalf("after the alter to 5, offset %d not delivered: %v", o, second)
		}
	}

	if r, err := adm.DeleteShareGroupOffsets(ctx, "sog", "so"); err != nil || r.Error() != nil {
		t.Fatalf("delete: %v %v", err, r.Error())
	}
	if s := startOf(); s != -1 {
		t.Fatalf("start after the delete: %d", s)
	}
	third := consume(20)
	if len(third) != 20 {
		t.Fatalf("after the delete: %d records", len(third))
	}
}

// TestShareGroupOffsetsAlterCreatesTheGroup: AlterShareGroupOffsets for a group id no
// group holds creates an empty share group and sets its start offset, as Kafka does
// (franz-go's TestShareGroupOffsetsAdmin: it was GROUP_ID_NOT_FOUND); the group and its
// offset outlive the coordinator's restart, and a consumer group's id is refused.
func TestShareGroupOffsetsAlterCreatesTheGroup(t *testing.T) {
	tb := startShareBroker(t)
	ctx := testCtx(t)
	adm := tb.admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "fresh"); err != nil {
		t.Fatal(err)
	}
	produceN(t, tb.client(t), "fresh", 0, 20)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "fresh", Partition: 0, At: 8})
	// The first request may find __consumer_offsets loading.
	var alterErr error
	eventually(t, 10*time.Second, "the alter of a fresh group", func() bool {
		r, err := adm.AlterShareGroupOffsets(ctx, "never-joined", offs)
		if err == nil {
			err = r.Error()
		}
		alterErr = err
		return err == nil || !errors.Is(err, kerr.CoordinatorLoadInProgress) && !errors.Is(err, kerr.NotCoordinator)
	})
	if alterErr != nil {
		t.Fatalf("alter of a fresh group: %v", alterErr)
	}
	// startOf describes the group's offsets, of every topic (Topics null: those it holds
	// share state for) or of "fresh" partition 0 named; -2 when "fresh" is not listed.
	startOf := func(all bool) int64 {
		t.Helper()
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "never-joined"}}
		if !all {
			req.Groups[0].Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "fresh", Partitions: []int32{0}}}
		}
		var start int64 = -2
		eventually(t, 10*time.Second, "the group's offsets described", func() bool {
			r, err := req.RequestWith(ctx, tb.client(t))
			if err != nil || r.Groups[0].ErrorCode != 0 {
				return false
			}
			for _, rt := range r.Groups[0].Topics {
				for _, rp := range rt.Partitions {
					if rt.Topic == "fresh" && rp.Partition == 0 && rp.ErrorCode == 0 {
						start = rp.StartOffset
					}
				}
			}
			return all || start != -2
		})
		return start
	}
	for _, all := range []bool{false, true} {
		if s := startOf(all); s != 8 {
			t.Fatalf("start offset of the fresh group (all topics %v): %d, want 8", all, s)
		}
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := groups["never-joined"]; !ok || g.ProtocolType != "share" {
		t.Fatalf("the fresh group is not listed as a share group: %+v", groups)
	}
	tb.a.Close()
	tb.restart()
	for _, all := range []bool{false, true} {
		if s := startOf(all); s != 8 {
			t.Fatalf("start offset after a restart (all topics %v): %d, want 8", all, s)
		}
	}
	// Deleted offsets leave the group's share state: every topic no longer lists it.
	if r, err := tb.admin(t).DeleteShareGroupOffsets(ctx, "never-joined", "fresh"); err != nil || r.Error() != nil {
		t.Fatalf("delete: %v %v", err, r)
	}
	if s := startOf(true); s != -2 {
		t.Fatalf("after the delete, describing every topic lists fresh at %d", s)
	}
	// A consumer group's id stays a consumer group's.
	if err := tb.admin(t).CommitAllOffsets(ctx, "classic-in-use", offs); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.admin(t).AlterShareGroupOffsets(ctx, "classic-in-use", offs); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("alter of a classic group with offsets: %v, want GROUP_ID_NOT_FOUND", err)
	}
}
