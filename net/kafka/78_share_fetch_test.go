package kafka

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/engine"
)

// shareStatic are the broker keys of the share-group tests (share groups are on by
// default): new share partitions from the log start, the shortest lock Kafka allows,
// few coordinator partitions.
func shareStatic() map[string]string {
	return map[string]string{
		"share.auto.offset.reset":                      "earliest",
		"group.share.record.lock.duration.ms":          "1000",
		"group.share.heartbeat.interval.ms":            "200",
		"offsets.topic.num.partitions":                 "2",
		"share.coordinator.state.topic.num.partitions": "2",
		"group.initial.rebalance.delay.ms":             "0",
	}
}

func startShareBroker(t *testing.T) *testBroker {
	return startTestBroker(t, testBrokerOptions{Static: shareStatic(), Sync: engine.SyncNone})
}

// shareClient is a kgo share-group consumer of topic on the brokers at addrs.
func shareClient(t *testing.T, addrs []string, groupID, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceN(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// pollShare polls cl once (for at most d) and returns its records.
func pollShare(t *testing.T, cl *kgo.Client, d time.Duration) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	fs := cl.PollFetches(ctx)
	var out []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	return out
}

func shareKey(t *testing.T, tb *testBroker, groupID, topic string, p int32) share.Key {
	t.Helper()
	tp, ok := tb.image().Topic(topic)
	if !ok {
		t.Fatalf("no topic %s", topic)
	}
	return share.Key{Group: groupID, TopicID: [16]byte(tp.ID), Partition: p}
}

// Three share consumers of one partition: every record is delivered once, to one of
// them (accepted); the share partition's start moves past all of them; the group is
// listed and described as a share group.
func TestShareConsumersGetDistinctRecords(t *testing.T) {
	tb := startShareBroker(t)
	ctx := testCtx(t)
	adm := tb.admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "sq"); err != nil {
		t.Fatal(err)
	}
	const n = 300
	produceN(t, tb.client(t), "sq", 0, n)
	var mu sync.Mutex
	seen := map[int64]int{}
	by := map[int]int{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := 0; c < 3; c++ {
		cl := shareClient(t, []string{tb.addr}, "sg", "sq", kgo.ShareMaxRecords(10))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, r := range pollShare(t, cl, 300*time.Millisecond) {
					r.Ack(kgo.AckAccept)
					mu.Lock()
					seen[r.Offset]++
					by[c]++
					mu.Unlock()
				}
			}
		}()
	}
	eventually(t, 15*time.Second, "every record delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	k := shareKey(t, tb, "sg", "sq", 0)
	eventually(t, 10*time.Second, "the share partition's start past every record", func() bool {
		start, _, ok := tb.b.shares.mgr.Describe(k)
		return ok && start == n
	})
	close(stop)
	wg.Wait()
	for off, c := range seen {
		if c != 1 {
			t.Errorf("offset %d delivered %d times", off, c)
		}
	}
	t.Logf("records per consumer: %v", by)

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := listed["sg"]; !ok || g.ProtocolType != "share" {
		t.Fatalf("listed groups: %+v", listed)
	}
	req := kmsg.NewPtrListGroupsRequest()
	req.TypesFilter = []string{"share"}
	lr, err := req.RequestWith(ctx, tb.client(t))
	if err != nil || len(lr.Groups) != 1 || lr.Groups[0].GroupType != "share" {
		t.Fatalf("ListGroups of type share: %+v %v", lr, err)
	}
	// DescribeShareGroupOffsets: the start offset, nothing left to deliver.
	oreq := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	oreq.Version = 1
	oreq.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "sg"}}
	or, err := oreq.RequestWith(ctx, tb.client(t))
	if err != nil || len(or.Groups) != 1 || len(or.Groups[0].Topics) != 1 || len(or.Groups[0].Topics[0].Partitions) != 1 {
		t.Fatalf("DescribeShareGroupOffsets: %+v %v", or, err)
	}
	if p := or.Groups[0].Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StartOffset != n || p.Lag != 0 {
		t.Fatalf("DescribeShareGroupOffsets partition: %+v", p)
	}
	dreq := kmsg.NewPtrShareGroupDescribeRequest()
	dreq.GroupIDs = []string{"sg"}
	dr, err := dreq.RequestWith(ctx, tb.client(t))
	if err != nil || len(dr.Groups) != 1 || dr.Groups[0].ErrorCode != 0 || dr.Groups[0].Assignor != "simple" {
		t.Fatalf("ShareGroupDescribe: %+v %v", dr, err)
	}
}

