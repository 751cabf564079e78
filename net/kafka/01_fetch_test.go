package kafka

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/wire"
)

// fetchPartReq is one partition of a hand-made fetch.
type fetchPartReq struct {
	topic     string
	id        [16]byte
	partition int32
	offset    int64
	maxBytes  int32
	curEpoch  int32
	lastEpoch int32
}

func fetchReq(v int16, maxWait, minBytes int32, sessionID, sessionEpoch int32, parts []fetchPartReq, forget []fetchPartReq) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(v)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, minBytes, 1<<20
	req.SessionID, req.SessionEpoch = sessionID, sessionEpoch
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = p.topic, p.id
			req.Topics = append(req.Topics, t)
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p.partition, p.offset, p.maxBytes
		if fp.PartitionMaxBytes == 0 {
			fp.PartitionMaxBytes = 1 << 20
		}
		fp.CurrentLeaderEpoch, fp.LastFetchedEpoch = p.curEpoch, p.lastEpoch
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, fp)
	}
	for _, p := range forget {
		f := kmsg.NewFetchRequestForgottenTopic()
		f.Topic, f.TopicID, f.Partitions = p.topic, p.id, []int32{p.partition}
		req.ForgottenTopics = append(req.ForgottenTopics, f)
	}
	return req
}

// batchesIn decodes the record batches of a fetched partition and returns their
// offsets (base..last, one per record).
func batchesIn(t *testing.T, b []byte) []int64 {
	t.Helper()
	var offs []int64
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("decoding record batch: %v", err)
		}
		if rb.Magic != 2 {
			t.Fatalf("magic %d", rb.Magic)
		}
		for i := int32(0); i <= rb.LastOffsetDelta; i++ {
			offs = append(offs, rb.FirstOffset+int64(i))
		}
		b = b[12+int(rb.Length):]
	}
	return offs
}

func topicID(t *testing.T, tb *testBroker, topic string) [16]byte {
	t.Helper()
	ti, ok := tb.meta.Image().Topic(topic)
	if !ok {
		t.Fatalf("no topic %s", topic)
	}
	return ti.ID
}

// TestFetchFramingEveryVersion decodes the hand-framed answer with kmsg at every
// served version: records, an unknown partition, a fenced epoch, READ_COMMITTED.
func TestFetchFramingEveryVersion(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "frame", 2, nil)
	cl := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, cl, "frame", 0, "f", 30)
	produceSync(t, cl, "frame", 1, "g", 5)
	id := topicID(t, tb, "frame")
	rc := tb.raw(t)
	for v := int16(4); v <= kmsg.NewPtrFetchRequest().MaxVersion(); v++ {
		parts := []fetchPartReq{
			{topic: "frame", id: id, partition: 0, offset: 3, curEpoch: -1, lastEpoch: -1},
			{topic: "frame", id: id, partition: 1, offset: 0, curEpoch: -1, lastEpoch: -1},
			{topic: "frame", id: id, partition: 7, offset: 0, curEpoch: -1, lastEpoch: -1},
		}
		if v >= 9 {
			parts[1].curEpoch = 3 // newer than the partition's 0
		}
		req := fetchReq(v, 0, 1, 0, -1, parts, nil)
		req.IsolationLevel = int8(v % 2)
		resp := rc.roundTrip(req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("v%d: response %+v", v, resp)
		}
		rt := resp.Topics[0]
		if v >= 13 && rt.TopicID != id || v < 13 && rt.Topic != "frame" {
			t.Fatalf("v%d: topic %q %x", v, rt.Topic, rt.TopicID)
		}
		p0, p1, p7 := rt.Partitions[0], rt.Partitions[1], rt.Partitions[2]
		if p0.ErrorCode != 0 || p0.HighWatermark != 30 || p0.LastStableOffset != 30 {
			t.Fatalf("v%d: p0 %+v", v, p0)
		}
		if v >= 5 && p0.LogStartOffset != 0 {
			t.Fatalf("v%d: p0 log start %d", v, p0.LogStartOffset)
		}
		offs := batchesIn(t, p0.RecordBatches)
		if len(offs) == 0 || offs[len(offs)-1] != 29 || offs[0] > 3 {
			t.Fatalf("v%d: p0 offsets %v", v, offs)
		}
		if (req.IsolationLevel == 1) != (p0.AbortedTransactions != nil) {
			t.Fatalf("v%d: aborted transactions %v with isolation %d", v, p0.AbortedTransactions, req.IsolationLevel)
		}
		if v >= 9 {
			if p1.ErrorCode != kerr.UnknownLeaderEpoch.Code || len(p1.RecordBatches) != 0 {
				t.Fatalf("v%d: p1 %+v", v, p1)
			}
			if v >= 12 && (p1.CurrentLeader.LeaderID != 1 || p1.CurrentLeader.LeaderEpoch != 0) {
				t.Fatalf("v%d: p1 current leader %+v", v, p1.CurrentLeader)
			}
		} else if got := batchesIn(t, p1.RecordBatches); len(got) != 5 {
			t.Fatalf("v%d: p1 offsets %v", v, got)
		}
		if p7.ErrorCode != kerr.UnknownTopicOrPartition.Code || p7.HighWatermark != -1 {
			t.Fatalf("v%d: p7 %+v", v, p7)
		}
	}
}

