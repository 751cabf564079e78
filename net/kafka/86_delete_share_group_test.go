package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumeAll polls a share consumer of group on topic until it has accepted n
// distinct records, and closes it; it returns the delivery count of each record (by
// partition and offset).
func consumeAll(t *testing.T, tb *testBroker, group, topic string, n int) map[[2]int64]int32 {
	t.Helper()
	cl := shareClient(t, []string{tb.addr}, group, topic)
	got := map[[2]int64]int32{}
	eventually(t, 15*time.Second, "every record of "+topic+" at "+group, func() bool {
		for _, r := range pollShare(t, cl, 300*time.Millisecond) {
			r.Ack(kgo.AckAccept)
			got[[2]int64{int64(r.Partition), r.Offset}] = r.DeliveryCount()
		}
		return len(got) == n
	})
	if err := cl.FlushAcks(testCtx(t)); err != nil {
		t.Logf("committing the last acknowledgements: %v", err)
	}
	cl.Close()
	return got
}

func describeShareOffsets(t *testing.T, cl *kgo.Client, group string) kmsg.DescribeShareGroupOffsetsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Version = 1
	req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: group}}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("DescribeShareGroupOffsets: %+v %v", resp, err)
	}
	return resp.Groups[0]
}

// TestShareGroupDeleteAndRecreate: a share group's first heartbeat initializes its
// share partitions (DescribeShareGroupOffsets lists them at once, start -1 until the
// leader picks it); deleting the group deletes their state from __share_group_state
// (tombstones: the summary says no state); a group re-created under the same id starts
// afresh: every record is delivered again, as a first delivery.
func TestShareGroupDeleteAndRecreate(t *testing.T) {
	tb := startShareBroker(t)
	ctx := testCtx(t)
	adm := tb.admin(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "dr"); err != nil {
		t.Fatal(err)
	}
	const n = 20
	cl := tb.client(t)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: "dr", Partition: int32(i % 2), Value: []byte("v")})
	}
	pcl := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	total := int(tb.log("dr", 0).HighWatermark() + tb.log("dr", 1).HighWatermark())
	if total != n {
		t.Fatalf("%d records in dr, want %d", total, n)
	}

	first := consumeAll(t, tb, "dg", "dr", total)
	for off, c := range first {
		if c != 1 {
			t.Fatalf("first group: record %v delivered %d times", off, c)
		}
	}
	eventually(t, 10*time.Second, "both share partitions done", func() bool {
		g := describeShareOffsets(t, cl, "dg")
		if g.ErrorCode != 0 || len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 2 {
			return false
		}
		done := 0
		for _, p := range g.Topics[0].Partitions {
			if p.StartOffset == tb.log("dr", p.Partition).HighWatermark() && p.Lag == 0 {
				done++
			}
		}
		return done == 2
	})
	tid := shareKey(t, tb, "dg", "dr", 0).TopicID
	calls := shareStateCalls{t: t, cl: cl, group: "dg", tid: tid}
	stateEpoch := calls.summary(1, 0).StateEpoch
	if stateEpoch < 1 {
		t.Fatalf("the group coordinator initialized at state epoch %d, want the group epoch", stateEpoch)
	}

	// Delete the group (empty once its member left): its share state goes.
	var del *kmsg.DeleteGroupsResponse
	eventually(t, 10*time.Second, "the group deleted", func() bool {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = 2
		req.Groups = []string{"dg"}
		var err error
		del, err = req.RequestWith(ctx, cl)
		return err == nil && len(del.Groups) == 1 && del.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code
	})
	if del.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups: %v", kerr.ErrorForCode(del.Groups[0].ErrorCode))
	}
	for p := int32(0); p < 2; p++ {
		if s := calls.summary(1, p); s.ErrorCode != 0 || s.StartOffset != -1 || s.StateEpoch != 0 {
			t.Fatalf("partition %d's state after DeleteGroups: %+v", p, s)
		}
		codeIs(t, "read after DeleteGroups", calls.read(p).ErrorCode, kerr.InvalidRequest)
	}
	if g := describeShareOffsets(t, cl, "dg"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DescribeShareGroupOffsets of the deleted group: %+v", g)
	}

	// Re-created under the same id: a fresh state, every record a first delivery.
	second := consumeAll(t, tb, "dg", "dr", total)
	for off, c := range second {
		if c != 1 {
			t.Fatalf("re-created group: record %v delivered %d times (the old state came back)", off, c)
		}
	}
}
