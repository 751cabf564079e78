package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// followerFetch is a follower's Fetch v15 (ReplicaState) of one partition.
func followerFetch(t *testing.T, tb *testBroker, rc *rawConn, topic string, replica int32, brokerEpoch, offset int64, lastEpoch int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchReq(15, 0, 1, 0, -1, []fetchPartReq{{topic: topic, id: topicID(t, tb, topic), offset: offset, curEpoch: 0, lastEpoch: lastEpoch}}, nil)
	req.ReplicaState.ID, req.ReplicaState.Epoch = replica, brokerEpoch
	resp := rc.roundTrip(req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("follower fetch: %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// TestFollowerFetchMovesTheHW gives the single node's replica of a partition a second
// replica in its ISR (as the controller would) and plays that follower with raw
// Fetch v15 requests: an acks=all produce waits until the follower's fetch offset
// passes it; the follower reads past the HW, consumers stop at it.
func TestFollowerFetchMovesTheHW(t *testing.T) {
	tb := startDataBroker(t, testBrokerOptions{Sync: engine.SyncFsync})
	mustCreate(t, tb.admin(t), "repl", 1, nil)
	_, im := tb.b.Image()
	ti, _ := im.Topic("repl")
	st := replication.PartitionState{Topic: "repl", TopicID: ti.ID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2},
		Leader: 1, LeaderEpoch: ti.Partitions[0].LeaderEpoch, PartitionEpoch: ti.Partitions[0].PartitionEpoch + 1, MinISR: 2,
		LogConfig: tb.b.keys.topicLogConfig(im, "repl")}
	if err := tb.b.repl.Apply(replication.Delta{Leaders: []replication.PartitionState{st}}); err != nil {
		t.Fatal(err)
	}
	rc, fc := tb.raw(t), tb.raw(t)
	batch := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 3})
	req := produceReq("repl", -1, batch)
	req.SetVersion(9)
	corr := rc.send(req)
	l := tb.log("repl", 0)
	for deadline := time.Now().Add(5 * time.Second); l.LogEndOffset() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the produce was not appended")
		}
	}

	// The follower fetches at 0: it gets the records (past the HW), the HW stays 0.
	p := followerFetch(t, tb, fc, "repl", 2, 7, 0, -1)
	if p.ErrorCode != 0 || p.HighWatermark != 0 || len(batchesIn(t, p.RecordBatches)) != 3 {
		t.Fatalf("first follower fetch: code %d HW %d, %d records", p.ErrorCode, p.HighWatermark, len(batchesIn(t, p.RecordBatches)))
	}
	cons := rc2Fetch(t, tb, "repl", 0)
	if cons.HighWatermark != 0 || len(cons.RecordBatches) != 0 {
		t.Fatalf("a consumer sees past the HW: %+v", cons)
	}
	// Its next fetch, at 3, says it holds them: the HW moves (once the leader's own
	// fsync is done too) and the produce is answered.
	if p := followerFetch(t, tb, fc, "repl", 2, 7, 3, 0); p.ErrorCode != 0 {
		t.Fatalf("second follower fetch: %+v", p)
	}
	resp := rc.recv(req, corr).(*kmsg.ProduceResponse)
	if sp := resp.Topics[0].Partitions[0]; sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("acks=all answer: %+v", sp)
	}
	if p := followerFetch(t, tb, fc, "repl", 2, 7, 3, 0); p.HighWatermark != 3 {
		t.Fatalf("the follower learns HW %d", p.HighWatermark)
	}
	if cons := rc2Fetch(t, tb, "repl", 0); len(batchesIn(t, cons.RecordBatches)) != 3 {
		t.Fatalf("consumer after the HW moved: %d records", len(batchesIn(t, cons.RecordBatches)))
	}

	// Errors: a broker that is no replica, an older incarnation, an offset past the end
	// (with the log start and HW, for a follower deciding to start over), a diverging epoch.
	wantCode(t, "not a replica", followerFetch(t, tb, fc, "repl", 3, 1, 0, -1).ErrorCode, kerr.NotLeaderForPartition)
	wantCode(t, "stale broker epoch", followerFetch(t, tb, fc, "repl", 2, 6, 3, 0).ErrorCode, kerr.NotLeaderForPartition)
	p = followerFetch(t, tb, fc, "repl", 2, 7, 9, -1)
	wantCode(t, "past the end", p.ErrorCode, kerr.OffsetOutOfRange)
	if p.LogStartOffset != 0 || p.HighWatermark != 3 {
		t.Fatalf("out of range answer: log start %d HW %d", p.LogStartOffset, p.HighWatermark)
	}
	p = followerFetch(t, tb, fc, "repl", 2, 7, 5, 0)
	if p.ErrorCode != 0 || p.DivergingEpoch.Epoch != 0 || p.DivergingEpoch.EndOffset != 3 || len(p.RecordBatches) != 0 {
		t.Fatalf("diverging: %+v", p)
	}

	// The follower stops; acks=all with min.insync.replicas=2 times out (REQUEST_TIMED_OUT).
	req = produceReq("repl", -1, appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 1}))
	req.TimeoutMillis = 100
	req.SetVersion(9)
	start := time.Now()
	resp = rc.roundTrip(req).(*kmsg.ProduceResponse)
	wantCode(t, "acks=all without the follower", resp.Topics[0].Partitions[0].ErrorCode, kerr.RequestTimedOut)
	if time.Since(start) < 90*time.Millisecond { // the wheel may fire a tick early
		t.Fatalf("timed out after %v", time.Since(start))
	}
}

