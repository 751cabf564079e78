package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/remote"
	"github.com/samsa-broker/samsa/internal/s3test"
	"github.com/samsa-broker/samsa/replication"
	"github.com/samsa-broker/samsa/replication/tiered"
)

// leaderClient is a follower's FetchClient answered in the process by the leader's
// replica manager, as the net layer answers it (replication's FollowerFetch, the
// leader's log read up to the log end it gives, ListOffsets EARLIEST_LOCAL_TIMESTAMP),
// sessionless, recording the partition error codes of its Fetch answers and the
// ListOffsets timestamps asked.
type leaderClient struct {
	leader *replication.Manager

	mu         sync.Mutex
	codes      []int16
	timestamps []int64
}

func (c *leaderClient) Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	total := 0
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, fp := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = fp.Partition
			p := c.leader.Partition(engine.TopicPartition{Topic: t.Topic, Partition: fp.Partition})
			res, err := p.FollowerFetch(req.ReplicaState.ID, req.ReplicaState.Epoch, fp.FetchOffset, fp.LastFetchedEpoch, fp.CurrentLeaderEpoch, req.Version)
			rp.HighWatermark, rp.LogStartOffset = res.HighWatermark, res.LogStartOffset
			var ke *kerr.Error
			switch {
			case errors.As(err, &ke):
				rp.ErrorCode = ke.Code
			case errors.Is(err, replication.ErrOffsetOutOfRange):
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
			case err != nil:
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			case res.Diverging:
				rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = res.DivergingEpoch, res.DivergingEndOffset
			default:
				b, err := p.EngineLog().ReadCopy(fp.FetchOffset, fp.PartitionMaxBytes, res.LogEndOffset, true, nil)
				if err != nil {
					rp.ErrorCode = kerr.OffsetOutOfRange.Code
				}
				rp.RecordBatches = b
				total += len(b)
			}
			c.mu.Lock()
			c.codes = append(c.codes, rp.ErrorCode)
			c.mu.Unlock()
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if total == 0 { // a long poll, shortened: nothing to wait on here
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return resp, nil
}

func (c *leaderClient) ListOffsets(_ context.Context, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.Version = req.Version
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, lp := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Timestamp, rp.Offset, rp.LeaderEpoch = lp.Partition, -1, -1, -1
			c.mu.Lock()
			c.timestamps = append(c.timestamps, lp.Timestamp)
			c.mu.Unlock()
			p := c.leader.Partition(engine.TopicPartition{Topic: t.Topic, Partition: lp.Partition})
			switch {
			case lp.Timestamp != -4:
				rp.ErrorCode = kerr.InvalidRequest.Code
			case p.CheckLeader(lp.CurrentLeaderEpoch) != nil:
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				rp.Offset = p.LocalLogStartOffset()
				rp.LeaderEpoch = p.LatestEpoch() // one epoch in this test
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *leaderClient) OffsetForLeaderEpoch(context.Context, *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	return nil, errors.New("not served (the fetcher uses Fetch's diverging epoch)")
}

func (c *leaderClient) seen() (codes []int16, timestamps []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int16(nil), c.codes...), append([]int64(nil), c.timestamps...)
}

// tieredLeader is node 1 leading data-0, tiered, with a part of it copied and
// deleted locally (its local log start, local, above 0) and replica 2 added; the
// first 5 records are an idempotent producer's (9), whose state is in the copies
// alone.
func tieredLeader(t *testing.T) (n *node, sm *remote.StorageManager, st replication.PartitionState, local int64) {
	t.Helper()
	g := s3test.Start(t)
	sm = storage(t, g)
	n = openNode(t, t.TempDir(), 0, sm, dataConfig())
	t.Cleanup(n.close)
	for i := range 5 {
		b, err := engine.AppendProducerRecords(nil, engine.BatchProducer{ID: 9, Epoch: 1, BaseSequence: int32(i)},
			[]engine.Record{{Timestamp: time.Now().UnixMilli(), Key: []byte(fmt.Sprint(i)), Value: []byte("x")}})
		if err != nil {
			t.Fatal(err)
		}
		pr := new(replication.Produce)
		done := make(chan struct{})
		pr.Begin(n.repl, -1, 5*time.Second, func() { close(done) })
		if _, err := pr.Append(n.data, b); err != nil {
			t.Fatal(err)
		}
		pr.Seal()
		<-done
		if err := pr.Part(0).Err; err != nil {
			t.Fatal(err)
		}
	}
	n.produce(t, 5, 400)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if local = n.data.EngineLog().LogStartOffset(); local == 0 {
		t.Fatal("nothing copied and deleted locally")
	}
	st = replication.PartitionState{Topic: "data", TopicID: [16]byte{7, 7}, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1},
		Leader: 1, LeaderEpoch: 0, PartitionEpoch: 1, MinISR: 1, LogConfig: dataConfig()}
	if err := n.repl.Apply(replication.Delta{Leaders: []replication.PartitionState{st}}); err != nil {
		t.Fatal(err)
	}
	return n, sm, st, local
}

