package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/share"
)

// shareStateCalls sends the share coordinator's APIs (83-87) of one group and topic
// through cl, one partition per call, and returns the partition's answer.
type shareStateCalls struct {
	t     *testing.T
	cl    *kgo.Client
	group string
	tid   [16]byte
}

func (c shareStateCalls) initialize(p, stateEpoch int32, start int64) kmsg.InitializeShareGroupStateResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = c.group
	req.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: c.tid,
		Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: p, StateEpoch: stateEpoch, StartOffset: start}}}}
	resp, err := req.RequestWith(testCtx(c.t), c.cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("InitializeShareGroupState: %+v %v", resp, err)
	}
	return resp.Topics[0].Partitions[0]
}

func (c shareStateCalls) delete(p int32) kmsg.DeleteShareGroupStateResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = c.group
	req.Topics = []kmsg.DeleteShareGroupStateRequestTopic{{TopicID: c.tid,
		Partitions: []kmsg.DeleteShareGroupStateRequestTopicPartition{{Partition: p}}}}
	resp, err := req.RequestWith(testCtx(c.t), c.cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("DeleteShareGroupState: %+v %v", resp, err)
	}
	return resp.Topics[0].Partitions[0]
}

func (c shareStateCalls) summary(version int16, p int32) kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.Version, req.GroupID = version, c.group
	req.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: c.tid,
		Partitions: []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{{Partition: p, LeaderEpoch: -1}}}}
	resp, err := req.RequestWith(testCtx(c.t), c.cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("ReadShareGroupStateSummary: %+v %v", resp, err)
	}
	return resp.Topics[0].Partitions[0]
}

func (c shareStateCalls) read(p int32) kmsg.ReadShareGroupStateResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = c.group
	req.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: c.tid,
		Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{{Partition: p, LeaderEpoch: -1}}}}
	resp, err := req.RequestWith(testCtx(c.t), c.cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("ReadShareGroupState: %+v %v", resp, err)
	}
	return resp.Topics[0].Partitions[0]
}

