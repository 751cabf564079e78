package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// ShareFetch and ShareAcknowledge by hand: session epochs, acknowledgement errors, and
// a session's records released when the connection that opened it closes (the lock,
// 60 s here, has not expired).
func TestShareSessionsByHand(t *testing.T) {
	static := shareStatic()
	static["group.share.record.lock.duration.ms"] = "60000"
	tb := startTestBroker(t, testBrokerOptions{Static: static, Sync: engine.SyncNone})
	ctx := testCtx(t)
	if _, err := tb.admin(t).CreateTopic(ctx, 1, 1, nil, "sh"); err != nil {
		t.Fatal(err)
	}
	produceN(t, tb.client(t), "sh", 0, 4)
	tid := shareKey(t, tb, "shg", "sh", 0).TopicID
	group := "shg"
	fetch := func(rc *rawConn, member string, epoch int32, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
		req := kmsg.NewPtrShareFetchRequest()
		req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 1, &group, &member, epoch
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = 100, 1, 1<<20, 100
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: tid, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
		return rc.roundTrip(req).(*kmsg.ShareFetchResponse)
	}
	acquired := func(r *kmsg.ShareFetchResponse) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
		if r.ErrorCode != 0 || len(r.Topics) == 0 || len(r.Topics[0].Partitions) == 0 {
			return nil
		}
		return r.Topics[0].Partitions[0].AcquiredRecords
	}

	a := tb.raw(t)
	if r := fetch(a, "m1", 3, nil); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("epoch 3 without a session: code %d", r.ErrorCode)
	}
	var got []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	epoch := int32(0)
	eventually(t, 10*time.Second, "m1's records", func() bool {
		got = acquired(fetch(a, "m1", epoch, nil))
		epoch++
		return len(got) > 0
	})
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 3 || got[0].DeliveryCount != 1 {
		t.Fatalf("m1 acquired %+v", got)
	}
	if r := fetch(a, "m1", epoch+5, nil); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: code %d", r.ErrorCode)
	}

	// m2 (another session) may not acknowledge m1's records.
	b := tb.raw(t)
	if r := fetch(b, "m2", 0, nil); r.ErrorCode != 0 {
		t.Fatalf("m2's session: code %d", r.ErrorCode)
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	m2 := "m2"
	ack.Version, ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = 1, &group, &m2, 1
	ack.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: tid, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
		AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}}}}}
	ar := b.roundTrip(ack).(*kmsg.ShareAcknowledgeResponse)
	if ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("m2 acknowledging m1's record: %+v", ar)
	}
	// m1 accepts offset 0 (piggybacked), keeps 1-3; then its connection closes.
	r := fetch(a, "m1", epoch, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}})
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 {
		t.Fatalf("m1's piggybacked accept: %+v", r)
	}
	a.c.Close()
	// m2 gets 1-3 again, on their second delivery, long before their locks expire.
	bEpoch := int32(2)
	eventually(t, 10*time.Second, "m1's released records at m2", func() bool {
		got = acquired(fetch(b, "m2", bEpoch, nil))
		bEpoch++
		return len(got) > 0
	})
	if len(got) != 1 || got[0].FirstOffset != 1 || got[0].LastOffset != 3 || got[0].DeliveryCount != 2 {
		t.Fatalf("m2 acquired %+v after m1's connection closed", got)
	}
}
