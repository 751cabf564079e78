package quorum

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// inprocNet carries raft messages between Quorums of one process: each Send is
// a copy (proto.Clone, as marshalling would make) handed to the receiver's Step.
type inprocNet struct {
	mu    sync.Mutex
	nodes map[int32]*Quorum
	cut   map[int32]bool
}

func newInprocNet() *inprocNet {
	return &inprocNet{nodes: map[int32]*Quorum{}, cut: map[int32]bool{}}
}

func (n *inprocNet) set(id int32, q *Quorum, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[id], n.cut[id] = q, cut
}

type inprocTransport struct {
	net  *inprocNet
	from int32
}

func (tr inprocTransport) Send(msgs []*raftpb.Message) {
	tr.net.mu.Lock()
	defer tr.net.mu.Unlock()
	if tr.net.cut[tr.from] {
		return
	}
	for _, m := range msgs {
		to := NodeOf(m.GetTo())
		if q := tr.net.nodes[to]; q != nil && !tr.net.cut[to] {
			q.Step(proto.Clone(m).(*raftpb.Message))
		}
	}
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		<-tick.C
	}
}

// rtNode is one voter running its Run loop.
type rtNode struct {
	id     int32
	dir    string
	st     *DiskStorage
	q      *Quorum
	cancel context.CancelFunc
	done   chan error
}

func startRT(t *testing.T, net *inprocNet, id int32, dir string, voters []int32) *rtNode {
	t.Helper()
	st, err := OpenDiskStorage(dir, DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := New(Config{NodeID: id, Voters: voters}, st, inprocTransport{net, id})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &rtNode{id: id, dir: dir, st: st, q: q, cancel: cancel, done: make(chan error, 1)}
	net.set(id, q, false)
	go func() { n.done <- q.Run(ctx) }()
	return n
}

func (n *rtNode) stop(t *testing.T) {
	n.cancel()
	if err := <-n.done; err != nil {
		t.Errorf("node %d: Run: %v", n.id, err)
	}
	n.st.Close()
}

func proposeWait(t *testing.T, q *Quorum, recs ...metadata.Record) ProposeResult {
	t.Helper()
	select {
	case r := <-q.Propose(recs):
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("proposal not resolved in 10s")
		return ProposeResult{}
	}
}

// TestRealTimeFailover: three voters with the default timing (100 ms ticks, an
// election timeout of 1 to 2 s) on disk, each in its Run loop. The leader's Run is
// killed; a new leader must commit within 3 s. The old leader then restarts from
// its directory and catches up. Readers run on other goroutines throughout.
func TestRealTimeFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	root := t.TempDir()
	voters := []int32{1, 2, 3}
	net := newInprocNet()
	nodes := map[int32]*rtNode{}
	for _, id := range voters {
		nodes[id] = startRT(t, net, id, filepath.Join(root, fmt.Sprint(id)), voters)
	}
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.stop(t)
			}
		}
	}()
	readers, stopReaders := context.WithCancel(context.Background())
	var rwg sync.WaitGroup
	for _, n := range nodes {
		q := n.q
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for readers.Err() == nil {
				q.Status()
				q.Committed()
				if _, err := q.ReadCommitted(1, 1<<16); err != nil && !errors.Is(err, ErrStopped) {
					t.Errorf("ReadCommitted: %v", err)
					return
				}
				ctx, cancel := context.WithTimeout(readers, 5*time.Millisecond)
				q.WaitCommitted(ctx, 0)
				cancel()
			}
		}()
	}
	defer func() { stopReaders(); rwg.Wait() }()

	leader := func(exclude int32) *rtNode {
		for _, id := range voters {
			if n := nodes[id]; id != exclude && n != nil && n.q.ReadyForWrites() {
				return n
			}
		}
		return nil
	}
	eventually(t, 10*time.Second, "a first leader", func() bool { return leader(-1) != nil })
	old := leader(-1)
	if r := proposeWait(t, old.q, topic("before")); r.Err != nil {
		t.Fatalf("first proposal: %v", r.Err)
	}

	killed := time.Now()
	net.set(old.id, old.q, true)
	old.stop(t)
	nodes[old.id] = nil
	var r ProposeResult
	for {
		eventually(t, 3*time.Second, "a new leader", func() bool { return leader(old.id) != nil })
		if r = proposeWait(t, leader(old.id).q, topic("after")); !errors.Is(r.Err, ErrNotLeader) && !errors.Is(r.Err, ErrLost) {
			break
		}
	}
	took := time.Since(killed)
	if r.Err != nil {
		t.Fatalf("proposal on the new leader: %v", r.Err)
	}
	t.Logf("leader %d killed; a new leader committed at offset %d after %v", old.id, r.Offset, took)
	if took > 3*time.Second {
		t.Fatalf("failover took %v, want at most 3s", took)
	}

	// The old leader restarts from its directory and catches up.
	back := startRT(t, net, old.id, old.dir, voters)
	nodes[old.id] = back
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := back.q.WaitCommitted(ctx, r.Offset-1); err != nil {
		t.Fatalf("restarted voter did not catch up to %d: %v", r.Offset, err)
	}
	if _, im := back.q.Committed(); im.NumTopics() != 2 {
		t.Fatalf("restarted voter has %d topics, want 2", im.NumTopics())
	}
}

// TestRunStopsProposals: after Run returns, queued and new proposals fail with
// ErrStopped and waiters return.
func TestRunStopsProposals(t *testing.T) {
	q, err := New(Config{NodeID: 1, Voters: []int32{1}}, NewMemStorage(), dropTransport{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []Leadership
	q.SubscribeLeadership(func(l Leadership) {
		mu.Lock()
		events = append(events, l)
		mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	eventually(t, 5*time.Second, "leader", q.ReadyForWrites)
	if r := proposeWait(t, q, topic("a")); r.Err != nil {
		t.Fatal(r.Err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := proposeWait(t, q, topic("b")); r.Err == nil {
		t.Fatal("proposal accepted after Run returned")
	}
	if _, err := q.WaitCommitted(context.Background(), 1<<40); !errors.Is(err, ErrStopped) {
		t.Fatalf("WaitCommitted after stop: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) < 2 || !events[len(events)-2].ReadyForWrites || events[len(events)-1].IsLeader || q.IsLeader() {
		t.Fatalf("leadership events %+v: want ready for writes, then not leading once stopped", events)
	}
}

// TestSingleVoterStartsAtOnce: a combined node's quorum of one, on a fresh
// directory and again on restart, is ready for writes well before an election
// timeout (1 to 2 s with the defaults) could pass: it campaigns in New.
func TestSingleVoterStartsAtOnce(t *testing.T) {
	dir := t.TempDir()
	for _, what := range []string{"fresh", "restart"} {
		start := time.Now()
		st, err := OpenDiskStorage(dir, DiskOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q, err := New(Config{NodeID: 1, Voters: []int32{1}}, st, dropTransport{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- q.Run(ctx) }()
		eventually(t, 5*time.Second, "ready for writes", q.ReadyForWrites)
		took := time.Since(start)
		if r := proposeWait(t, q, topic("t-"+what)); r.Err != nil {
			t.Fatal(r.Err)
		}
		cancel()
		<-done
		st.Close()
		t.Logf("%s: ready for writes %v after opening the directory", what, took)
		if took > 900*time.Millisecond {
			t.Fatalf("%s: ready for writes only after %v: it waited for an election timeout", what, took)
		}
	}
}
