package replication

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// logWithEpochs returns a memory log holding one record per entry of epochs, in order.
func logWithEpochs(epochs ...int32) *memLog {
	l := newMemLog(tp0(), false)
	for _, e := range epochs {
		if _, err := l.Append(makeBatch("x"), engine.AppendOptions{LeaderEpoch: e}); err != nil {
			panic(err)
		}
	}
	return l
}

func TestLastRecordEpoch(t *testing.T) {
	l := logWithEpochs(0, 0, 2, 2)
	if e := lastRecordEpoch(l); e != 2 {
		t.Fatalf("last record epoch %d", e)
	}
	// This node led epoch 5 without appending: the cache names 5, the records end in 2.
	l.AssignEpochStartOffset(5, l.LogEndOffset())
	if e := lastRecordEpoch(l); e != 2 {
		t.Fatalf("with an empty epoch 5 cached: %d", e)
	}
	if e := lastRecordEpoch(newMemLog(tp0(), false)); e != -1 {
		t.Fatalf("empty log: %d", e)
	}
	one := logWithEpochs(3)
	one.AssignEpochStartOffset(4, 1)
	if e := lastRecordEpoch(one); e != 3 {
		t.Fatalf("first epoch 3 with records: %d", e)
	}
}

// followerFetcher returns a fetcher of a Manual Manager whose replica of tp0 follows
// leader 2 in epoch over l.
func followerFetcher(t *testing.T, l *memLog, epoch int32) (*Manager, *Fetcher) {
	t.Helper()
	store := newMemStore(false)
	store.logs[tp0()], store.order = l, []*memLog{l}
	m, err := NewManager(Config{NodeID: 1, Logs: store, Clock: newFakeClock(), Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if err := m.Apply(Delta{Followers: []PartitionState{stateOf(2, epoch, 0, []int32{1, 2}, []int32{1, 2}, 1)}}); err != nil {
		t.Fatal(err)
	}
	fs := m.Fetchers()
	if len(fs) != 1 {
		t.Fatalf("%d fetchers", len(fs))
	}
	return m, fs[0]
}

// answer hands the fetcher's pending Fetch a one-partition answer built by fill.
func answer(t *testing.T, m *Manager, f *Fetcher, fill func(*kmsg.FetchResponseTopicPartition)) *kmsg.FetchRequest {
	t.Helper()
	req, _ := f.Next(m.clock.Now())
	if req.Fetch == nil {
		t.Fatal("no fetch to answer")
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Fetch.Version
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic, rt.TopicID = "t", [16]byte{1}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark, rp.LogStartOffset = -1, -1
	fill(&rp)
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	f.HandleFetch(m.clock.Now(), req.Fetch, resp, nil)
	return req.Fetch
}

// TestTruncationInRounds is KIP-279's case: the follower lacks the leader's epoch, so
// the first answer cuts only its own later epoch, and the next fetch (now carrying an
// earlier last epoch) finds the real divergence point.
func TestTruncationInRounds(t *testing.T) {
	// Follower: epoch 1 at 0..2, epoch 4 at 3..5. Leader: epoch 1 at 0..1, epoch 2 at
	// 2..4, epoch 5 from 5.
	l := logWithEpochs(1, 1, 1, 4, 4, 4)
	m, f := followerFetcher(t, l, 5)
	req := answer(t, m, f, func(rp *kmsg.FetchResponseTopicPartition) {
		rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = 2, 5 // leader: largest <= 4 is 2, ends at 5
	})
	if p := req.Topics[0].Partitions[0]; p.LastFetchedEpoch != 4 || p.FetchOffset != 6 {
		t.Fatalf("first fetch %+v", p)
	}
	if leo := l.LogEndOffset(); leo != 3 {
		t.Fatalf("after the first round: log end %d, want 3 (epoch 4 cut)", leo)
	}
	req = answer(t, m, f, func(rp *kmsg.FetchResponseTopicPartition) {
		rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = 1, 2 // leader's epoch 1 ends at 2
	})
	if p := req.Topics[0].Partitions[0]; p.LastFetchedEpoch != 1 || p.FetchOffset != 3 {
		t.Fatalf("second fetch %+v", p)
	}
	if leo := l.LogEndOffset(); leo != 2 {
		t.Fatalf("after the second round: log end %d, want 2", leo)
	}
}

func TestFetcherFullSyncAndHW(t *testing.T) {
	l := logWithEpochs(0, 0)
	m, f := followerFetcher(t, l, 1)
	answer(t, m, f, func(rp *kmsg.FetchResponseTopicPartition) {
		rp.ErrorCode = 1 // OFFSET_OUT_OF_RANGE
		rp.LogStartOffset, rp.HighWatermark = 10, 12
	})
	if l.LogStartOffset() != 10 || l.LogEndOffset() != 10 {
		t.Fatalf("full sync: log [%d, %d)", l.LogStartOffset(), l.LogEndOffset())
	}
	b := makeBatch("y")
	for i := range 2 {
		bb := append([]byte(nil), b...)
		putBase(bb, int64(10+i), 1)
		req := answer(t, m, f, func(rp *kmsg.FetchResponseTopicPartition) {
			rp.RecordBatches, rp.HighWatermark, rp.LogStartOffset = bb, 11, 10
		})
		if got := req.Topics[0].Partitions[0].FetchOffset; got != int64(10+i) {
			t.Fatalf("fetch %d at %d", i, got)
		}
	}
	if l.LogEndOffset() != 12 || l.HighWatermark() != 11 {
		t.Fatalf("log end %d HW %d", l.LogEndOffset(), l.HighWatermark())
	}
}

// putBase stamps a batch's base offset and leader epoch, as a leader does.
func putBase(b []byte, base int64, epoch int32) {
	for i := range 8 {
		b[i] = byte(base >> (56 - 8*i))
	}
	for i := range 4 {
		b[12+i] = byte(epoch >> (24 - 8*i))
	}
}

func TestClientSessionIncremental(t *testing.T) {
	var s clientSession
	k := func(p int32) sessKey { return sessKey{topic: "t", id: [16]byte{1}, partition: p} }
	w := func(p int32, off int64) want {
		return want{key: k(p), w: sessWant{offset: off, maxBytes: 10, curEpoch: 1, last: 0}}
	}

	req := kmsg.NewPtrFetchRequest()
	b := s.build(req, []want{w(0, 5), w(1, 7)})
	if !b.full || req.SessionEpoch != 0 || len(req.Topics[0].Partitions) != 2 {
		t.Fatalf("first request: full %v epoch %d", b.full, req.SessionEpoch)
	}
	s.commit(b, 42)

	req = kmsg.NewPtrFetchRequest()
	b = s.build(req, []want{w(0, 6), w(1, 7)}) // only partition 0 moved
	if b.full || req.SessionID != 42 || req.SessionEpoch != 1 || len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 ||
		req.Topics[0].Partitions[0].Partition != 0 || len(req.ForgottenTopics) != 0 {
		t.Fatalf("incremental request %+v", req)
	}
	s.commit(b, 42)

	req = kmsg.NewPtrFetchRequest()
	b = s.build(req, []want{w(0, 6)}) // partition 1 no longer fetched
	if len(req.Topics) != 0 || len(req.ForgottenTopics) != 1 || req.ForgottenTopics[0].Partitions[0] != 1 || req.SessionEpoch != 2 {
		t.Fatalf("forgetting request %+v", req)
	}
	s.reset()
	req = kmsg.NewPtrFetchRequest()
	if b = s.build(req, []want{w(0, 6)}); !b.full || req.SessionID != 42 || req.SessionEpoch != 0 {
		t.Fatalf("after an error: full %v, id %d epoch %d (want the old id closed)", b.full, req.SessionID, req.SessionEpoch)
	}
	s.commit(b, 0) // the leader keeps no session: every request stays full
	req = kmsg.NewPtrFetchRequest()
	if b = s.build(req, []want{w(0, 6)}); !b.full || req.SessionID != 0 {
		t.Fatalf("sessionless: full %v id %d", b.full, req.SessionID)
	}
}

func TestThrottle(t *testing.T) {
	th := NewThrottle(1000)
	now := time.Unix(0, 0)
	if ok, _ := th.Allow(now); !ok {
		t.Fatal("a full bucket refuses")
	}
	th.Record(now, 3000)
	ok, at := th.Allow(now)
	if ok || at.Sub(now) < 1900*time.Millisecond || at.Sub(now) > 2100*time.Millisecond {
		t.Fatalf("after 3 s worth: allow %v until %v", ok, at.Sub(now))
	}
	if ok, _ := th.Allow(now.Add(2100 * time.Millisecond)); !ok {
		t.Fatal("refilled bucket refuses")
	}
}

func TestFetcherIndexIsKafkas(t *testing.T) {
	// Java: Utils.abs(31 * "orders".hashCode() + 3) % 4
	if got := fetcherIndex(engine.TopicPartition{Topic: "orders", Partition: 3}, 4); got != 2 {
		t.Fatalf("fetcher index %d", got)
	}
}

// TestFetcherThrottlesAddedReplicas: a replica being added by a reassignment (this node
// in Adding) that is behind is left out of the fetches while the follower throttle is
// spent; one in sync, or not being added, is fetched regardless.
func TestFetcherThrottlesAddedReplicas(t *testing.T) {
	store, clock := newMemStore(false), newFakeClock()
	m, err := NewManager(Config{NodeID: 1, Logs: store, Clock: clock, Manual: true, FollowerThrottleRate: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st := stateOf(2, 0, 0, []int32{2, 1}, []int32{2}, 1)
	st.Adding = []int32{1}
	m.Apply(Delta{Followers: []PartitionState{st}})
	f := m.Fetchers()[0]
	batch := makeBatch("0123456789012345678901234567890123456789")
	putBase(batch, 0, 0)
	answer(t, m, f, func(rp *kmsg.FetchResponseTopicPartition) {
		rp.RecordBatches, rp.HighWatermark, rp.LogStartOffset = batch, 5, 0 // behind: the HW is 5
	})
	req, wake := f.Next(clock.Now())
	if !req.Empty() || wake.IsZero() {
		t.Fatalf("fetched past the throttle: %+v, wake %v", req, wake)
	}
	clock.t = wake
	if req, _ := f.Next(clock.Now()); req.Fetch == nil {
		t.Fatal("no fetch once the throttle refilled")
	}
}

// TestFollowerRepairsDamage: a follower whose log has a damaged range cuts it (and
// what follows) before its next fetch, and fetches from there.
func TestFollowerRepairsDamage(t *testing.T) {
	l := logWithEpochs(1, 1, 1, 1, 1, 1)
	l.mu.Lock()
	l.damagedAt, l.hasDamage = 2, true
	l.mu.Unlock()
	m, f := followerFetcher(t, l, 1)
	req, _ := f.Next(m.clock.Now())
	if req.Fetch == nil {
		t.Fatal("no fetch")
	}
	if p := req.Fetch.Topics[0].Partitions[0]; p.FetchOffset != 2 {
		t.Fatalf("fetch at %d, want 2 (the first damaged offset)", p.FetchOffset)
	}
	if _, damaged := l.FirstDamagedOffset(); damaged || l.LogEndOffset() != 2 {
		t.Fatalf("after repair: log end %d, damaged %v", l.LogEndOffset(), damaged)
	}
}

// TestClientSessionSentCache: with the fetcher's partitions attached, an unchanged
// partition is known from its cached sent value; a change is named until an answer
// commits it, and a session that is dropped or replaced names everything again.
func TestClientSessionSentCache(t *testing.T) {
	var s clientSession
	fps := []*fetchPart{{}, {}, {}}
	ws := func(offs ...int64) []want {
		var out []want
		for p, off := range offs {
			out = append(out, want{key: sessKey{topic: "t", id: [16]byte{1}, partition: int32(p)}, fp: fps[p],
				w: sessWant{offset: off, maxBytes: 10, curEpoch: 1}})
		}
		return out
	}
	named := func(req *kmsg.FetchRequest) []int32 {
		var out []int32
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				out = append(out, p.Partition)
			}
		}
		return out
	}
	step := func(what string, offs []int64, commit bool, want ...int32) {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		b := s.build(req, ws(offs...))
		if got := named(req); !slices.Equal(got, want) {
			t.Fatalf("%s: named %v, want %v", what, got, want)
		}
		if commit {
			s.commit(b, 42)
		}
	}
	step("full", []int64{5, 5, 5}, true, 0, 1, 2)
	step("unchanged", []int64{5, 5, 5}, true)
	step("one moved, answer lost", []int64{5, 6, 5}, false, 1)
	step("still moved", []int64{5, 6, 5}, true, 1)
	step("unchanged again", []int64{5, 6, 5}, true)
	s.reset()
	step("after a reset", []int64{5, 6, 5}, true, 0, 1, 2)
	step("unchanged after the reset", []int64{5, 6, 5}, true)
}

// TestFetcherLeaderCatchUpRetry: a partition error that says the leader's image is a
// moment behind the follower's (UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER) is
// retried after 50 ms, doubling per repeat up to replica.fetch.backoff.ms (1 s); an
// answer without an error starts over; other errors wait the backoff at once.
func TestFetcherLeaderCatchUpRetry(t *testing.T) {
	l := logWithEpochs(0, 0)
	m, f := followerFetcher(t, l, 1)
	clock := m.clock.(*fakeClock)
	fail := func(code int16) time.Duration {
		t.Helper()
		answer(t, m, f, func(rp *kmsg.FetchResponseTopicPartition) { rp.ErrorCode = code })
		req, at := f.Next(clock.Now())
		if req.Fetch != nil || at.IsZero() {
			t.Fatalf("after error %d: a fetch at once (%v)", code, req.Fetch != nil)
		}
		wait := at.Sub(clock.Now())
		clock.advance(wait)
		return wait
	}
	const unknownLeaderEpoch, notLeader, storageError = 74, 6, 56
	for i, want := range []time.Duration{50, 100, 200, 400, 800, 1000, 1000} {
		code := int16(unknownLeaderEpoch)
		if i%2 == 1 {
			code = notLeader
		}
		if got := fail(code); got != want*time.Millisecond {
			t.Fatalf("retry %d after error %d: %v, want %v ms", i, code, got, want)
		}
	}
	answer(t, m, f, func(rp *kmsg.FetchResponseTopicPartition) { rp.HighWatermark, rp.LogStartOffset = 2, 0 })
	if got := fail(unknownLeaderEpoch); got != 50*time.Millisecond {
		t.Fatalf("after an answer without error: %v, want 50 ms", got)
	}
	if got := fail(storageError); got != time.Second {
		t.Fatalf("KAFKA_STORAGE_ERROR: %v, want the backoff (1 s)", got)
	}
}

// TestFetcherOffsetMovedToTieredStorage steps a follower through
// OFFSET_MOVED_TO_TIERED_STORAGE: no fetch until a ListOffsets
// EARLIEST_LOCAL_TIMESTAMP answer names the leader's local log start (an error
// answer is asked again after the backoff), then the log starts over there and
// fetching resumes from it.
func TestFetcherOffsetMovedToTieredStorage(t *testing.T) {
	l := logWithEpochs(0, 0)
	m, f := followerFetcher(t, l, 1)
	answer(t, m, f, func(rp *kmsg.FetchResponseTopicPartition) {
		rp.ErrorCode = kerr.OffsetMovedToTieredStorage.Code
		rp.LogStartOffset, rp.HighWatermark = 0, 30
	})
	if l.LogStartOffset() != 0 || l.LogEndOffset() != 2 {
		t.Fatalf("the log changed before the leader's local start was known: [%d, %d)", l.LogStartOffset(), l.LogEndOffset())
	}
	listAnswer := func(code int16, offset int64) {
		t.Helper()
		req, _ := f.Next(m.clock.Now())
		if req.ListOffsets == nil || req.Fetch != nil {
			t.Fatalf("want a ListOffsets, got %+v", req)
		}
		lr := req.ListOffsets
		if lr.ReplicaID != 1 || len(lr.Topics) != 1 || lr.Topics[0].Topic != "t" || len(lr.Topics[0].Partitions) != 1 {
			t.Fatalf("ListOffsets %+v", lr)
		}
		if p := lr.Topics[0].Partitions[0]; p.Timestamp != -4 || p.CurrentLeaderEpoch != 1 || lr.Version < 8 {
			t.Fatalf("ListOffsets v%d partition %+v", lr.Version, p)
		}
		resp := kmsg.NewPtrListOffsetsResponse()
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.ErrorCode, rp.Offset, rp.LeaderEpoch = code, offset, 1
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		f.HandleListOffsets(m.clock.Now(), lr, resp, nil)
	}
	listAnswer(kerr.NotLeaderForPartition.Code, -1)
	if req, wake := f.Next(m.clock.Now()); !req.Empty() || wake.IsZero() {
		t.Fatalf("after an error answer: %+v at once, wake %v", req, wake)
	}
	m.clock.(*fakeClock).advance(time.Second)
	listAnswer(0, 20)
	if l.LogStartOffset() != 20 || l.LogEndOffset() != 20 {
		t.Fatalf("after the leader's local start: log [%d, %d), want [20, 20)", l.LogStartOffset(), l.LogEndOffset())
	}
	req, _ := f.Next(m.clock.Now())
	if req.Fetch == nil || req.Fetch.Topics[0].Partitions[0].FetchOffset != 20 {
		t.Fatalf("want a fetch from 20, got %+v", req)
	}
}
