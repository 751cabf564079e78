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

// TestCommitsByTopicIDAndUnknownGroup: a commit naming a topic by an id that is not
// the id of the topic of that name (deleted and re-created since the handler resolved
// it) answers UNKNOWN_TOPIC_ID and writes nothing, for OffsetCommit v10 and
// TxnOffsetCommit v6; a commit with a generation to a group that does not exist is
// ILLEGAL_GENERATION before OffsetCommit v9 and TxnOffsetCommit v6, GROUP_ID_NOT_FOUND
// from them (Kafka's OffsetMetadataManager, KIP-1319), and creates no group.
func TestCommitsByTopicIDAndUnknownGroup(t *testing.T) {
	c := New(Config{Clock: newFakeClock(), Logger: quietLogger(), InitialRebalanceDelay: -1}, txnMemLog{newMemLog()})
	defer c.Close()
	for p := int32(0); p < c.NumPartitions(); p++ {
		if err := c.LoadPartition(p); err != nil {
			t.Fatal(err)
		}
	}
	current, old := [16]byte{1}, [16]byte{2}
	c.SetTopics(1, []TopicInfo{{Name: "t", ID: current, Partitions: 1}})

	commit := func(version int16, group string, generation int32, id [16]byte, offset int64) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(version)
		req.Group, req.Generation = group, generation
		if generation >= 0 {
			req.MemberID = "m"
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", TopicID: id, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
		var resp *kmsg.OffsetCommitResponse
		c.OffsetCommit(req, func(r *kmsg.OffsetCommitResponse) { resp = r })
		if resp == nil {
			t.Fatal("OffsetCommit not answered")
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	txnCommit := func(version int16, group string, generation int32, id [16]byte, offset int64) int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(version)
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tx", group, 9, 0, generation
		if generation >= 0 {
			req.MemberID = "m"
		}
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = "t", id
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		var resp *kmsg.TxnOffsetCommitResponse
		c.TxnOffsetCommit(req, func(r *kmsg.TxnOffsetCommitResponse, err error) {
			if err != nil {
				t.Fatal(err)
			}
			resp = r
		})
		if resp == nil {
			t.Fatal("TxnOffsetCommit not answered")
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	fetch := func(group string) int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(8)
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
		return c.OffsetFetch(req).Groups[0].Topics[0].Partitions[0].Offset
	}

	if code := commit(10, "g", -1, old, 5); code != kerr.UnknownTopicID.Code {
		t.Fatalf("OffsetCommit by the id of a re-created topic: %v", kerr.ErrorForCode(code))
	}
	if got := fetch("g"); got != -1 {
		t.Fatalf("the refused commit was written: offset %d", got)
	}
	if code := commit(10, "g", -1, current, 6); code != 0 {
		t.Fatalf("OffsetCommit by the current id: %v", kerr.ErrorForCode(code))
	}
	if code := commit(9, "g", -1, [16]byte{}, 7); code != 0 {
		t.Fatalf("OffsetCommit by name: %v", kerr.ErrorForCode(code))
	}
	if got := fetch("g"); got != 7 {
		t.Fatalf("offset %d, want 7", got)
	}
	if code := txnCommit(6, "txg", -1, old, 5); code != kerr.UnknownTopicID.Code {
		t.Fatalf("TxnOffsetCommit by the id of a re-created topic: %v", kerr.ErrorForCode(code))
	}
	if code := txnCommit(6, "txg", -1, current, 6); code != 0 {
		t.Fatalf("TxnOffsetCommit by the current id: %v", kerr.ErrorForCode(code))
	}

	for _, tc := range []struct {
		what string
		code int16
		want int16
	}{
		{"OffsetCommit v8", commit(8, "none", 3, [16]byte{}, 1), kerr.IllegalGeneration.Code},
		{"OffsetCommit v9", commit(9, "none", 3, [16]byte{}, 1), kerr.GroupIDNotFound.Code},
		{"OffsetCommit v10", commit(10, "none", 3, current, 1), kerr.GroupIDNotFound.Code},
		{"TxnOffsetCommit v5", txnCommit(5, "none", 3, [16]byte{}, 1), kerr.IllegalGeneration.Code},
		{"TxnOffsetCommit v6", txnCommit(6, "none", 3, current, 1), kerr.GroupIDNotFound.Code},
	} {
		if tc.code != tc.want {
			t.Errorf("%s with a generation to a group that does not exist: %v, want %v", tc.what, kerr.ErrorForCode(tc.code), kerr.ErrorForCode(tc.want))
		}
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.SetVersion(4)
	for _, g := range c.ListGroups(lreq).Groups {
		if g.Group == "none" {
			t.Fatal("a refused commit created the group")
		}
	}
}