func TestFetchOffsetOutOfRangeAndDivergingEpoch(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "oor", 1, nil)
	produceSync(t, tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), "oor", 0, "o", 10)
	rc := tb.raw(t)
	resp := rc.roundTrip(fetchReq(12, 0, 1, 0, -1, []fetchPartReq{{topic: "oor", offset: 11, curEpoch: -1, lastEpoch: -1}}, nil)).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != 10 {
		t.Fatalf("offset 11: %+v", p)
	}
	// Between HW and LEO there is nothing to send, but no error either: offset 10 = HW.
	resp = rc.roundTrip(fetchReq(12, 0, 1, 0, -1, []fetchPartReq{{topic: "oor", offset: 10, curEpoch: -1, lastEpoch: -1}}, nil)).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("offset 10: %+v", p)
	}
	// A fetch at 12 after epoch 0, which ended at 10, diverges (checked before the range).
	resp = rc.roundTrip(fetchReq(12, 0, 1, 0, -1, []fetchPartReq{{topic: "oor", offset: 12, curEpoch: -1, lastEpoch: 0}}, nil)).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.DivergingEpoch.Epoch != 0 || p.DivergingEpoch.EndOffset != 10 {
		t.Fatalf("diverging: %+v", p)
	}
}

// TestFetchLongPollCompletesOnAppend parks a fetch with a long MaxWait, then
// produces: the fetch must answer with the record well before MaxWait.
func TestFetchLongPollCompletesOnAppend(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "poll", 1, nil)
	rc := tb.raw(t)
	rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	const maxWait = 10 * time.Second
	start := time.Now()
	req := fetchReq(12, int32(maxWait/time.Millisecond), 1, 0, -1, []fetchPartReq{{topic: "poll", offset: 0, curEpoch: -1, lastEpoch: -1}}, nil)
	corr := rc.send(req)
	waits := tb.b.data().waits
	for deadline := time.Now().Add(5 * time.Second); waits.Delayed() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the fetch never parked in the purgatory")
		}
		time.Sleep(time.Millisecond) // polling for the parked fetch, not waiting for a result
	}
	produceSync(t, tb.client(t), "poll", 0, "p", 1)
	resp := rc.recv(req, corr).(*kmsg.FetchResponse)
	took := time.Since(start)
	if offs := batchesIn(t, resp.Topics[0].Partitions[0].RecordBatches); len(offs) != 1 {
		t.Fatalf("long poll answered offsets %v", offs)
	}
	if took >= maxWait/2 {
		t.Fatalf("long poll took %v of its %v MaxWait", took, maxWait)
	}
	t.Logf("long poll answered %v after the request (MaxWait %v)", took, maxWait)

	// MinBytes not reached: the fetch answers at MaxWait with what there is.
	start = time.Now()
	req = fetchReq(12, 200, 1<<20, 0, -1, []fetchPartReq{{topic: "poll", offset: 0, curEpoch: -1, lastEpoch: -1}}, nil)
	resp = rc.roundTrip(req).(*kmsg.FetchResponse)
	if took := time.Since(start); took < 190*time.Millisecond {
		t.Fatalf("MinBytes fetch answered after %v, before MaxWait", took)
	}
	if offs := batchesIn(t, resp.Topics[0].Partitions[0].RecordBatches); len(offs) != 1 {
		t.Fatalf("expired fetch answered offsets %v", offs)
	}
}

func TestFetchSessionsRaw(t *testing.T) {
	for _, v := range []int16{12, 13, 18} {
		t.Run("v"+string(rune('0'+v/10))+string(rune('0'+v%10)), func(t *testing.T) { testFetchSessions(t, v) })
	}
}

