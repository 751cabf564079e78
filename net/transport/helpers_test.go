package transport

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testHandler interprets the first payload byte:
//
//	'e' echo now   'd' defer (answered by release())   'n' no response   'c' close
//	'f' answer with "hdr" + bytes [2,7) of the test file (sendfile) + "end"
type testHandler struct {
	file      *os.File
	mu        sync.Mutex
	deferred  []Request
	served    atomic.Int64
	released  atomic.Int64
	responded atomic.Int64
	outstand  atomic.Int64
	maxOut    atomic.Int64
	opened    atomic.Int64
	closed    atomic.Int64
	onOpen    func(Conn) // set before the transport serves
}

func (h *testHandler) ConnOpened(c Conn) {
	h.opened.Add(1)
	if h.onOpen != nil {
		h.onOpen(c)
	}
}
func (h *testHandler) ConnClosed(Conn) { h.closed.Add(1) }

func (h *testHandler) respond(r Request, chunks ...Chunk) {
	h.responded.Add(1)
	h.outstand.Add(-1)
	r.Ticket.Respond(Response{Chunks: chunks, Release: ReleaseFunc(func() { h.released.Add(1) })})
}

func (h *testHandler) Serve(r Request) {
	h.served.Add(1)
	if o := h.outstand.Add(1); o > h.maxOut.Load() {
		h.maxOut.Store(o)
	}
	if len(r.Frame) == 0 {
		h.respond(r)
		return
	}
	switch r.Frame[0] {
	case 'e':
		h.respond(r, Chunk{Bytes: append([]byte(nil), r.Frame...)})
	case 'd':
		r.Frame = append([]byte(nil), r.Frame...)
		h.mu.Lock()
		h.deferred = append(h.deferred, r)
		h.mu.Unlock()
	case 'n':
		h.outstand.Add(-1)
		r.Ticket.NoResponse()
	case 'c':
		h.outstand.Add(-1)
		r.Ticket.CloseConn()
	case 'f':
		h.respond(r, Chunk{Bytes: []byte("hdr")}, Chunk{File: h.file, Offset: 2, Length: 5}, Chunk{Bytes: []byte("end")})
	}
}

// releaseDeferred answers every deferred request (echo), last first.
func (h *testHandler) releaseDeferred() int {
	h.mu.Lock()
	d := h.deferred
	h.deferred = nil
	h.mu.Unlock()
	for i := len(d) - 1; i >= 0; i-- {
		h.respond(d[i], Chunk{Bytes: d[i].Frame})
	}
	return len(d)
}

func (h *testHandler) numDeferred() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.deferred)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func send(t *testing.T, c net.Conn, payload string) {
	t.Helper()
	b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	if _, err := c.Write(append(b, payload...)); err != nil {
		t.Fatal(err)
	}
}

func recv(t *testing.T, c net.Conn) string {
	t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("reading response size: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return string(b)
}

func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	var b [1]byte
	if n, err := c.Read(b[:]); err == nil {
		t.Fatalf("connection still open: read %d bytes", n)
	} else if isTimeout(err) {
		t.Fatalf("connection not closed: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}