// startFollower starts node 2, an empty replica of data-0 following node 1 and
// fetching at version (0: the default), with a remote log manager reading the
// copies' metadata as node 1 wrote it; it waits until the follower holds the
// leader's log end and HW, and returns its log and what its fetches were answered.
func startFollower(t *testing.T, n *node, sm *remote.StorageManager, st replication.PartitionState, version int16) (*engine.Log, *leaderClient) {
	t.Helper()
	eng, err := engine.Open(engine.Options{Dirs: []string{t.TempDir()}, Sync: engine.SyncNone, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	client := &leaderClient{leader: n.repl}
	fr, err := replication.NewManager(replication.Config{NodeID: 2, Logs: replication.EngineLogs(eng), Logger: quiet,
		Fetch:   func(int32, int) replication.FetchClient { return client },
		Fetcher: replication.FetcherConfig{MaxWait: 50 * time.Millisecond, Backoff: 20 * time.Millisecond, Version: version}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fr.Close)
	frlm := tiered.New(tiered.Config{NodeID: 2, Replicas: fr, Storage: sm, Metadata: n.meta, Logger: quiet, TempDir: t.TempDir()})
	t.Cleanup(frlm.Close)
	fr.SetRemoteLog(frlm)
	if err := fr.Apply(replication.Delta{Followers: []replication.PartitionState{st}}); err != nil {
		t.Fatal(err)
	}
	ll, fl := n.data.EngineLog(), fr.Partition(engine.TopicPartition{Topic: "data", Partition: 0}).EngineLog()
	deadline := time.Now().Add(20 * time.Second)
	for fl.LogEndOffset() != ll.LogEndOffset() || fl.HighWatermark() != ll.HighWatermark() {
		if time.Now().After(deadline) {
			t.Fatalf("the follower at [%d, %d) HW %d; the leader's log ends at %d, HW %d", fl.LogStartOffset(), fl.LogEndOffset(),
				fl.HighWatermark(), ll.LogEndOffset(), ll.HighWatermark())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fl, client
}

// checkFollower checks that the follower's log holds the leader's from local, and
// the state of producer 9 and the leader epoch from the copy before it.
func checkFollower(t *testing.T, n *node, fl *engine.Log, local int64) {
	t.Helper()
	ll := n.data.EngineLog()
	if fl.LogStartOffset() != local {
		t.Fatalf("the follower's log starts at %d, want the leader's local log start %d", fl.LogStartOffset(), local)
	}
	if epoch, seq, ok := fl.ProducerState(9); !ok || epoch != 1 || seq != 4 {
		t.Fatalf("producer 9 on the follower: epoch %d, last sequence %d (%v); want 1, 4", epoch, seq, ok)
	}
	if e := fl.LatestEpoch(); e != 0 {
		t.Fatalf("the follower's latest epoch %d, want 0", e)
	}
	lb, _ := ll.ReadCopy(local, 1<<20, ll.LogEndOffset(), true, nil)
	fb, _ := fl.ReadCopy(local, 1<<20, fl.LogEndOffset(), true, nil)
	if len(lb) == 0 || !bytes.Equal(lb, fb) {
		t.Fatalf("the follower's records differ from the leader's (%d and %d bytes)", len(fb), len(lb))
	}
}

// A follower whose fetch offset lies below its leader's local log start, in
// remote storage, is answered OFFSET_MOVED_TO_TIERED_STORAGE with the whole
// log's start; it asks the leader for its earliest local offset (ListOffsets
// -4), starts over there with the producer state and leader epoch of the copy
// ending before it, and catches up: only the local part is copied. A fetch
// below the whole log's start (raised by DeleteRecords) stays
// OFFSET_OUT_OF_RANGE.
func TestFollowerOffsetMovedToTieredStorage(t *testing.T) {
	n, sm, st, local := tieredLeader(t)
	if res, err := n.data.FollowerFetch(2, -1, 0, -1, 0, 17); !errors.Is(err, replication.ErrOffsetMovedToTieredStorage) ||
		!errors.Is(err, kerr.OffsetMovedToTieredStorage) || res.LogStartOffset != 0 {
		t.Fatalf("a Fetch v17 at 0: %v, log start %d; want OFFSET_MOVED_TO_TIERED_STORAGE, 0", err, res.LogStartOffset)
	}
	fl, client := startFollower(t, n, sm, st, 0)
	codes, timestamps := client.seen()
	if len(codes) == 0 || codes[0] != kerr.OffsetMovedToTieredStorage.Code {
		t.Fatalf("the follower's first fetch answered %v, want OFFSET_MOVED_TO_TIERED_STORAGE first", codes)
	}
	for _, c := range codes {
		if c == kerr.OffsetOutOfRange.Code {
			t.Fatalf("a fetch answered OFFSET_OUT_OF_RANGE (codes %v)", codes)
		}
	}
	if len(timestamps) != 1 || timestamps[0] != -4 {
		t.Fatalf("ListOffsets timestamps asked: %v, want one EARLIEST_LOCAL_TIMESTAMP (-4)", timestamps)
	}
	checkFollower(t, n, fl, local)

	// DeleteRecords raises the whole log's start below the local one: a fetch below
	// it is out of range, one above it still moved to tiered storage, and the
	// follower keeps the new start.
	if _, err := n.data.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	if _, err := n.data.FollowerFetch(2, -1, 0, -1, 0, 17); !errors.Is(err, replication.ErrOffsetOutOfRange) {
		t.Fatalf("a Fetch v17 below the whole log's start: %v, want OFFSET_OUT_OF_RANGE", err)
	}
	if res, err := n.data.FollowerFetch(2, -1, 5, -1, 0, 17); !errors.Is(err, replication.ErrOffsetMovedToTieredStorage) || res.LogStartOffset != 5 {
		t.Fatalf("a Fetch v17 at the whole log's start: %v, log start %d; want OFFSET_MOVED_TO_TIERED_STORAGE, 5", err, res.LogStartOffset)
	}
	n.produce(t, 405, 10) // a fetch answer to carry the new start
	deadline := time.Now().Add(20 * time.Second)
	for fl.RemoteLogStart() != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the follower's whole log start %d, want 5", fl.RemoteLogStart())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A follower of a build before OFFSET_MOVED_TO_TIERED_STORAGE fetches at v15
// (a rolling upgrade): its leader answers it OFFSET_OUT_OF_RANGE with the local
// log start, where it starts over with the same state from remote storage.
func TestFollowerOfEarlierBuildOutOfRange(t *testing.T) {
	n, sm, st, local := tieredLeader(t)
	if res, err := n.data.FollowerFetch(2, -1, 0, -1, 0, 15); !errors.Is(err, replication.ErrOffsetOutOfRange) || res.LogStartOffset != local {
		t.Fatalf("a Fetch v15 at 0: %v, log start %d; want OFFSET_OUT_OF_RANGE, %d", err, res.LogStartOffset, local)
	}
	fl, client := startFollower(t, n, sm, st, 15)
	codes, timestamps := client.seen()
	if len(codes) == 0 || codes[0] != kerr.OffsetOutOfRange.Code || len(timestamps) != 0 {
		t.Fatalf("the v15 follower's fetches answered %v, ListOffsets %v; want OFFSET_OUT_OF_RANGE first, no ListOffsets", codes, timestamps)
	}
	for _, c := range codes {
		if c == kerr.OffsetMovedToTieredStorage.Code {
			t.Fatalf("a v15 fetch answered OFFSET_MOVED_TO_TIERED_STORAGE (codes %v)", codes)
		}
	}
	checkFollower(t, n, fl, local)
}
