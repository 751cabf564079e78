package peer

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestControllerChannelLeavesASilentVoter: a voter that accepts connections but
// answers nothing (SIGSTOP) and is the leader hint holds up the request whose
// deadline ends on it, and no later one: the hint forgets it and it is asked last
// until it answers again or a later term names it leader.
func TestControllerChannelLeavesASilentVoter(t *testing.T) {
	vs := startVoters(t, 1, 2, 3)
	vs.active.Store(1)
	c := newTestClient(t, Config{NodeID: 4, Voters: vs.addrs()})
	ch := c.ControllerChannel()
	if _, err := ch.Request(ctxT(t, 5*time.Second), heartbeat()); err != nil || c.Leader() != 1 {
		t.Fatalf("first request: %v, leader %d", err, c.Leader())
	}
	vs.silent[1].Store(true) // SIGSTOP of the leader; the others elect 3
	vs.active.Store(3)
	if _, err := ch.Request(ctxT(t, 200*time.Millisecond), heartbeat()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request to the stopped leader: %v", err)
	}
	if c.Leader() == 1 {
		t.Fatal("the leader hint still names the voter that did not answer")
	}
	for i := range 5 {
		start := time.Now()
		if _, err := ch.Request(ctxT(t, time.Second), heartbeat()); err != nil {
			t.Fatalf("request %d after the stop: %v", i, err)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Fatalf("request %d took %v: it waited on the stopped voter", i, took)
		}
	}
	if c.Leader() != 3 {
		t.Fatalf("leader hint %d, want 3", c.Leader())
	}
	// An older or equal term naming the suspect does not bring it back; a later one
	// does.
	c.NoteLeaderTerm(3, 7)
	c.NoteLeaderTerm(1, 6)
	if c.Leader() != 3 {
		t.Fatalf("a stale term moved the hint to %d", c.Leader())
	}
	vs.silent[1].Store(false)
	vs.active.Store(1)
	c.NoteLeaderTerm(1, 8)
	before := vs.hits[3].Load()
	if _, err := ch.Request(ctxT(t, time.Second), heartbeat()); err != nil {
		t.Fatal(err)
	}
	if vs.hits[3].Load() != before || c.Leader() != 1 {
		t.Fatalf("the leader of the later term was not asked first (leader %d)", c.Leader())
	}
}

// TestHeartbeatChannelMovesOnAfterVoterTimeout: the heartbeat channel gives a voter
// VoterTimeout, then asks the next, within one request.
func TestHeartbeatChannelMovesOnAfterVoterTimeout(t *testing.T) {
	vs := startVoters(t, 1, 2)
	vs.active.Store(1)
	c := newTestClient(t, Config{NodeID: 4, Voters: vs.addrs(), VoterTimeout: 100 * time.Millisecond})
	ch := c.HeartbeatChannel()
	if _, err := ch.Request(ctxT(t, 5*time.Second), heartbeat()); err != nil {
		t.Fatal(err)
	}
	vs.silent[1].Store(true)
	vs.active.Store(2)
	start := time.Now()
	if _, err := ch.Request(ctxT(t, 5*time.Second), heartbeat()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the heartbeat took %v", took)
	}
	if c.Leader() != 2 {
		t.Fatalf("leader %d", c.Leader())
	}
	// The metadata source also moves on (a fetch long-polls 50 ms more): the test
	// voters close the connection on a Fetch, so the source goes round the voters
	// until its ctx ends, and the silent one costs it at most 150 ms a round.
	vs.silent[2].Store(true)
	vs.silent[1].Store(false)
	before := vs.hits[1].Load()
	if _, err := c.MetadataSource().Fetch(ctxT(t, time.Second), 1, 1<<20, 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("metadata fetch: %v", err)
	}
	if n := vs.hits[1].Load() - before; n < 3 {
		t.Fatalf("voter 1 was asked %d times in a second while voter 2 answered nothing", n)
	}
	vs.silent[2].Store(false)
}

// TestAbandonedRequestStillTimesOut: a request its caller gave up on still fails
// its connection after RequestTimeout if the peer never answers (invariant 3), so
// the next request dials again instead of queueing behind it.
func TestAbandonedRequestStillTimesOut(t *testing.T) {
	vs := startVoters(t, 1)
	vs.active.Store(1)
	c := newTestClient(t, Config{NodeID: 4, Voters: vs.addrs(), RequestTimeout: 150 * time.Millisecond})
	if _, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, heartbeat()); err != nil {
		t.Fatal(err)
	}
	s, _ := c.slot(Voter(1), PurposeController)
	s.mu.Lock()
	first := s.mu.conn
	s.mu.Unlock()
	vs.silent[1].Store(true)
	if _, err := c.Request(ctxT(t, 30*time.Millisecond), Voter(1), PurposeController, heartbeat()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("abandoned request: %v", err)
	}
	eventually(t, 2*time.Second, "the connection failed by the abandoned request's timeout", func() bool { return !first.alive() })
	if !errors.Is(first.err(), ErrTimeout) {
		t.Fatalf("connection error %v", first.err())
	}
}