func testFetchSessions(t *testing.T, v int16) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "sess", 3, nil)
	cl := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 3; p++ {
		produceSync(t, cl, "sess", p, "s", 3)
	}
	id := topicID(t, tb, "sess")
	part := func(p int32, off int64) fetchPartReq {
		return fetchPartReq{topic: "sess", id: id, partition: p, offset: off, curEpoch: -1, lastEpoch: -1}
	}
	rc := tb.raw(t)
	fetch := func(sid, epoch int32, parts, forget []fetchPartReq) *kmsg.FetchResponse {
		t.Helper()
		return rc.roundTrip(fetchReq(v, 0, 1, sid, epoch, parts, forget)).(*kmsg.FetchResponse)
	}
	got := func(r *kmsg.FetchResponse) map[int32]int {
		m := map[int32]int{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				m[p.Partition] = len(p.RecordBatches)
			}
		}
		return m
	}

	// Full fetch opening a session with partitions 0 and 1.
	r := fetch(0, 0, []fetchPartReq{part(0, 0), part(1, 0)}, nil)
	sid := r.SessionID
	if r.ErrorCode != 0 || sid == 0 {
		t.Fatalf("no session: %+v", r)
	}
	if m := got(r); len(m) != 2 || m[0] == 0 || m[1] == 0 {
		t.Fatalf("full answer %v", m)
	}
	// Incremental, offsets moved to the end: both change nothing visible... but the
	// client names them because its offsets moved; no records, HW unchanged: empty.
	r = fetch(sid, 1, []fetchPartReq{part(0, 3), part(1, 3)}, nil)
	if m := got(r); len(m) != 0 || r.SessionID != sid {
		t.Fatalf("incremental with no news: %v (session %d)", m, r.SessionID)
	}
	// New data on partition 1 only: the answer carries partition 1 only.
	produceSync(t, cl, "sess", 1, "s", 2)
	r = fetch(sid, 2, nil, nil)
	if m := got(r); len(m) != 1 || m[1] == 0 {
		t.Fatalf("incremental after append to 1: %v", m)
	}
	// Add partition 2, forget partition 0.
	r = fetch(sid, 3, []fetchPartReq{part(2, 0), part(1, 5)}, []fetchPartReq{part(0, 0)})
	if m := got(r); len(m) != 1 || m[2] == 0 {
		t.Fatalf("after add 2 / forget 0: %v", m)
	}
	// Partition 0 is forgotten: new data there is not reported. (The broker never
	// moves a session's fetch offsets itself: the client names partition 2 at 3.)
	produceSync(t, cl, "sess", 0, "s", 1)
	r = fetch(sid, 4, []fetchPartReq{part(2, 3)}, nil)
	if m := got(r); len(m) != 0 {
		t.Fatalf("forgotten partition reported: %v", m)
	}
	// A wrong epoch, an unknown session.
	if r = fetch(sid, 9, nil, nil); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r = fetch(sid+1, 1, nil, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// The epoch was not consumed by the failures.
	if r = fetch(sid, 5, nil, nil); r.ErrorCode != 0 {
		t.Fatalf("epoch 5: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Closing (epoch -1) gives a sessionless full answer and forgets the session.
	r = fetch(sid, -1, []fetchPartReq{part(0, 0)}, nil)
	if r.ErrorCode != 0 || r.SessionID != 0 || len(got(r)) != 1 {
		t.Fatalf("close: %+v", r)
	}
	if r = fetch(sid, 6, nil, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestConsumeAcrossManyFetches consumes with franz-go (which uses fetch sessions)
// through many small fetches while a producer keeps appending.
func TestConsumeAcrossManyFetches(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "many", 4, nil)
	prod := tb.client(t, kgo.DefaultProduceTopic("many"))
	cons := tb.client(t, kgo.ConsumeTopics("many"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(4<<10), kgo.FetchMaxPartitionBytes(1<<10), kgo.FetchMaxWait(100*time.Millisecond))
	const n = 2000
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			prod.Produce(testCtx(t), &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 50)}, nil)
		}
		done <- prod.Flush(testCtx(t))
	}()
	recs := consumeN(t, cons, n)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	next := map[int32]int64{}
	for _, r := range recs {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
	}
	if s := tb.b.data().sessions.Len(); s == 0 {
		t.Fatal("franz-go used no fetch session")
	}
}