func (c shareStateCalls) write(p, stateEpoch int32, start int64, batches ...kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch) int16 {
	c.t.Helper()
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = c.group
	req.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: c.tid,
		Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{{Partition: p, StateEpoch: stateEpoch, LeaderEpoch: 1, StartOffset: start, StateBatches: batches}}}}
	resp, err := req.RequestWith(testCtx(c.t), c.cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("WriteShareGroupState: %+v %v", resp, err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func codeIs(t *testing.T, what string, got int16, want error) {
	t.Helper()
	if err := kerr.ErrorForCode(got); !errors.Is(err, want) && !(got == 0 && want == nil) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

// TestShareStateAPIs: InitializeShareGroupState, DeleteShareGroupState and
// ReadShareGroupStateSummary over TCP, with ReadShareGroupState and
// WriteShareGroupState around them, and Kafka's errors: NOT_COORDINATOR before the
// state topic exists, INVALID_REQUEST for a negative partition and for reading or
// writing a share partition without state, UNKNOWN_TOPIC_OR_PARTITION, and
// FENCED_STATE_EPOCH for an initialization older than the stored one.
func TestShareStateAPIs(t *testing.T) {
	tb := startShareBroker(t)
	ctx := testCtx(t)
	if _, err := tb.admin(t).CreateTopic(ctx, 2, 1, nil, "ss"); err != nil {
		t.Fatal(err)
	}
	cl := tb.client(t)
	c := shareStateCalls{t: t, cl: cl, group: "g", tid: shareKey(t, tb, "g", "ss", 0).TopicID}

	if _, ok := tb.image().Topic(share.StateTopic); ok {
		t.Fatal("the state topic exists before any share state")
	}
	codeIs(t, "initialize before the state topic", c.initialize(0, 0, 0).ErrorCode, kerr.NotCoordinator)
	codeIs(t, "summary before the state topic", c.summary(1, 0).ErrorCode, kerr.NotCoordinator)
	if err := tb.b.topicMgr.EnsureInternal(ctx, share.StateTopic); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the share coordinator loaded", func() bool {
		code := c.initialize(0, 2, 5).ErrorCode
		return code == 0
	})

	codeIs(t, "a negative partition", c.initialize(-1, 0, 0).ErrorCode, kerr.InvalidRequest)
	codeIs(t, "a partition the topic has not", c.initialize(7, 0, 0).ErrorCode, kerr.UnknownTopicOrPartition)
	codeIs(t, "an older state epoch", c.initialize(0, 1, 9).ErrorCode, kerr.FencedStateEpoch)
	if r := c.initialize(0, 1, 9); r.ErrorMessage == nil || *r.ErrorMessage == "" {
		t.Fatalf("FENCED_STATE_EPOCH without a message: %+v", r)
	}
	unknown := shareStateCalls{t: t, cl: cl, group: "g", tid: [16]byte{1, 2, 3}}
	codeIs(t, "an unknown topic id", unknown.initialize(0, 0, 0).ErrorCode, kerr.UnknownTopicOrPartition)
	codeIs(t, "summary of an unknown topic id", unknown.summary(1, 0).ErrorCode, kerr.UnknownTopicOrPartition)
	codeIs(t, "delete of an unknown topic id", unknown.delete(0).ErrorCode, kerr.UnknownTopicOrPartition)
	// Reads and writes are checked as Kafka's ShareCoordinatorShard checks them.
	codeIs(t, "read of an unknown topic id", unknown.read(0).ErrorCode, kerr.UnknownTopicOrPartition)
	codeIs(t, "write of an unknown topic id", unknown.write(0, 0, 3), kerr.UnknownTopicOrPartition)
	codeIs(t, "read of a negative partition", c.read(-1).ErrorCode, kerr.InvalidRequest)
	codeIs(t, "write of a negative partition", c.write(-1, 0, 3), kerr.InvalidRequest)
	codeIs(t, "initialize without a start", c.initialize(1, 2, -1).ErrorCode, nil)

	if s := c.summary(1, 0); s.ErrorCode != 0 || s.StartOffset != 5 || s.StateEpoch != 2 || s.LeaderEpoch != 0 || s.DeliveryCompleteCount != 0 {
		t.Fatalf("summary of an initialized partition: %+v", s)
	}
	if s := c.summary(1, 1); s.ErrorCode != 0 || s.StartOffset != -1 || s.StateEpoch != 2 || s.DeliveryCompleteCount != -1 {
		t.Fatalf("summary of a partition initialized without a start: %+v", s)
	}
	other := shareStateCalls{t: t, cl: cl, group: "other", tid: c.tid}
	if s := other.summary(0, 0); s.ErrorCode != 0 || s.StartOffset != -1 || s.StateEpoch != 0 || s.LeaderEpoch != 0 {
		t.Fatalf("summary v0 of no state: %+v", s)
	}
	if r := c.read(0); r.ErrorCode != 0 || r.StartOffset != 5 || r.StateEpoch != 2 {
		t.Fatalf("read of an initialized partition: %+v", r)
	}
	codeIs(t, "read of no state", other.read(0).ErrorCode, kerr.InvalidRequest)
	codeIs(t, "write of no state", other.write(0, 0, 3), kerr.InvalidRequest)

	// A write, then the summary counts the completed deliveries above the start.
	codeIs(t, "write", c.write(0, 2, 5,
		kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{FirstOffset: 5, LastOffset: 6, DeliveryState: 2, DeliveryCount: 1},
		kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{FirstOffset: 7, LastOffset: 7, DeliveryState: 0, DeliveryCount: 1},
		kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{FirstOffset: 8, LastOffset: 8, DeliveryState: 4, DeliveryCount: 3}), nil)
	if s := c.summary(1, 0); s.StartOffset != 5 || s.LeaderEpoch != 1 || s.DeliveryCompleteCount != 3 {
		t.Fatalf("summary after a write: %+v", s)
	}

	// Delete: the state is gone (reads and writes refused again); deleting no state is fine.
	codeIs(t, "delete", c.delete(0).ErrorCode, nil)
	if s := c.summary(1, 0); s.ErrorCode != 0 || s.StartOffset != -1 || s.StateEpoch != 0 || s.DeliveryCompleteCount != -1 {
		t.Fatalf("summary after delete: %+v", s)
	}
	codeIs(t, "read after delete", c.read(0).ErrorCode, kerr.InvalidRequest)
	codeIs(t, "write after delete", c.write(0, 2, 9), kerr.InvalidRequest)
	codeIs(t, "delete of no state", c.delete(0).ErrorCode, nil)
	codeIs(t, "delete of a negative partition", c.delete(-1).ErrorCode, kerr.InvalidRequest)
	// The tombstone is in __share_group_state.
	k := share.Key{Group: "g", TopicID: c.tid, Partition: 0}
	tomb := false
	err := group.NewReplicatedTopicLog(tb.b.repl, share.StateTopic, 0).Replay(share.PartitionFor(k, 2), func(r group.Record) error {
		if dk, err := share.DecodeKey(r.Key); err == nil && dk == k {
			tomb = r.Value == nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !tomb {
		t.Fatal("the last record of the deleted state in __share_group_state is not a tombstone")
	}

	// An empty group id, no topics, or a topic without partitions: no topics answered.
	for _, req := range []kmsg.Request{
		&kmsg.InitializeShareGroupStateRequest{GroupID: "", Topics: []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: c.tid, Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{}}}}},
		&kmsg.InitializeShareGroupStateRequest{GroupID: "g"},
		&kmsg.DeleteShareGroupStateRequest{GroupID: "g", Topics: []kmsg.DeleteShareGroupStateRequestTopic{{TopicID: c.tid}}},
		&kmsg.ReadShareGroupStateSummaryRequest{GroupID: "g", Topics: []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: c.tid}}},
	} {
		resp, err := cl.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		switch r := resp.(type) {
		case *kmsg.InitializeShareGroupStateResponse:
			n = len(r.Topics)
		case *kmsg.DeleteShareGroupStateResponse:
			n = len(r.Topics)
		case *kmsg.ReadShareGroupStateSummaryResponse:
			n = len(r.Topics)
		}
		if n != 0 {
			t.Fatalf("%T answered %d topics, want none", req, n)
		}
	}
}
