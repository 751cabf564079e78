package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
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
}

func (h *testHandler) ConnOpened(Conn) { h.opened.Add(1) }
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

func startStd(t *testing.T, cfg Config) (*Std, *testHandler, string) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("0123456789")
	t.Cleanup(func() { f.Close() })
	h := &testHandler{file: f}
	s := NewStd(cfg, h, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return s, h, ln.Addr().String()
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

func TestStdOrderedAnswers(t *testing.T) {
	_, h, addr := startStd(t, Config{})
	c := dial(t, addr)
	send(t, c, "d1")
	send(t, c, "n2")
	send(t, c, "e3")
	send(t, c, "d4")
	send(t, c, "e5")
	waitFor(t, "deferred requests", func() bool { return h.numDeferred() == 2 })
	h.releaseDeferred() // answers d4 before d1
	for _, want := range []string{"d1", "e3", "d4", "e5"} {
		if got := recv(t, c); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func TestStdSendfileExplicitOffset(t *testing.T) {
	_, h, addr := startStd(t, Config{})
	if _, err := h.file.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	send(t, c, "f")
	send(t, c, "f")
	for range 2 {
		if got := recv(t, c); got != "hdr23456end" {
			t.Fatalf("got %q", got)
		}
	}
	if pos, _ := h.file.Seek(0, io.SeekCurrent); pos != 7 {
		t.Fatalf("file position moved to %d", pos)
	}
}

func TestStdCloseAnswerFlushesEarlier(t *testing.T) {
	_, _, addr := startStd(t, Config{})
	c := dial(t, addr)
	send(t, c, "e1")
	send(t, c, "c")
	send(t, c, "e2")
	if got := recv(t, c); got != "e1" {
		t.Fatalf("got %q", got)
	}
	expectClosed(t, c)
}

func TestStdBadSizesCloseBeforeAllocating(t *testing.T) {
	_, _, addr := startStd(t, Config{MaxRequestBytes: 1 << 10})
	for _, size := range []int32{-1, -1 << 31, 1<<10 + 1, 1<<31 - 1} {
		c := dial(t, addr)
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(size))
		c.Write(b[:])
		expectClosed(t, c)
	}
	good := dial(t, addr)
	send(t, good, "eok")
	if got := recv(t, good); got != "eok" {
		t.Fatalf("got %q", got)
	}
}

func TestStdTruncatedFrameThenClose(t *testing.T) {
	_, h, addr := startStd(t, Config{})
	c := dial(t, addr)
	c.Write([]byte{0, 0, 0, 100, 'e', 'x'})
	c.Close()
	good := dial(t, addr)
	send(t, good, "eok")
	if got := recv(t, good); got != "eok" {
		t.Fatalf("got %q", got)
	}
	if n := h.served.Load(); n != 1 {
		t.Fatalf("served %d requests, want 1", n)
	}
}

func TestStdIdleTimeout(t *testing.T) {
	_, h, addr := startStd(t, Config{IdleTimeout: 50 * time.Millisecond})
	c := dial(t, addr)
	send(t, c, "d1") // an owed answer keeps the connection open past the idle time
	waitFor(t, "deferred", func() bool { return h.numDeferred() == 1 })
	// Let four idle periods pass: the connection must survive them (not a wait for a
	// condition, the absence of one).
	<-time.After(200 * time.Millisecond)
	h.releaseDeferred()
	if got := recv(t, c); got != "d1" {
		t.Fatalf("got %q", got)
	}
	expectClosed(t, c) // then idle: closed
}

func TestStdBackPressureInFlight(t *testing.T) {
	_, h, addr := startStd(t, Config{MaxInFlight: 2})
	c := dial(t, addr)
	for i := range 6 {
		send(t, c, "d"+string(rune('0'+i)))
	}
	got := 0
	for got < 6 {
		waitFor(t, "deferred", func() bool { return h.numDeferred() > 0 })
		got += h.releaseDeferred()
	}
	for i := range 6 {
		if r := recv(t, c); r != "d"+string(rune('0'+i)) {
			t.Fatalf("got %q", r)
		}
	}
	if m := h.maxOut.Load(); m > 2 {
		t.Fatalf("%d requests were outstanding at once; MaxInFlight is 2", m)
	}
}

func TestStdBackPressureQueuedBytes(t *testing.T) {
	_, h, addr := startStd(t, Config{MaxQueuedBytes: 1})
	c := dial(t, addr)
	big := "e" + string(bytes.Repeat([]byte("x"), 1<<20))
	for range 4 {
		send(t, c, big)
	}
	// Nobody reads yet, so unwritten answers exceed the bound and reading pauses until
	// the client drains them; the answers must still arrive intact and in order.
	for range 4 {
		if got := recv(t, c); got != big {
			t.Fatalf("bad answer of %d bytes", len(got))
		}
	}
	if h.served.Load() != 4 {
		t.Fatal("not all served")
	}
}

func TestStdGracefulShutdown(t *testing.T) {
	before := runtime.NumGoroutine()
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := &testHandler{file: f}
	s := NewStd(Config{}, h, nil)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	c := dial(t, ln.Addr().String())
	idle := dial(t, ln.Addr().String())
	send(t, c, "d1")
	waitFor(t, "deferred", func() bool { return h.numDeferred() == 1 })
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	waitFor(t, "idle conn closed", func() bool { return h.closed.Load() == 1 })
	h.releaseDeferred()
	if got := recv(t, c); got != "d1" {
		t.Fatalf("got %q", got)
	}
	expectClosed(t, c)
	expectClosed(t, idle)
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if h.released.Load() != h.responded.Load() {
		t.Fatalf("released %d of %d responses", h.released.Load(), h.responded.Load())
	}
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}

func TestStdShutdownDeadlineDropsAndReleases(t *testing.T) {
	s, h, addr := startStd(t, Config{})
	c := dial(t, addr)
	send(t, c, "d1")
	send(t, c, "e2")
	waitFor(t, "served", func() bool { return h.served.Load() == 2 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v", err)
	}
	expectClosed(t, c)
	h.releaseDeferred() // answered after the close: released, not written
	if h.released.Load() != 2 {
		t.Fatalf("released %d, want 2", h.released.Load())
	}
}

func TestTicketDoubleAnswerReleased(t *testing.T) {
	_, h, addr := startStd(t, Config{})
	c := dial(t, addr)
	send(t, c, "d1")
	waitFor(t, "deferred", func() bool { return h.numDeferred() == 1 })
	h.mu.Lock()
	r := h.deferred[0]
	h.mu.Unlock()
	h.releaseDeferred()
	var extra atomic.Int64
	r.Ticket.Respond(Response{Chunks: []Chunk{{Bytes: []byte("again")}}, Release: ReleaseFunc(func() { extra.Add(1) })})
	if extra.Load() != 1 {
		t.Fatal("second answer was not released")
	}
	if got := recv(t, c); got != "d1" {
		t.Fatalf("got %q", got)
	}
}
