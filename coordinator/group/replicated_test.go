package group

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// replicaNode is one broker's engine and replica manager for __consumer_offsets.
type replicaNode struct {
	eng    *engine.Manager
	m      *replication.Manager
	closed bool
}

func newReplicaNode(t *testing.T, id int32, dir string) *replicaNode {
	t.Helper()
	eng, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: engine.SyncNone, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := replication.NewManager(replication.Config{NodeID: id, Logs: replication.EngineLogs(eng), Logger: quietLogger()})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	n := &replicaNode{eng: eng, m: m}
	t.Cleanup(n.close)
	return n
}

// close stops the node's replica manager and engine (once).
func (n *replicaNode) close() {
	if !n.closed {
		n.closed = true
		n.m.Close()
		n.eng.Close()
	}
}

// offsetsState is partition p of __consumer_offsets as the metadata would describe it.
func offsetsState(p int32, replicas, isr []int32, leader, epoch int32) replication.PartitionState {
	return replication.PartitionState{Topic: OffsetsTopic, TopicID: [16]byte{1}, Partition: p, Replicas: replicas, ISR: isr,
		Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch, MinISR: 1, LogConfig: OffsetsLogConfig()}
}

func (n *replicaNode) lead(t *testing.T, parts int32, replicas, isr []int32, epoch int32) {
	t.Helper()
	var d replication.Delta
	for p := range parts {
		d.Leaders = append(d.Leaders, offsetsState(p, replicas, isr, replicas[0], epoch))
	}
	if err := n.m.Apply(d); err != nil {
		t.Fatal(err)
	}
}

func loadAll(t *testing.T, c *Coordinator) {
	t.Helper()
	for p := range c.NumPartitions() {
		if err := c.LoadPartition(p); err != nil {
			t.Fatal(err)
		}
	}
}

// Commits through the leader replica are served by a coordinator that later loads the
// same log; when this node stops leading, appends and loads fail with ErrNotLeader
// (NOT_COORDINATOR to the client).
func TestReplicatedLogLeaderCommitsAndLoses(t *testing.T) {
	n := newReplicaNode(t, 1, t.TempDir())
	const parts = 3
	n.lead(t, parts, []int32{1}, []int32{1}, 0)
	h := &harness{t: t, clock: newFakeClock()}
	cfg := Config{NumPartitions: parts, Clock: h.clock, Logger: quietLogger(), InitialRebalanceDelay: -1}
	h.c = New(cfg, NewReplicatedLog(n.m, 0))
	loadAll(t, h.c)
	ids, gen := h.stableGroup("g", 1)
	for i := int64(0); i < 50; i++ {
		if code := h.commit("g", ids[0], gen, "t", int32(i%3), i, "m"); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	h.c.Close()

	// A new coordinator (the same broker after a restart of its coordinator, or a new
	// leader whose log holds these records) loads them.
	h.c = New(cfg, NewReplicatedLog(n.m, 0))
	loadAll(t, h.c)
	for p := int32(0); p < 3; p++ {
		want := int64(49 - (49-p)%3)
		if got := h.fetch("g", "t", p); got.Offset != want {
			t.Fatalf("partition %d: %+v, want %d", p, got, want)
		}
	}

	// Leadership moves to broker 2: this node follows (no fetcher: it stays idle).
	gp := h.c.PartitionFor("g")
	d := replication.Delta{Followers: []replication.PartitionState{offsetsState(gp, []int32{1, 2}, []int32{1, 2}, 2, 1)}}
	if err := n.m.Apply(d); err != nil {
		t.Fatal(err)
	}
	rl := NewReplicatedLog(n.m, 0)
	errc := make(chan error, 1)
	rl.Append(gp, []Record{{Key: []byte("k"), Value: []byte("v")}}, func(err error) { errc <- err })
	if err := <-errc; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append as a follower: %v", err)
	}
	if err := rl.Replay(gp, func(Record) error { return nil }); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("replay as a follower: %v", err)
	}
	if code := h.commit("g", ids[0], gen, "t", 0, 99, ""); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit after losing leadership: %v", kerr.ErrorForCode(code))
	}
	h.c.UnloadPartition(gp)
	if code := h.commit("g", ids[0], gen, "t", 0, 99, ""); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit after unloading: %v", kerr.ErrorForCode(code))
	}
	h.c.Close()
}

// acks=all: with a second replica in the ISR, a commit is acknowledged only once the
// follower has fetched past it; with a follower that never fetches it times out and
// the client is told to retry (COORDINATOR_NOT_AVAILABLE).
func TestReplicatedLogWaitsForTheISR(t *testing.T) {
	n := newReplicaNode(t, 1, t.TempDir())
	n.lead(t, 1, []int32{1, 2}, []int32{1, 2}, 0)
	tp := engine.TopicPartition{Topic: OffsetsTopic, Partition: 0}
	rp := n.m.Partition(tp)
	rl := NewReplicatedLog(n.m, 10*time.Second)

	errc := make(chan error, 1)
	rl.Append(0, []Record{{Key: []byte("k1"), Value: []byte("v1")}}, func(err error) { errc <- err })
	select {
	case err := <-errc:
		t.Fatalf("acknowledged before the follower had it: %v", err)
	case <-time.After(50 * time.Millisecond): // the commit must still be waiting
	}
	// The follower fetches at the leader's end: it holds the batch, the HW passes it.
	if _, err := rp.FollowerFetch(2, 1, rp.Log().LogEndOffset(), -1, 0, 17); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("after the follower caught up: %v", err)
	}

	short := NewReplicatedLog(n.m, 50*time.Millisecond)
	short.Append(0, []Record{{Key: []byte("k2"), Value: []byte("v2")}}, func(err error) { errc <- err })
	err := <-errc
	if err == nil || errors.Is(err, ErrNotLeader) || appendErrorCode(err, true) != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("commit the follower never fetched: %v", err)
	}
}

// done calls of one partition come in Append order even when later appends are
// acknowledged by the same HW move as earlier ones.
func TestReplicatedLogOrder(t *testing.T) {
	n := newReplicaNode(t, 1, t.TempDir())
	n.lead(t, 1, []int32{1, 2}, []int32{1, 2}, 0)
	rp := n.m.Partition(engine.TopicPartition{Topic: OffsetsTopic, Partition: 0})
	rl := NewReplicatedLog(n.m, 10*time.Second)
	got := make(chan int, 10)
	for i := range 10 {
		rl.Append(0, []Record{{Key: []byte{byte(i)}, Value: []byte("v")}}, func(err error) {
			if err != nil {
				t.Errorf("append %d: %v", i, err)
			}
			got <- i
		})
	}
	if _, err := rp.FollowerFetch(2, 1, rp.Log().LogEndOffset(), -1, 0, 17); err != nil {
		t.Fatal(err)
	}
	for want := range 10 {
		if i := <-got; i != want {
			t.Fatalf("done %d before %d", i, want)
		}
	}
}