// TestFetchByteLimits checks PartitionMaxBytes, MaxBytes and KIP-74's "at least one
// batch for the first partition with data".
func TestFetchByteLimits(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "limits", 2, nil)
	rc := tb.raw(t)
	batch := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 10, valueBytes: 100}) // ~1.2 KB
	for p := int32(0); p < 2; p++ {
		for range 5 {
			req := produceReq("limits", 1, batch)
			req.Topics[0].Partitions[0].Partition = p
			req.SetVersion(9)
			if r := rc.roundTrip(req).(*kmsg.ProduceResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("produce: %+v", r)
			}
		}
	}
	bs := int32(len(batch))
	fetch := func(maxBytes int32, p0, p1 int32) (int, int) {
		t.Helper()
		parts := []fetchPartReq{
			{topic: "limits", partition: 0, maxBytes: p0, curEpoch: -1, lastEpoch: -1},
			{topic: "limits", partition: 1, maxBytes: p1, curEpoch: -1, lastEpoch: -1},
		}
		req := fetchReq(12, 0, 1, 0, -1, parts, nil)
		req.MaxBytes = maxBytes
		r := rc.roundTrip(req).(*kmsg.FetchResponse)
		ps := r.Topics[0].Partitions
		return len(ps[0].RecordBatches) / int(bs), len(ps[1].RecordBatches) / int(bs)
	}
	for _, c := range []struct {
		maxBytes, p0, p1 int32
		want0, want1     int
	}{
		{1 << 20, 1 << 20, 1 << 20, 5, 5},  // everything
		{1 << 20, 2*bs + 10, 3 * bs, 2, 3}, // per-partition limits
		{3 * bs, 1 << 20, 1 << 20, 3, 0},   // MaxBytes spent on partition 0
		{4 * bs, 3 * bs, 1 << 20, 3, 1},    // the rest of MaxBytes goes to partition 1
		{10, 10, 10, 1, 0},                 // first batch exceeds every limit: still sent
		{1 << 20, 1 << 20, 10, 5, 0},       // partition 1's batch exceeds its limit, not first
	} {
		if g0, g1 := fetch(c.maxBytes, c.p0, c.p1); g0 != c.want0 || g1 != c.want1 {
			t.Fatalf("limits %d/%d/%d: batches %d,%d want %d,%d", c.maxBytes, c.p0, c.p1, g0, g1, c.want0, c.want1)
		}
	}
}

// TestParkedFetchSeesWholeProduce parks a fetch of six partitions, then sends one
// Produce request with a batch for each: the fetch must answer with all six batches,
// not only the first partition's (the HWs of a request move together before any
// waiting fetch retries). Both policies: inline HW moves (none) and the flusher's
// (fsync).
func TestParkedFetchSeesWholeProduce(t *testing.T) {
	for _, sync := range []engine.SyncPolicy{engine.SyncNone, engine.SyncFsync} {
		t.Run(sync.String(), func(t *testing.T) {
			tb := startDataBroker(t, testBrokerOptions{Sync: sync})
			const n = 6
			mustCreate(t, tb.admin(t), "whole", n, nil)
			fetcher, producer := tb.raw(t), tb.raw(t)
			var parts []fetchPartReq
			for p := range int32(n) {
				parts = append(parts, fetchPartReq{topic: "whole", partition: p, curEpoch: -1, lastEpoch: -1})
			}
			waits := tb.b.data().waits
			for round := range 5 {
				for i := range parts {
					parts[i].offset = int64(round)
				}
				freq := fetchReq(12, 20000, 1, 0, -1, parts, nil)
				corr := fetcher.send(freq)
				for deadline := time.Now().Add(5 * time.Second); waits.Delayed() == 0; {
					if time.Now().After(deadline) {
						t.Fatal("the fetch never parked in the purgatory")
					}
					time.Sleep(time.Millisecond) // polling for the parked fetch, not waiting for a result
				}
				preq := kmsg.NewPtrProduceRequest()
				preq.SetVersion(9)
				preq.Acks, preq.TimeoutMillis = -1, 5000
				pt := kmsg.NewProduceRequestTopic()
				pt.Topic = "whole"
				for p := range int32(n) {
					pp := kmsg.NewProduceRequestTopicPartition()
					pp.Partition = p
					pp.Records = appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 1, valueBytes: 10})
					pt.Partitions = append(pt.Partitions, pp)
				}
				preq.Topics = append(preq.Topics, pt)
				pcorr := producer.send(preq)
				resp := fetcher.recv(freq, corr).(*kmsg.FetchResponse)
				got := 0
				for _, p := range resp.Topics[0].Partitions {
					if p.ErrorCode != 0 {
						t.Fatalf("partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
					}
					if offs := batchesIn(t, p.RecordBatches); len(offs) == 1 && offs[0] == int64(round) {
						got++
					}
				}
				if got != n {
					t.Fatalf("round %d: the woken fetch carried %d of the %d partitions' records", round, got, n)
				}
				presp := producer.recv(preq, pcorr).(*kmsg.ProduceResponse)
				for _, p := range presp.Topics[0].Partitions {
					if p.ErrorCode != 0 || p.BaseOffset != int64(round) {
						t.Fatalf("produce partition %d: %v at %d", p.Partition, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
					}
				}
				for deadline := time.Now().Add(5 * time.Second); waits.Delayed() != 0; {
					if time.Now().After(deadline) {
						t.Fatal("the answered fetch stays armed")
					}
					time.Sleep(time.Millisecond) // polling for the timer entry's removal
				}
			}
		})
	}
}