// A record held past its lock is delivered again with a higher delivery count; a
// released one too; a rejected one never again.
func TestShareRedeliveryReleaseReject(t *testing.T) {
	tb := startShareBroker(t)
	ctx := testCtx(t)
	if _, err := tb.admin(t).CreateTopic(ctx, 1, 1, nil, "sr"); err != nil {
		t.Fatal(err)
	}
	produceN(t, tb.client(t), "sr", 0, 3)
	k := shareKey(t, tb, "srg", "sr", 0)

	// a holds everything and never acknowledges: its locks expire.
	a := shareClient(t, []string{tb.addr}, "srg", "sr")
	var held []*kgo.Record
	eventually(t, 15*time.Second, "a's first delivery", func() bool {
		held = append(held, pollShare(t, a, 300*time.Millisecond)...)
		return len(held) == 3
	})
	for _, r := range held {
		if r.DeliveryCount() != 1 {
			t.Fatalf("first delivery of %d has count %d", r.Offset, r.DeliveryCount())
		}
	}
	b := shareClient(t, []string{tb.addr}, "srg", "sr")
	var again []*kgo.Record
	eventually(t, 15*time.Second, "redelivery after the locks expired", func() bool {
		again = append(again, pollShare(t, b, 300*time.Millisecond)...)
		return len(again) >= 3
	})
	for _, r := range again {
		if r.DeliveryCount() < 2 {
			t.Fatalf("redelivery of %d has count %d", r.Offset, r.DeliveryCount())
		}
	}
	// b rejects offset 0, releases offset 1, accepts offset 2.
	for _, r := range again {
		switch r.Offset {
		case 0:
			r.Ack(kgo.AckReject)
		case 1:
			r.Ack(kgo.AckRelease)
		default:
			r.Ack(kgo.AckAccept)
		}
	}
	if err := b.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	var third []*kgo.Record
	eventually(t, 15*time.Second, "the released record again", func() bool {
		third = append(third, pollShare(t, b, 300*time.Millisecond)...)
		return len(third) > 0
	})
	if len(third) != 1 || third[0].Offset != 1 || third[0].DeliveryCount() < 3 {
		t.Fatalf("after release, got %d records: first offset %d count %d", len(third), third[0].Offset, third[0].DeliveryCount())
	}
	third[0].Ack(kgo.AckAccept)
	if err := b.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the start past the rejected and accepted records", func() bool {
		start, inflight, ok := tb.b.shares.mgr.Describe(k)
		return ok && start == 3 && inflight == 0
	})
}

// A restart keeps the acknowledged state: nothing acknowledged is delivered again,
// nothing left unacknowledged is lost (what was held is available again).
func TestShareStateSurvivesRestart(t *testing.T) {
	tb := startShareBroker(t)
	ctx := testCtx(t)
	if _, err := tb.admin(t).CreateTopic(ctx, 1, 1, nil, "ss"); err != nil {
		t.Fatal(err)
	}
	produceN(t, tb.client(t), "ss", 0, 20)
	a := shareClient(t, []string{tb.addr}, "ssg", "ss", kgo.ShareMaxRecords(5), kgo.ShareMaxRecordsStrict())
	acked := map[int64]bool{}
	eventually(t, 15*time.Second, "ten records acknowledged", func() bool {
		for _, r := range pollShare(t, a, 300*time.Millisecond) {
			if len(acked) < 10 {
				r.Ack(kgo.AckAccept)
				acked[r.Offset] = true
			} else {
				r.Ack(kgo.AckRelease)
			}
		}
		return len(acked) >= 10
	})
	if err := a.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	// One more poll that is held, not acknowledged, when the broker goes.
	held := pollShare(t, a, 2*time.Second)
	a.Close()
	t.Logf("acknowledged %d, held %d at the restart", len(acked), len(held))
	tb.restart()

	b := shareClient(t, []string{tb.addr}, "ssg", "ss")
	got := map[int64]bool{}
	eventually(t, 20*time.Second, "the ten unacknowledged records after the restart", func() bool {
		for _, r := range pollShare(t, b, 300*time.Millisecond) {
			if acked[r.Offset] {
				t.Errorf("offset %d acknowledged before the restart was delivered again", r.Offset)
			}
			got[r.Offset] = true
		}
		return len(got) >= 20-len(acked)
	})
	for o := int64(0); o < 20; o++ {
		if !acked[o] && !got[o] {
			t.Errorf("offset %d was lost", o)
		}
	}
}

// Share groups are on by default (as Kafka 4.2 serves them on new clusters): the share
// APIs are advertised with share.version finalized and ShareGroupHeartbeat is served;
// with group.share.enable=false they are refused and not advertised.
func TestShareGroupsOnByDefault(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("enabled=%v", on), func(t *testing.T) {
			var opts testBrokerOptions
			if !on {
				opts.Static = map[string]string{"group.share.enable": "false"}
			}
			tb := startTestBroker(t, opts)
			ctx := testCtx(t)
			cl := tb.client(t)
			av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			advertised := 0
			for _, k := range av.ApiKeys {
				if k.ApiKey >= 76 && k.ApiKey <= 79 {
					advertised++
				}
			}
			shareVersion := int16(0)
			for _, f := range av.FinalizedFeatures {
				if f.Name == "share.version" {
					shareVersion = f.MaxVersionLevel
				}
			}
			if want := map[bool]int{true: 4, false: 0}[on]; advertised != want || (shareVersion == 1) != on {
				t.Fatalf("%d of the share APIs 76-79 advertised, share.version %d", advertised, shareVersion)
			}
			rc := tb.raw(t)
			hb := kmsg.NewPtrShareGroupHeartbeatRequest()
			hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = 1, "g", "m0000000000000000000000", 0, []string{"t"}
			want := int16(35) // UNSUPPORTED_VERSION
			if on {
				want = 0
			}
			// The first heartbeats may meet __consumer_offsets being created.
			var got int16
			eventually(t, 10*time.Second, "ShareGroupHeartbeat answered", func() bool {
				got = rc.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse).ErrorCode
				return got != kerr.CoordinatorLoadInProgress.Code && got != kerr.NotCoordinator.Code
			})
			if got != want {
				t.Fatalf("ShareGroupHeartbeat: code %d, want %d", got, want)
			}
		})
	}
}
