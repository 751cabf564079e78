package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

// TestShareRenewByGroupConfig: renew acknowledgements (KIP-1222: ShareAcknowledge v2
// with IsRenewAck and type 4) are accepted while the group's
// share.renew.acknowledge.enable is true (its default, with no config set) and refused
// with INVALID_RECORD_STATE, the lock left as it was, once the group sets it false;
// set back to true, they are accepted again.
func TestShareRenewByGroupConfig(t *testing.T) {
	static := shareStatic()
	static["group.share.record.lock.duration.ms"] = "60000"
	tb := startTestBroker(t, testBrokerOptions{Static: static, Sync: engine.SyncNone})
	ctx := testCtx(t)
	if _, err := tb.admin(t).CreateTopic(ctx, 1, 1, nil, "rn"); err != nil {
		t.Fatal(err)
	}
	produceN(t, tb.client(t), "rn", 0, 3)
	tid := shareKey(t, tb, "rg", "rn", 0).TopicID
	group, member := "rg", "m1"
	rc := tb.raw(t)
	epoch := int32(0)
	var got []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	eventually(t, 10*time.Second, "records acquired", func() bool {
		req := kmsg.NewPtrShareFetchRequest()
		req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 2, &group, &member, epoch
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = 100, 1, 1<<20, 100
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: tid, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
		r := rc.roundTrip(req).(*kmsg.ShareFetchResponse)
		epoch++
		if r.ErrorCode == 0 && len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			got = r.Topics[0].Partitions[0].AcquiredRecords
		}
		return len(got) > 0
	})
	if got[0].FirstOffset != 0 || got[0].LastOffset != 2 {
		t.Fatalf("acquired %+v", got)
	}
	ack := func(first, last int64, typ int8, renew bool) int16 {
		t.Helper()
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch, req.IsRenewAck = 2, &group, &member, epoch, renew
		req.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: tid, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
			AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{typ}}}}}}}
		r := rc.roundTrip(req).(*kmsg.ShareAcknowledgeResponse)
		epoch++
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("ShareAcknowledge: %+v", r)
		}
		return r.Topics[0].Partitions[0].ErrorCode
	}
	setRenew := func(v string) {
		t.Helper()
		mustAlterGroupConfigs(t, tb.client(t), group, "share.renew.acknowledge.enable", kmsg.IncrementalAlterConfigOpSet, v)
		eventually(t, 5*time.Second, "the group config published", func() bool {
			return tb.image().Configs(metadata.ResourceGroup, group)["share.renew.acknowledge.enable"] == v
		})
	}

	codeIs(t, "renew by default", ack(0, 0, 4, true), nil)
	setRenew("false")
	codeIs(t, "renew with share.renew.acknowledge.enable=false", ack(1, 1, 4, true), kerr.InvalidRecordState)
	// Offset 1 is still m1's (the refused renew changed nothing): accepting it works.
	codeIs(t, "accept after the refused renew", ack(1, 1, 1, false), nil)
	setRenew("true")
	codeIs(t, "renew with share.renew.acknowledge.enable=true", ack(2, 2, 4, true), nil)
}