// rc2Fetch is a consumer's Fetch v12 of one partition from offset.
func rc2Fetch(t *testing.T, tb *testBroker, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	resp := tb.raw(t).roundTrip(fetchReq(12, 0, 1, 0, -1, []fetchPartReq{{topic: topic, offset: offset, curEpoch: -1, lastEpoch: -1}}, nil)).(*kmsg.FetchResponse)
	return resp.Topics[0].Partitions[0]
}

// TestProduceNotLeaderNamesTheLeader: a partition this node does not lead answers
// NOT_LEADER_OR_FOLLOWER with the current leader and, from v10, its endpoint (KIP-951).
func TestProduceNotLeaderNamesTheLeader(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "moved", 1, nil)
	off, im := tb.b.Image()
	ti, _ := im.Topic("moved")
	// The controller moves the partition's leadership to broker 2: the image changes.
	next, err := im.Apply(
		&metadata.RegisterBrokerRecord{ID: 2, Epoch: im.MaxBrokerEpoch() + 1,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.2", Port: 19092, SecurityProtocol: metadata.ProtocolPlaintext}}},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, Leader: 2, LeaderRecoveryState: -1},
	)
	if err != nil {
		t.Fatal(err)
	}
	tb.a.MetadataChanged(off+1, im, next)
	moved, _ := next.Topic("moved")
	pi := moved.Partitions[0]
	rc := tb.raw(t)
	for _, v := range []int16{9, 10, 11} {
		req := produceReq("moved", 1, appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 1}))
		req.SetVersion(v)
		resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
		sp := resp.Topics[0].Partitions[0]
		wantCode(t, "produce to a follower", sp.ErrorCode, kerr.NotLeaderForPartition)
		if v < 10 {
			continue
		}
		if sp.CurrentLeader.LeaderID != 2 || sp.CurrentLeader.LeaderEpoch != pi.LeaderEpoch {
			t.Fatalf("v%d current leader %+v, want 2 epoch %d", v, sp.CurrentLeader, pi.LeaderEpoch)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Host != "127.0.0.2" || resp.Brokers[0].Port != 19092 {
			t.Fatalf("v%d node endpoints %+v", v, resp.Brokers)
		}
	}
}

// TestFetchNotLeaderNamesTheLeader: a consumer's Fetch of a partition this node does
// not lead answers NOT_LEADER_OR_FOLLOWER with the current leader (v12+) and, from
// v16, its endpoint in NodeEndpoints (KIP-951), once per leader.
func TestFetchNotLeaderNamesTheLeader(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "moved", 2, nil)
	off, im := tb.b.Image()
	ti, _ := im.Topic("moved")
	next, err := im.Apply(
		&metadata.RegisterBrokerRecord{ID: 2, Epoch: im.MaxBrokerEpoch() + 1,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.2", Port: 19092, SecurityProtocol: metadata.ProtocolPlaintext}}},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, Leader: 2, LeaderRecoveryState: -1},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 1, Leader: 2, LeaderRecoveryState: -1},
	)
	if err != nil {
		t.Fatal(err)
	}
	tb.a.MetadataChanged(off+1, im, next)
	moved, _ := next.Topic("moved")
	rc := tb.raw(t)
	for _, v := range []int16{12, 15, 16, 17} {
		parts := []fetchPartReq{{topic: "moved", id: moved.ID, partition: 0, curEpoch: -1, lastEpoch: -1}, {topic: "moved", id: moved.ID, partition: 1, curEpoch: -1, lastEpoch: -1}}
		resp := rc.roundTrip(fetchReq(v, 0, 1, 0, -1, parts, nil)).(*kmsg.FetchResponse)
		for _, rp := range resp.Topics[0].Partitions {
			wantCode(t, "fetch from a follower", rp.ErrorCode, kerr.NotLeaderForPartition)
			if pi := moved.Partitions[rp.Partition]; rp.CurrentLeader.LeaderID != 2 || rp.CurrentLeader.LeaderEpoch != pi.LeaderEpoch {
				t.Fatalf("v%d partition %d: current leader %+v, want 2 epoch %d", v, rp.Partition, rp.CurrentLeader, pi.LeaderEpoch)
			}
		}
		if v < 16 {
			if len(resp.Brokers) != 0 {
				t.Fatalf("v%d: node endpoints %+v", v, resp.Brokers)
			}
			continue
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Host != "127.0.0.2" || resp.Brokers[0].Port != 19092 || resp.Brokers[0].Rack != nil {
			t.Fatalf("v%d node endpoints %+v", v, resp.Brokers)
		}
	}
}
