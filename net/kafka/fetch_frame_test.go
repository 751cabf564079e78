package kafka

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/fetchsession"
)

// FuzzFetchFraming frames random Fetch answers (versions, topics, errors, records
// from a real file, diverging epochs, leaders, isolation levels, incremental
// sessions) by hand and decodes them with kmsg: every field must come back.
func FuzzFetchFraming(f *testing.F) {
	path := filepath.Join(f.TempDir(), "segment.log")
	var seg []byte
	var bounds []int64 // batch boundaries in the file
	for i := range 4 {
		bounds = append(bounds, int64(len(seg)))
		seg = appendBatch(seg, batchSpec{pid: -1, epoch: -1, seq: -1, n: 1 + i, valueBytes: 7 * i})
	}
	bounds = append(bounds, int64(len(seg)))
	if err := os.WriteFile(path, seg, 0o644); err != nil {
		f.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { file.Close() })
	for v := uint8(0); v < 15; v++ {
		f.Add(v, uint8(v%7), uint64(v)*7919)
	}
	f.Fuzz(func(t *testing.T, v8, nparts uint8, seed uint64) {
		v := 4 + int16(v8%15)
		rng := rand.New(rand.NewPCG(seed, 1))
		op := &fetchOp{r: &Request{Header: Header{Key: 1, Version: v, CorrelationID: int32(rng.Uint32()), Flexible: v >= 12}},
			v: v, isolation: int8(rng.IntN(2))}
		withSession := v >= 7 && rng.IntN(2) == 0
		if withSession {
			op.full = rng.IntN(2) == 0
		}
		var sentHW []int64 // per part, the HW its session entry last sent
		codes := []int16{0, 0, 0, kerr.OffsetOutOfRange.Code, kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code, kerr.UnknownTopicOrPartition.Code}
		topics := []string{"a", "bb", "a-much-longer-topic-name"}
		for i := range int(nparts % 9) {
			p := fetchPart{topic: topics[rng.IntN(len(topics))], partition: int32(i), code: codes[rng.IntN(len(codes))],
				hw: rng.Int64N(1 << 40), lso: rng.Int64N(1 << 40), logStart: rng.Int64N(1 << 20),
				leaderID: rng.Int32N(5), leaderEpoch: rng.Int32N(9)}
			p.id[0] = p.topic[0]
			p.id[15] = byte(len(p.topic))
			if v >= 12 && rng.IntN(4) == 0 {
				p.diverging, p.divEpoch, p.divEnd = true, rng.Int32N(9), rng.Int64N(1<<30)
			}
			if rng.IntN(2) == 0 {
				a := rng.IntN(len(bounds) - 1)
				b := a + 1 + rng.IntN(len(bounds)-1-a)
				p.slice = engine.Slice{File: file, Pos: bounds[a], Size: int32(bounds[b] - bounds[a])}
			}
			if withSession {
				hw := p.hw
				if rng.IntN(2) == 0 {
					hw = -1
				}
				sentHW = append(sentHW, hw)
			}
			op.parts = append(op.parts, p)
		}
		if withSession {
			op.sess = openTestSession(t, v, op.parts, sentHW)
		}
		// What the answer must carry, decided before frame consumes the slices.
		type wantPart struct {
			p       fetchPart
			records []byte
		}
		var want []wantPart
		for i, p := range op.parts {
			inc := op.sess == nil || op.full || p.slice.Size > 0 || p.code != 0 || p.diverging || sentHW[i] != p.hw
			if !inc {
				continue
			}
			want = append(want, wantPart{p: p, records: append([]byte{}, seg[p.slice.Pos:p.slice.Pos+int64(p.slice.Size)]...)})
		}
		topCode := int16(0)
		if v >= 7 && rng.IntN(5) == 0 {
			topCode = kerr.InvalidFetchSessionEpoch.Code
		}

		fr := op.frame(topCode)
		resp := fr.Response()
		var wire []byte
		for _, c := range resp.Chunks {
			if c.File == nil {
				wire = append(wire, c.Bytes...)
				continue
			}
			b := make([]byte, c.Length)
			if _, err := c.File.ReadAt(b, c.Offset); err != nil {
				t.Fatal(err)
			}
			wire = append(wire, b...)
		}
		if int64(len(wire)) != resp.Size() {
			t.Fatalf("wrote %d bytes, Size says %d", len(wire), resp.Size())
		}
		fr.Release()

		if got := int32(binary.BigEndian.Uint32(wire)); got != op.r.Header.CorrelationID {
			t.Fatalf("correlation id %d", got)
		}
		body := wire[4:]
		if v >= 12 {
			if body[0] != 0 {
				t.Fatal("response header tags")
			}
			body = body[1:]
		}
		var fresp kmsg.FetchResponse
		fresp.SetVersion(v)
		if err := fresp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: kmsg cannot decode the hand-framed answer: %v", v, err)
		}
		if v >= 7 {
			sid := int32(0)
			if op.sess != nil {
				sid = op.sess.ID()
			}
			if fresp.ErrorCode != topCode || fresp.SessionID != sid {
				t.Fatalf("v%d: error %d session %d", v, fresp.ErrorCode, fresp.SessionID)
			}
		}
		var got []kmsg.FetchResponseTopicPartition
		var gotTopics []kmsg.FetchResponseTopic
		for _, rt := range fresp.Topics {
			gotTopics = append(gotTopics, rt)
			got = append(got, rt.Partitions...)
		}
		if len(got) != len(want) {
			t.Fatalf("v%d: %d partitions, want %d", v, len(got), len(want))
		}
		i := 0
		for _, rt := range gotTopics {
			for range rt.Partitions {
				w := want[i].p
				if v >= 13 && rt.TopicID != w.id || v < 13 && rt.Topic != w.topic {
					t.Fatalf("v%d: partition %d under topic %q/%x, want %q", v, i, rt.Topic, rt.TopicID, w.topic)
				}
				i++
			}
		}
		for i, g := range got {
			w := want[i]
			if g.Partition != w.p.partition || g.ErrorCode != w.p.code || g.HighWatermark != w.p.hw || g.LastStableOffset != w.p.lso {
				t.Fatalf("v%d: partition %d: %+v, want %+v", v, i, g, w.p)
			}
			if v >= 5 && g.LogStartOffset != w.p.logStart {
				t.Fatalf("v%d: log start %d want %d", v, g.LogStartOffset, w.p.logStart)
			}
			if !bytes.Equal(g.RecordBatches, w.records) {
				t.Fatalf("v%d: records %d bytes, want %d", v, len(g.RecordBatches), len(w.records))
			}
			if (op.isolation == 1) != (g.AbortedTransactions != nil) {
				t.Fatalf("v%d: aborted transactions %v at isolation %d", v, g.AbortedTransactions, op.isolation)
			}
			if v >= 12 {
				if w.p.diverging && (g.DivergingEpoch.Epoch != w.p.divEpoch || g.DivergingEpoch.EndOffset != w.p.divEnd) {
					t.Fatalf("v%d: diverging %+v", v, g.DivergingEpoch)
				}
				leader := w.p.code == kerr.NotLeaderForPartition.Code || w.p.code == kerr.FencedLeaderEpoch.Code
				if leader && (g.CurrentLeader.LeaderID != w.p.leaderID || g.CurrentLeader.LeaderEpoch != w.p.leaderEpoch) {
					t.Fatalf("v%d: current leader %+v", v, g.CurrentLeader)
				}
			}
		}
	})
}

