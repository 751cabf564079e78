package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// TestTxnOffsetCommitV6Kgo: a consume-transform-produce GroupTransactSession under
// transaction version 2 commits its offsets with TxnOffsetCommit v6 (topics by id) and
// stays exactly once.
func TestTxnOffsetCommitV6Kgo(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: txnV2Static()})
	adm := tb.admin(t)
	mustCreate(t, adm, "v6-in", 2, nil)
	mustCreate(t, adm, "v6-out", 2, nil)
	const n = 20
	produceInputs(t, tb.client(t, kgo.DefaultProduceTopic("v6-in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), n)
	var sent versionsSent
	transformLoop(t, []string{tb.addr}, "v6-ctp-txn", "v6-ctp", "v6-in", "v6-out", n, &keysSent{}, kgo.Dialer(sent.dial))
	checkExactlyOnce(t, tb.client(t, kgo.ConsumeTopics("v6-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond)), adm, "v6-ctp", "v6-out", n)
	sent.check(t, map[int16]int16{28: 6, 9: 10})
}

// TestTxnOffsetCommitByTopicID: TxnOffsetCommit v6 by hand. An id the broker does not
// know (the zero id, the id of a topic deleted and re-created under the same name)
// answers UNKNOWN_TOPIC_ID for each of its partitions, a known one commits in the
// transaction, an unknown partition of it is UNKNOWN_TOPIC_OR_PARTITION; the answer
// names topics by id. A commit with a generation to a group that does not exist is
// GROUP_ID_NOT_FOUND at v6, ILLEGAL_GENERATION at v5 (KIP-1319). Once the transaction
// commits, only the known id's offset is the group's.
func TestTxnOffsetCommitByTopicID(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: txnV2Static(), Sync: engine.SyncNone})
	adm := tb.admin(t)
	ctx := testCtx(t)
	mustCreate(t, adm, "tin", 2, nil)
	oldID := topicID(t, tb, "tin")
	if _, err := adm.DeleteTopics(ctx, "tin"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the topic's deletion in the image", func() bool {
		_, ok := tb.meta.Image().Topic("tin")
		return !ok
	})
	mustCreate(t, adm, "tin", 2, nil)
	eventually(t, 10*time.Second, "the re-created topic in the image", func() bool {
		_, ok := tb.meta.Image().Topic("tin")
		return ok
	})
	id := topicID(t, tb, "tin")
	if id == oldID {
		t.Fatal("the re-created topic has the old id")
	}
	unknown := [16]byte{0xfe, 0xed}

	rc := tb.raw(t)
	rc.c.SetDeadline(time.Now().Add(60 * time.Second))
	eventually(t, 30*time.Second, "the coordinator of raw-tx", func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType, req.CoordinatorKeys = 4, 1, []string{"raw-tx"}
		r := rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		return len(r.Coordinators) == 1 && r.Coordinators[0].ErrorCode == 0
	})
	var init *kmsg.InitProducerIDResponse
	eventually(t, 30*time.Second, "InitProducerId of raw-tx", func() bool {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = 5, kmsg.StringPtr("raw-tx"), 60000, -1, -1
		init = rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
		return init.ErrorCode == 0
	})
	topic := func(id [16]byte, offset int64, partitions ...int32) kmsg.TxnOffsetCommitRequestTopic {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.TopicID = id
		for _, p := range partitions {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, offset
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	commit := func(version int16, group string, generation int32, topics ...kmsg.TxnOffsetCommitRequestTopic) [][]int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = version, "raw-tx", group, init.ProducerID, init.ProducerEpoch
		req.Generation, req.Topics = generation, topics
		if generation >= 0 {
			req.MemberID = "m"
		}
		var codes [][]int16
		eventually(t, 30*time.Second, "the group coordinator", func() bool {
			resp := rc.roundTrip(req).(*kmsg.TxnOffsetCommitResponse)
			if len(resp.Topics) != len(topics) {
				t.Fatalf("answer of %d topics to %d: %+v", len(resp.Topics), len(topics), resp)
			}
			codes = make([][]int16, len(resp.Topics))
			for i, rt := range resp.Topics {
				if version >= 6 && rt.TopicID != topics[i].TopicID {
					t.Fatalf("answer topic %d: id %x, asked %x", i, rt.TopicID, topics[i].TopicID)
				}
				for _, p := range rt.Partitions {
					if p.ErrorCode == kerr.CoordinatorLoadInProgress.Code || p.ErrorCode == kerr.CoordinatorNotAvailable.Code {
						return false
					}
					codes[i] = append(codes[i], p.ErrorCode)
				}
			}
			return true
		})
		return codes
	}

	got := commit(6, "raw-g", -1, topic(unknown, 1, 0), topic([16]byte{}, 1, 0), topic(oldID, 99, 1), topic(id, 3, 0, 5))
	want := [][]int16{{kerr.UnknownTopicID.Code}, {kerr.UnknownTopicID.Code}, {kerr.UnknownTopicID.Code}, {0, kerr.UnknownTopicOrPartition.Code}}
	if !equalCodes(got, want) {
		t.Fatalf("TxnOffsetCommit v6: %v, want %v", got, want)
	}
	if got := commit(6, "none", 3, topic(id, 1, 0)); !equalCodes(got, [][]int16{{kerr.GroupIDNotFound.Code}}) {
		t.Fatalf("TxnOffsetCommit v6 with a generation to a group that does not exist: %v", got)
	}
	v5 := kmsg.NewTxnOffsetCommitRequestTopic()
	v5.Topic = "tin"
	v5.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}
	if got := commit(5, "none", 3, v5); !equalCodes(got, [][]int16{{kerr.IllegalGeneration.Code}}) {
		t.Fatalf("TxnOffsetCommit v5 with a generation to a group that does not exist: %v", got)
	}

	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 5, "raw-tx", init.ProducerID, init.ProducerEpoch, true
	if r := rc.roundTrip(end).(*kmsg.EndTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	eventually(t, 10*time.Second, "the transaction's offsets applied by its marker", func() bool {
		offs, err := adm.FetchOffsets(ctx, "raw-g")
		if err != nil || offs.Error() != nil {
			return false
		}
		o, ok := offs.Lookup("tin", 0)
		return ok && o.At == 3
	})
	offs, err := adm.FetchOffsets(ctx, "raw-g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("tin", 1); ok && o.At != -1 {
		t.Fatalf("the commit by the deleted topic's id reached the re-created topic: %+v", o)
	}
	if groups, err := adm.ListGroups(ctx); err != nil || len(groups) != 1 || groups.Groups()[0] != "raw-g" {
		t.Fatalf("groups after the refused commits: %v %v", groups.Groups(), err)
	}
}
