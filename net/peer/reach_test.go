package peer

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUnreachableBroker: a broker whose process dies while a request waits on its
// connection (the peer closes it), and whose listener then refuses the redial, is
// lost from the close on; a dial that reaches it again clears that, and a broker that
// closes a connection with nothing waiting on it (an idle close) is not lost.
func TestUnreachableBroker(t *testing.T) {
	conns := make(chan net.Conn, 4)
	rp := startRawPeer(t, func(c net.Conn, corr int32, frame []byte) bool {
		conns <- c // the request is never answered: the test closes the connection
		return true
	})
	addr := rp.addr()
	c := newTestClient(t, Config{NodeID: 2, BrokerAddr: func(id int32) (string, bool) { return addr, id == 1 }})
	if _, ok := c.Unreachable(1); ok {
		t.Fatal("lost before any connection")
	}

	// A request waits; the peer's process dies: the connection closes, the listener is gone.
	errc := make(chan error, 1)
	go func() {
		_, err := c.Request(ctxT(t, 5*time.Second), Broker(1), PurposeTxn, kmsg.NewPtrMetadataRequest())
		errc <- err
	}()
	pc := <-conns
	before := time.Now()
	rp.ln.Close()
	pc.Close()
	if err := <-errc; err == nil {
		t.Fatal("the request was answered")
	}
	since, ok := c.Unreachable(1)
	if !ok || since.Before(before) {
		t.Fatalf("after the peer closed a connection with a request waiting: lost %v since %v (closed at %v)", ok, since, before)
	}
	// The redial is refused: still lost, since the close. (Requests within the
	// reconnect backoff fail without a dial: wait for one that dials.)
	eventually(t, 5*time.Second, "a redial past the reconnect backoff", func() bool {
		_, err := c.Request(ctxT(t, time.Second), Broker(1), PurposeTxn, kmsg.NewPtrMetadataRequest())
		if err == nil {
			t.Fatal("a request to a closed listener was answered")
		}
		return !errors.Is(err, ErrBackoff)
	})
	if again, ok := c.Unreachable(1); !ok || !again.Equal(since) {
		t.Fatalf("after a refused dial: lost %v since %v, want since %v", ok, again, since)
	}

	// The broker comes back on the same address: the next dial clears the mark.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the address was taken meanwhile: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	serveRawPeer(&rawPeer{ln: ln}, func(c net.Conn, corr int32, frame []byte) bool {
		respondRaw(c, frame, kmsg.NewPtrMetadataResponse())
		return false // then close the connection, with nothing waiting on it
	})
	eventually(t, 5*time.Second, "the broker reached again", func() bool {
		c.Request(ctxT(t, time.Second), Broker(1), PurposeTxn, kmsg.NewPtrMetadataRequest())
		_, lost := c.Unreachable(1)
		return !lost
	})
	// The broker closed that connection after answering, with nothing waiting: not
	// lost, however long the client has had to see the close (sampled for 100 ms).
	for range 10 {
		if _, ok := c.Unreachable(1); ok {
			t.Fatal("lost after an idle close")
		}
		time.Sleep(10 * time.Millisecond) // sampling a state that must not change
	}
}

// TestVoterLost: a voter whose process dies while a request waits on its connection
// (the peer closes it, its listener is gone) is lost in its voter role from the
// close on — the controller quorum's follower of a killed leader starts its
// election early on it — and not in its broker role; a dial that reaches it again
// clears it.
func TestVoterLost(t *testing.T) {
	conns := make(chan net.Conn, 4)
	rp := startRawPeer(t, func(c net.Conn, corr int32, frame []byte) bool {
		conns <- c // never answered: the test closes the connection
		return true
	})
	addr := rp.addr()
	c := newTestClient(t, Config{NodeID: 2, Voters: map[int32]string{1: addr}})
	tr := c.RaftTransport()
	if _, ok := tr.VoterLost(1); ok {
		t.Fatal("lost before any connection")
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeHeartbeat, kmsg.NewPtrMetadataRequest())
		errc <- err
	}()
	pc := <-conns
	before := time.Now()
	rp.ln.Close()
	pc.Close()
	if err := <-errc; err == nil {
		t.Fatal("the request was answered")
	}
	since, ok := tr.VoterLost(1)
	if !ok || since.Before(before) {
		t.Fatalf("after the voter closed a connection with a request waiting: lost %v since %v (closed at %v)", ok, since, before)
	}
	if _, ok := c.Unreachable(1); ok {
		t.Fatal("the loss of a voter marked the broker of the same id lost")
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the address was taken meanwhile: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	serveRawPeer(&rawPeer{ln: ln}, func(c net.Conn, corr int32, frame []byte) bool {
		respondRaw(c, frame, kmsg.NewPtrMetadataResponse())
		return true
	})
	eventually(t, 5*time.Second, "the voter reached again", func() bool {
		c.Request(ctxT(t, time.Second), Voter(1), PurposeHeartbeat, kmsg.NewPtrMetadataRequest())
		_, lost := tr.VoterLost(1)
		return !lost
	})
}