// openTestSession opens a consumer's session (version v) over parts in a cache of its
// own, points each part at its entry and has the entry remember an answer that sent
// sentHW[i] and the part's LSO and log start.
func openTestSession(t *testing.T, v int16, parts []fetchPart, sentHW []int64) *fetchsession.Session {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(v)
	req.ReplicaID, req.ReplicaState.ID = -1, -1
	req.SessionID, req.SessionEpoch = 0, 0 // open one
	for _, p := range parts {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = p.topic, p.id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.partition
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	s, full, err := fetchsession.NewCache(1, time.Hour).Open(req, v, time.Now())
	if s == nil || !full || err != nil {
		t.Fatalf("v%d: opening a session: %v %v %v", v, s, full, err)
	}
	i := 0
	s.Collect(false, nil, time.Now(), func(sp *fetchsession.Part, f fetchsession.Fetch) {
		p := &parts[i]
		if f.Partition != p.partition {
			t.Fatalf("v%d: session part %d is partition %d, want %d", v, i, f.Partition, p.partition)
		}
		p.sp = sp
		sp.CarryLocked(true, fetchsession.Sent{HighWatermark: sentHW[i], LastStableOffset: p.lso, LogStartOffset: p.logStart})
		i++
	})
	if i != len(parts) {
		t.Fatalf("v%d: %d session parts, want %d", v, i, len(parts))
	}
	return s
}