// TestCheckVoterSet: a voter whose voter ids differ from this client's is refused
// (ErrVoterSetMismatch naming both lists); one listing the same ids at other
// addresses is not.
func TestCheckVoterSet(t *testing.T) {
	vs := startVoters(t, 1, 2)
	vs.active.Store(1)
	addrs := vs.addrs()
	c := newTestClient(t, Config{NodeID: 4, Voters: addrs, CheckVoterSet: true})
	if _, err := c.ControllerChannel().Request(ctxT(t, 5*time.Second), heartbeat()); err != nil {
		t.Fatal(err)
	}
	other := map[int32]string{1: "localhost:1", 2: "node-2:9093"}
	vs.listed.Store(&other)
	c2 := newTestClient(t, Config{NodeID: 5, Voters: addrs, CheckVoterSet: true})
	if _, err := c2.ControllerChannel().Request(ctxT(t, 5*time.Second), heartbeat()); err != nil {
		t.Fatalf("same ids at other addresses: %v", err)
	}
	wrong := map[int32]string{1: addrs[1], 3: "127.0.0.1:1"}
	vs.listed.Store(&wrong)
	c3 := newTestClient(t, Config{NodeID: 6, Voters: addrs, CheckVoterSet: true})
	// The client tries the refusing voter again until the deadline and returns the
	// last refusal: the deadline must leave room for one dial on a loaded machine
	// (2 s saw none at load 20).
	_, err := c3.ControllerChannel().Request(ctxT(t, 5*time.Second), heartbeat())
	if !errors.Is(err, ErrVoterSetMismatch) {
		t.Fatalf("another voter set: %v", err)
	}
	for _, want := range []string{"1@" + addrs[1] + ",3@127.0.0.1:1", "1@" + addrs[1] + ",2@" + addrs[2]} {
		if !containsStr(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestBootstrapServers: a client given controller.quorum.bootstrap.servers only
// learns the voters from the first that answers DescribeCluster (EndpointType 2) and
// then reaches them by id.
func TestBootstrapServers(t *testing.T) {
	vs := startVoters(t, 1, 2, 3)
	vs.active.Store(2)
	dead := startTestServer(t, func(s *served) { s.tr.Ticket.CloseConn() })
	deadAddr := dead.addr()
	dead.stop()
	c := newTestClient(t, Config{NodeID: 4, ClusterID: "test-cluster", BootstrapServers: []string{deadAddr, vs.servers[3].addr()}})
	if c.Voters() != nil {
		t.Fatalf("voters before discovery: %v", c.Voters())
	}
	resp, err := c.ControllerChannel().Request(ctxT(t, 5*time.Second), heartbeat())
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.BrokerHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %+v", r)
	}
	if got := c.Voters(); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("voters %v", got)
	}
	if c.Leader() != 2 {
		t.Fatalf("leader %d", c.Leader())
	}
	// Another cluster's controllers are not adopted.
	c2 := newTestClient(t, Config{NodeID: 4, ClusterID: "other-cluster", BootstrapServers: []string{vs.servers[1].addr()}})
	if _, err := c2.ControllerChannel().Request(ctxT(t, 2*time.Second), heartbeat()); !errors.Is(err, ErrWrongNode) || c2.Voters() != nil {
		t.Fatalf("another cluster's bootstrap server: %v (voters %v)", err, c2.Voters())
	}
}

// lateCtx is a context whose deadline has passed before its own timer marked it
// done: the moment a dial bounded by it returns its i/o timeout.
type lateCtx struct{ context.Context }

func (lateCtx) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }
func (lateCtx) Err() error                  { return nil }

// TestDialTimeoutAtCallersDeadline: a dial that times out at the caller's deadline
// is the caller's giving up, not the peer's failure: the slot is not put in backoff
// and the controller channel keeps the refusal an earlier attempt got (the flake of
// TestCheckVoterSet on a loaded machine, where the last dial straddled the deadline).
func TestDialTimeoutAtCallersDeadline(t *testing.T) {
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	c := newTestClient(t, Config{NodeID: 4, Voters: map[int32]string{1: "127.0.0.1:1"},
		Dial: func(context.Context, string) (net.Conn, error) { return nil, timeout }})
	_, err := c.Request(lateCtx{context.Background()}, Voter(1), PurposeController, heartbeat())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a dial timed out at the caller's deadline: %v", err)
	}
	s, _ := c.slot(Voter(1), PurposeController)
	s.mu.Lock()
	failures := s.mu.failures
	s.mu.Unlock()
	if failures != 0 {
		t.Fatalf("the caller's deadline counted as %d failed dials of the peer", failures)
	}
	if done := callerDone(lateCtx{context.Background()}); !errors.Is(done, context.DeadlineExceeded) {
		t.Fatalf("callerDone of a passed deadline: %v", done)
	}
	if done := callerDone(context.Background()); done != nil {
		t.Fatalf("callerDone without a deadline: %v", done)
	}
}
