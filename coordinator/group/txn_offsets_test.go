package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// TestReplayHoldsTransactionalOffsets: a replay applies a transaction's offset
// records at its COMMIT marker, never an aborted one's, and leaves an open one's for
// its marker.
func TestReplayHoldsTransactionalOffsets(t *testing.T) {
	m, err := engine.Open(engine.Options{Dirs: []string{t.TempDir()}, Sync: engine.SyncNone, Logger: quietLogger(),
		DisableTxnVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.CreateLog(engine.TopicPartition{Topic: OffsetsTopic, Partition: 0}, OffsetsLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	rec := func(partition int32, offset int64) engine.Record {
		return engine.Record{Timestamp: 1, Key: AppendOffsetKey(nil, "g", "t", partition),
			Value: AppendOffsetValue(nil, OffsetValue{Version: 3, Offset: offset, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1})}
	}
	appendBatch := func(b []byte) {
		t.Helper()
		if _, err := l.Append(b, engine.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	plain := func(partition int32, offset int64) {
		t.Helper()
		b, err := engine.AppendRecords(nil, []engine.Record{rec(partition, offset)})
		if err != nil {
			t.Fatal(err)
		}
		appendBatch(b)
	}
	txnal := func(pid int64, partition int32, offset int64) {
		t.Helper()
		b, err := engine.AppendProducerRecords(nil, engine.BatchProducer{ID: pid, Epoch: 0, BaseSequence: -1, Transactional: true},
			[]engine.Record{rec(partition, offset)})
		if err != nil {
			t.Fatal(err)
		}
		appendBatch(b)
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		appendBatch(engine.AppendMarkerBatch(nil, engine.Marker{ProducerID: pid, Commit: commit, Timestamp: 1}))
	}
	plain(0, 1)
	txnal(7, 0, 5) // committed: applied at its marker, after the plain commit of 2 below
	txnal(8, 1, 6) // aborted
	plain(2, 2)
	marker(7, true)
	marker(8, false)
	plain(0, 3)    // a later plain commit overrides the transaction's
	txnal(9, 3, 9) // open at the end

	type seen struct {
		partition int32
		offset    int64
	}
	var got []seen
	st := &txnReplay{}
	if err := replayLog(l, func(r Record) error {
		k, err := DecodeKey(r.Key)
		if err != nil {
			return err
		}
		v, err := DecodeOffsetValue(r.Value)
		if err != nil {
			return err
		}
		got = append(got, seen{k.Partition, v.Offset})
		return nil
	}, st); err != nil {
		t.Fatal(err)
	}
	want := []seen{{0, 1}, {2, 2}, {0, 5}, {0, 3}}
	if len(got) != len(want) {
		t.Fatalf("replayed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("replayed %v, want %v", got, want)
		}
	}
	if len(st.open) != 1 || len(st.open[9]) != 1 {
		t.Fatalf("open transactions after the replay: %v", st.open)
	}
	offs := replayedOffsets(st.open[9])
	if v := offs["g"][topicPartition{"t", 3}]; v == nil || v.Offset != 9 {
		t.Fatalf("the open transaction's offset: %+v", offs)
	}
}

// txnMemLog is memLog taking transactional batches too (their producer is not kept).
type txnMemLog struct{ *memLog }

func (l txnMemLog) AppendTxn(p int32, _ int64, _ int16, recs []Record, done func(error)) {
	l.Append(p, recs, done)
}

// TestTxnOffsetCommitPendingUntilMarker: transactional offsets are served only once
// their transaction commits; meanwhile RequireStable answers UNSTABLE_OFFSET_COMMIT;
// an abort drops them.
func TestTxnOffsetCommitPendingUntilMarker(t *testing.T) {
	c := New(Config{Clock: newFakeClock(), Logger: quietLogger(), InitialRebalanceDelay: -1}, txnMemLog{newMemLog()})
	defer c.Close()
	for p := int32(0); p < c.NumPartitions(); p++ {
		if err := c.LoadPartition(p); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(pid int64, partition int32, offset int64) {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(3)
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tx", "g", pid, 0, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = partition, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		var resp *kmsg.TxnOffsetCommitResponse
		c.TxnOffsetCommit(req, func(r *kmsg.TxnOffsetCommitResponse, err error) {
			if err != nil {
				t.Fatal(err)
			}
			resp = r
		})
		if resp == nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit: %+v", resp)
		}
	}
	fetch := func(partition int32, stable bool) kmsg.OffsetFetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(7)
		req.Group, req.RequireStable = "g", stable
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{partition}
		req.Topics = append(req.Topics, rt)
		return c.OffsetFetch(req).Topics[0].Partitions[0]
	}
	p := c.PartitionFor("g")
	commit(7, 0, 5)
	if got := fetch(0, false); got.Offset != -1 || got.ErrorCode != 0 {
		t.Fatalf("before the marker: %+v", got)
	}
	if got := fetch(0, true); got.ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("before the marker, RequireStable: %+v", got)
	}
	c.CompleteTxnOffsets(p, 7, true)
	if got := fetch(0, true); got.Offset != 5 || got.ErrorCode != 0 {
		t.Fatalf("after the commit marker: %+v", got)
	}
	commit(8, 1, 6)
	c.CompleteTxnOffsets(p, 8, false)
	if got := fetch(1, true); got.Offset != -1 || got.ErrorCode != 0 {
		t.Fatalf("after the abort marker: %+v", got)
	}
}
