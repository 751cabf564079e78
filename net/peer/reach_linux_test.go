package peer

import (
	"net"
	"testing"
	"time"
)

// TestClosedByPeer: a connection whose peer closed it reads as closed from its TCP
// state before anything reads it; an open one does not.
func TestClosedByPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sc := <-accepted
	if closedByPeer(nc) {
		t.Fatal("an open connection reads as closed")
	}
	sc.Close()
	eventually(t, time.Second, "the peer's close in the TCP state", func() bool { return closedByPeer(nc) })
}