// TestFetchCopiedAndSplicedRecords fetches three partitions in one answer: two small
// ranges, copied into the response buffer, around a large one, sent as a file range.
// Every record must arrive, in order, whichever way it was sent.
func TestFetchCopiedAndSplicedRecords(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "mixed", 3, nil)
	rc := tb.raw(t)
	sizes := []int{3, 400, 5} // records of 100 bytes: p1's batch is beyond wire.FetchCopyMax
	for p, n := range sizes {
		batch := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: n, valueBytes: 100})
		if p == 1 && len(batch) <= wire.FetchCopyMax {
			t.Fatalf("the large batch has %d bytes", len(batch))
		}
		preq := produceReq("mixed", 1, batch)
		preq.Topics[0].Partitions[0].Partition = int32(p)
		preq.SetVersion(9)
		if got := rc.roundTrip(preq).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; got.ErrorCode != 0 {
			t.Fatalf("produce p%d: %v", p, kerr.ErrorForCode(got.ErrorCode))
		}
	}
	var parts []fetchPartReq
	for p := range sizes {
		parts = append(parts, fetchPartReq{topic: "mixed", partition: int32(p), curEpoch: -1, lastEpoch: -1})
	}
	for _, v := range []int16{4, 11, 12} {
		resp := rc.roundTrip(fetchReq(v, 0, 1, 0, -1, parts, nil)).(*kmsg.FetchResponse)
		for i, p := range resp.Topics[0].Partitions {
			offs := batchesIn(t, p.RecordBatches)
			if p.ErrorCode != 0 || len(offs) != sizes[i] || offs[len(offs)-1] != int64(sizes[i]-1) {
				t.Fatalf("v%d partition %d: %v, offsets %v", v, p.Partition, kerr.ErrorForCode(p.ErrorCode), offs)
			}
		}
	}
}

// TestFetchOlderSegmentAnswersAtOnce: a fetch whose offset lies on a segment before
// the last is answered at once even when MinBytes is not met (Kafka's DelayedFetch):
// a read stops at its segment's end, so a reader of a compacted topic, whose older
// segments hold a few bytes each, waited MaxWait at every segment.
func TestFetchOlderSegmentAnswersAtOnce(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "segs", 1, map[string]*string{"segment.bytes": kmsg.StringPtr("1024")})
	cl := tb.client(t)
	for i := 0; i < 20; i++ {
		produceSync(t, cl, "segs", 0, string(make([]byte, 100)), 1)
	}
	if l := tb.b.Engine().Log(engine.TopicPartition{Topic: "segs"}); !l.OnOlderSegment(0, l.HighWatermark()) {
		t.Fatal("one segment: the test needs several")
	}
	rc := tb.raw(t)
	rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	const maxWait = 10 * time.Second
	start := time.Now()
	req := fetchReq(12, int32(maxWait/time.Millisecond), 1<<20, 0, -1, []fetchPartReq{{topic: "segs", offset: 0, curEpoch: -1, lastEpoch: -1}}, nil)
	resp := rc.roundTrip(req).(*kmsg.FetchResponse)
	if took := time.Since(start); took >= maxWait/2 {
		t.Fatalf("a fetch on the first of several segments took %v of its %v MaxWait", took, maxWait)
	}
	if offs := batchesIn(t, resp.Topics[0].Partitions[0].RecordBatches); len(offs) == 0 || offs[0] != 0 {
		t.Fatalf("answered offsets %v", offs)
	}
}
