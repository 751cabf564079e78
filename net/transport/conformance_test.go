package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The conformance suite: every case runs against every transport (Std, Std over TLS,
// the reactor with a worker pool, the reactor serving on its loops, the reactor with
// loops not locked to OS threads), through real loopback TCP,
// with the testHandler of std_test.go.

// servedTransport is what the suite needs of a transport.
type servedTransport interface {
	Transport
	NumConns() int
}

type transportKind struct {
	name string
	make func(cfg Config, h Handler) (servedTransport, error)
	// tls is the client side of a kind that serves TLS (nil: plaintext).
	tls *tls.Config
}

// dialConn connects to a transport of kind k (a TLS client, handshake done, for TLS
// kinds).
func (k transportKind) dialConn(addr string) (net.Conn, error) {
	if k.tls == nil {
		return net.Dial("tcp", addr)
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, k.tls)
}

// dial is dialConn for tests: the connection closes at cleanup and has a 10s deadline.
func (k transportKind) dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := k.dialConn(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func transportKinds() []transportKind {
	srvTLS, cliTLS := conformancePKI()
	kinds := []transportKind{{name: "std", make: func(cfg Config, h Handler) (servedTransport, error) {
		return NewStd(cfg, h, nil), nil
	}}, {name: "std-inline", make: func(cfg Config, h Handler) (servedTransport, error) {
		cfg.InlineWrites = true
		return NewStd(cfg, h, nil), nil
	}}, {name: "std-tls", make: func(cfg Config, h Handler) (servedTransport, error) {
		return tlsServed{NewStd(cfg, h, nil), srvTLS}, nil
	}, tls: cliTLS}}
	if runtime.GOOS == "linux" {
		kinds = append(kinds,
			transportKind{name: "reactor", make: func(cfg Config, h Handler) (servedTransport, error) {
				return NewReactor(ReactorConfig{Config: cfg, Loops: 2, Workers: 4}, h, nil)
			}},
			transportKind{name: "reactor-onloop", make: func(cfg Config, h Handler) (servedTransport, error) {
				return NewReactor(ReactorConfig{Config: cfg, Loops: 2, ServeOnLoop: true}, h, nil)
			}},
			transportKind{name: "reactor-unlocked", make: func(cfg Config, h Handler) (servedTransport, error) {
				return NewReactor(ReactorConfig{Config: cfg, Loops: 2, Workers: 4, UnlockedLoops: true}, h, nil)
			}})
	}
	return kinds
}

// forEachTransport runs f as a subtest per transport kind.
func forEachTransport(t *testing.T, f func(t *testing.T, k transportKind)) {
	for _, k := range transportKinds() {
		t.Run(k.name, func(t *testing.T) { f(t, k) })
	}
}

// testFile is a 10-byte "segment" for sendfile answers.
func testFile(t testing.TB, content []byte) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// confHandler adds answers to testHandler's:
//
//	'b'  bigAnswer bytes from memory
//	'F'  "big" + the whole of bigFile (sendfile)
//	'V'  "big" + bigAnswer as two chunks + the whole of bigFile + "end": records read
//	     from remote storage (chunks in memory) beside a file range, in one answer
//	'L'  lift the connection's request size limit (SetMaxRequestBytes 0), then echo
type confHandler struct {
	*testHandler
	bigAnswer []byte
	bigFile   *os.File
}

func (h *confHandler) Serve(r Request) {
	if len(r.Frame) > 0 {
		switch r.Frame[0] {
		case 'b':
			h.served.Add(1)
			h.outstand.Add(1)
			h.respond(r, Chunk{Bytes: h.bigAnswer})
			return
		case 'L':
			SetMaxRequestBytes(r.Conn, 0)
			h.served.Add(1)
			h.outstand.Add(1)
			h.respond(r, Chunk{Bytes: append([]byte(nil), r.Frame...)})
			return
		case 'F':
			h.served.Add(1)
			h.outstand.Add(1)
			st, err := h.bigFile.Stat()
			if err != nil {
				r.Ticket.CloseConn()
				return
			}
			h.respond(r, Chunk{Bytes: []byte("big")}, Chunk{File: h.bigFile, Length: st.Size()})
			return
		case 'V':
			h.served.Add(1)
			h.outstand.Add(1)
			st, err := h.bigFile.Stat()
			if err != nil {
				r.Ticket.CloseConn()
				return
			}
			half := len(h.bigAnswer) / 2
			h.respond(r, Chunk{Bytes: []byte("big")}, Chunk{Bytes: h.bigAnswer[:half]}, Chunk{Bytes: h.bigAnswer[half:]},
				Chunk{File: h.bigFile, Length: st.Size()}, Chunk{Bytes: []byte("end")})
			return
		}
	}
	h.testHandler.Serve(r)
}

// start serves a confHandler with a transport of kind k on a loopback listener. At
// cleanup it shuts down and checks invariant 3 (every response released once).
func (k transportKind) start(t *testing.T, cfg Config, setup ...func(*confHandler)) (servedTransport, *confHandler, string) {
	t.Helper()
	h := &confHandler{testHandler: &testHandler{file: testFile(t, []byte("0123456789"))}}
	for _, f := range setup {
		f(h)
	}
	s, err := k.make(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
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
		h.releaseDeferred()
		if r, a := h.released.Load(), h.responded.Load(); r != a {
			t.Errorf("released %d of %d responses", r, a)
		}
		if o, c := h.opened.Load(), h.closed.Load(); o != c {
			t.Errorf("%d connections opened, %d closed", o, c)
		}
	})
	return s, h, ln.Addr().String()
}

func TestConformanceOrderedAnswers(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, h, addr := k.start(t, Config{})
		c := k.dial(t, addr)
		for _, p := range []string{"d1", "n2", "e3", "d4", "e5"} {
			send(t, c, p)
		}
		waitFor(t, "deferred requests", func() bool { return h.numDeferred() == 2 })
		h.releaseDeferred() // answers d4 before d1
		for _, want := range []string{"d1", "e3", "d4", "e5"} {
			if got := recv(t, c); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
	})
}

func TestConformanceSendfileExplicitOffset(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, h, addr := k.start(t, Config{})
		if _, err := h.file.Seek(7, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		c := k.dial(t, addr)
		send(t, c, "f")
		send(t, c, "e1")
		send(t, c, "f")
		for _, want := range []string{"hdr23456end", "e1", "hdr23456end"} {
			if got := recv(t, c); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
		if pos, _ := h.file.Seek(0, io.SeekCurrent); pos != 7 {
			t.Fatalf("file position moved to %d", pos)
		}
	})
}

func TestConformanceCloseAnswerFlushesEarlier(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, _, addr := k.start(t, Config{})
		c := k.dial(t, addr)
		send(t, c, "e1")
		send(t, c, "c")
		send(t, c, "e2")
		if got := recv(t, c); got != "e1" {
			t.Fatalf("got %q", got)
		}
		expectClosed(t, c)
	})
}

func TestConformanceBadSizesCloseBeforeAllocating(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, h, addr := k.start(t, Config{MaxRequestBytes: 1 << 10})
		for _, size := range []int32{-1, -1 << 31, 1<<10 + 1, 1<<31 - 1} {
			c := k.dial(t, addr)
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(size))
			c.Write(b[:])
			expectClosed(t, c)
		}
		good := k.dial(t, addr)
		send(t, good, "eok")
		if got := recv(t, good); got != "eok" {
			t.Fatalf("got %q", got)
		}
		if n := h.served.Load(); n != 1 {
			t.Fatalf("served %d requests, want 1", n)
		}
	})
}

// SetMaxRequestBytes lowers a connection's limit (as the SASL handler does before
// authentication) and lifts it again; other connections keep the configured one.
func TestConformanceSetMaxRequestBytes(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		var first atomic.Bool
		_, h, addr := k.start(t, Config{MaxRequestBytes: 1 << 10}, func(h *confHandler) {
			h.onOpen = func(c Conn) {
				if !first.Swap(true) && !SetMaxRequestBytes(c, 8) {
					panic("SetMaxRequestBytes not supported")
				}
			}
		})
		c := k.dial(t, addr)
		send(t, c, "e1234567") // 8 bytes: at the limit
		if got := recv(t, c); got != "e1234567" {
			t.Fatalf("got %q", got)
		}
		send(t, c, "L1234567") // lifts the limit
		if got := recv(t, c); got != "L1234567" {
			t.Fatalf("got %q", got)
		}
		big := "e" + strings.Repeat("x", 512)
		send(t, c, big)
		if got := recv(t, c); got != big {
			t.Fatal("a lifted limit still refused the request")
		}
		limited := k.dial(t, addr)
		send(t, limited, big) // another connection: the configured 1 KiB limit
		if got := recv(t, limited); got != big {
			t.Fatal("the configured limit is not the connection's")
		}
		if h.served.Load() != 4 {
			t.Fatalf("served %d", h.served.Load())
		}
		first.Store(false)
		lowered := k.dial(t, addr)
		send(t, lowered, "e12345678") // 9 bytes over a limit of 8: closed before allocating
		expectClosed(t, lowered)
		if SetMaxRequestBytes(nil, 1) {
			t.Fatal("SetMaxRequestBytes of a nil Conn")
		}
	})
}

func TestConformanceTruncatedFrameThenClose(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		s, h, addr := k.start(t, Config{})
		c := k.dial(t, addr)
		c.Write([]byte{0, 0, 0, 100, 'e', 'x'})
		c.Close()
		good := k.dial(t, addr)
		send(t, good, "eok")
		if got := recv(t, good); got != "eok" {
			t.Fatalf("got %q", got)
		}
		waitFor(t, "the truncated connection to close", func() bool { return s.NumConns() == 1 })
		if n := h.served.Load(); n != 1 {
			t.Fatalf("served %d requests, want 1", n)
		}
	})
}

// A client that sends half a frame and stalls is closed after the idle timeout; the
// others are served meanwhile.
func TestConformanceHalfFrameStalls(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, h, addr := k.start(t, Config{IdleTimeout: 300 * time.Millisecond})
		stalled := k.dial(t, addr)
		stalled.Write([]byte{0, 0, 0, 10, 'e', 'x', 'y'})
		other := k.dial(t, addr)
		for range 5 {
			send(t, other, "eok")
			if got := recv(t, other); got != "eok" {
				t.Fatalf("got %q", got)
			}
		}
		start := time.Now()
		expectClosed(t, stalled)
		if time.Since(start) > 5*time.Second {
			t.Fatal("stalled connection closed late")
		}
		if n := h.served.Load(); n != 5 {
			t.Fatalf("served %d, want 5", n)
		}
	})
}

func TestConformanceIdleTimeout(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, h, addr := k.start(t, Config{IdleTimeout: 50 * time.Millisecond})
		c := k.dial(t, addr)
		send(t, c, "d1") // an owed answer keeps the connection open past the idle time
		waitFor(t, "deferred", func() bool { return h.numDeferred() == 1 })
		// Let four idle periods pass: the connection must survive them (not a wait for
		// a condition, the absence of one).
		<-time.After(200 * time.Millisecond)
		h.releaseDeferred()
		if got := recv(t, c); got != "d1" {
			t.Fatalf("got %q", got)
		}
		expectClosed(t, c) // then idle: closed
	})
}

func TestConformanceBackPressureInFlight(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, h, addr := k.start(t, Config{MaxInFlight: 2})
		c := k.dial(t, addr)
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
	})
}

func TestConformanceBackPressureQueuedBytes(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, h, addr := k.start(t, Config{MaxQueuedBytes: 1})
		c := k.dial(t, addr)
		big := "e" + string(bytes.Repeat([]byte("x"), 1<<20))
		go func() {
			for range 4 {
				b := binary.BigEndian.AppendUint32(nil, uint32(len(big)))
				if _, err := c.Write(append(b, big...)); err != nil {
					return
				}
			}
		}()
		for range 4 {
			if got := recv(t, c); got != big {
				t.Fatalf("bad answer of %d bytes", len(got))
			}
		}
		if h.served.Load() != 4 {
			t.Fatal("not all served")
		}
	})
}

// A client that sends requests and never reads the answers: the transport stops
// reading its requests once the unwritten answers exceed MaxQueuedBytes, so the
// broker's memory stays bounded, and other connections are served meanwhile.
func TestConformanceSlowReaderBounded(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		const answer = 256 << 10
		cfg := Config{MaxQueuedBytes: 1 << 20, WriteTimeout: 30 * time.Second}
		_, h, addr := k.start(t, cfg, func(h *confHandler) { h.bigAnswer = make([]byte, answer) })
		slow := k.dial(t, addr)
		if tc, ok := slow.(*net.TCPConn); ok {
			tc.SetReadBuffer(16 << 10)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // keeps sending requests for big answers, never reads
			defer wg.Done()
			frame := binary.BigEndian.AppendUint32(nil, 1)
			frame = append(frame, 'b')
			for {
				select {
				case <-stop:
					return
				default:
				}
				slow.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
				slow.Write(frame)
			}
		}()
		// The served count must level off: at most MaxQueuedBytes of answers (plus what
		// the socket buffers hold) are queued before reading stops.
		var last int64 = -1
		waitFor(t, "reading to stop", func() bool {
			n := h.served.Load()
			if n == last && n > 0 {
				return true
			}
			last = n
			time.Sleep(100 * time.Millisecond) // a sampling period, not a wait for a condition
			return false
		})
		other := k.dial(t, addr)
		send(t, other, "eok")
		if got := recv(t, other); got != "eok" {
			t.Fatalf("got %q", got)
		}
		close(stop)
		wg.Wait()
		// Socket buffers on loopback can hold a few MiB; the bound is on the transport.
		if n := h.served.Load() - 1; n*answer > 64<<20 {
			t.Fatalf("served %d answers of %d bytes to a client that never reads", n, answer)
		}
		if tc, ok := slow.(*tls.Conn); ok {
			tc.NetConn().Close() // tls.Conn.Close would wait 5s to send close_notify into a full socket
		} else {
			slow.Close()
		}
	})
}

// Many connections at once, each pipelining requests whose answers the handler gives
// out of order from other goroutines: every answer arrives, intact and in order.
func TestConformancePipelinedManyConns(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, h, addr := k.start(t, Config{MaxInFlight: 8})
		stop := make(chan struct{})
		defer close(stop)
		go func() { // answers deferred requests in bursts, last first
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
					h.releaseDeferred()
				}
			}
		}()
		const conns, reqs = 16, 200
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := k.dialConn(addr)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				rng := rand.New(rand.NewPCG(uint64(i), 1))
				want := make(chan string, reqs)
				go func() {
					var out []byte
					for j := range reqs {
						kind := "edn"[rng.IntN(3)]
						p := fmt.Sprintf("%c%d-%d-%s", kind, i, j, bytes.Repeat([]byte("z"), rng.IntN(3000)))
						out = binary.BigEndian.AppendUint32(out[:0], uint32(len(p)))
						out = append(out, p...)
						if _, err := c.Write(out); err != nil {
							return
						}
						if kind != 'n' {
							want <- p
						}
					}
					close(want)
				}()
				for w := range want {
					var hdr [4]byte
					if _, err := io.ReadFull(c, hdr[:]); err != nil {
						errs <- err
						return
					}
					b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
					if _, err := io.ReadFull(c, b); err != nil {
						errs <- err
						return
					}
					if string(b) != w {
						errs <- fmt.Errorf("conn %d: got %.20q, want %.20q", i, b, w)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// A response larger than the socket buffers, from memory and from a file: written in
// pieces as the client drains it (EAGAIN, then EPOLLOUT for the reactor).
func TestConformanceLargeResponses(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		content := make([]byte, 24<<20)
		for i := range content {
			content[i] = byte(i * 7)
		}
		_, _, addr := k.start(t, Config{}, func(h *confHandler) { h.bigFile = testFile(t, content) })
		c := k.dial(t, addr)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		send(t, c, "F") // "F": the whole big file after a 3-byte header
		send(t, c, "e-between")
		send(t, c, "F")
		for _, want := range []string{"F", "e-between", "F"} {
			got := recv(t, c)
			if want == "F" {
				if len(got) != 3+len(content) || got[:3] != "big" || got[3:] != string(content) {
					t.Fatalf("big file answer of %d bytes is wrong", len(got))
				}
				continue
			}
			if got != want {
				t.Fatalf("got %q", got)
			}
		}
	})
}

// Byte chunks larger than the socket buffers one after the other, then a file range
// and bytes, in one answer (a Fetch answer of records read from remote storage beside
// a local partition's): each written from where it lies, in pieces as the client
// drains them.
func TestConformanceLargeByteChunksBesideFile(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		mem, file := make([]byte, 12<<20+5), make([]byte, 6<<20)
		for i := range mem {
			mem[i] = byte(i * 13)
		}
		for i := range file {
			file[i] = byte(i * 7)
		}
		_, _, addr := k.start(t, Config{}, func(h *confHandler) { h.bigAnswer, h.bigFile = mem, testFile(t, file) })
		c := k.dial(t, addr)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		send(t, c, "V")
		send(t, c, "e-between")
		send(t, c, "V")
		want := "big" + string(mem) + string(file) + "end"
		for _, w := range []string{want, "e-between", want} {
			if got := recv(t, c); got != w {
				t.Fatalf("an answer of %d bytes, want %d (%q...)", len(got), len(w), got[:min(len(got), 16)])
			}
		}
	})
}

// Conn.Close from the handler drops unwritten answers and releases them.
func TestConformanceConnCloseDropsAndReleases(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		s, h, addr := k.start(t, Config{})
		c := k.dial(t, addr)
		send(t, c, "d1")
		send(t, c, "d2")
		waitFor(t, "deferred", func() bool { return h.numDeferred() == 2 })
		h.mu.Lock()
		conn := h.deferred[0].Conn
		h.mu.Unlock()
		conn.Close()
		expectClosed(t, c)
		h.releaseDeferred()
		waitFor(t, "the connection to go", func() bool { return s.NumConns() == 0 })
		if h.released.Load() != 2 {
			t.Fatalf("released %d, want 2", h.released.Load())
		}
	})
}

func TestConformanceGracefulShutdown(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		before := runtime.NumGoroutine()
		h := &testHandler{file: testFile(t, []byte("0123456789"))}
		s, err := k.make(Config{}, h)
		if err != nil {
			t.Fatal(err)
		}
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		served := make(chan error, 1)
		go func() { served <- s.Serve(ln) }()
		c := k.dial(t, ln.Addr().String())
		idle := k.dial(t, ln.Addr().String())
		send(t, c, "d1")
		waitFor(t, "deferred", func() bool { return h.numDeferred() == 1 })
		waitFor(t, "both connections", func() bool { return h.opened.Load() == 2 })
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
		if err := s.Serve(ln); !errors.Is(err, ErrClosed) {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	})
}

func TestConformanceShutdownDeadlineDropsAndReleases(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		s, h, addr := k.start(t, Config{})
		c := k.dial(t, addr)
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
	})
}

func TestConformanceDoubleAnswerReleased(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, h, addr := k.start(t, Config{})
		c := k.dial(t, addr)
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
	})
}

// Connections opened and closed by the thousand, some mid-request: none is leaked.
func TestConformanceManyConnections(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		n := 2000
		if testing.Short() || k.tls != nil { // TLS: a handshake each, expensive under -race
			n = 300
		}
		s, h, addr := k.start(t, Config{})
		fdsBefore := openFDs(t)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		var failed atomic.Int64
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				c, err := k.dialConn(addr)
				if err != nil {
					failed.Add(1)
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				switch i % 3 {
				case 0: // a full round trip
					b := binary.BigEndian.AppendUint32(nil, 3)
					c.Write(append(b, "eok"...))
					var r [7]byte
					if _, err := io.ReadFull(c, r[:]); err != nil || string(r[4:]) != "eok" {
						failed.Add(1)
					}
				case 1: // a deferred request left unanswered at close
					b := binary.BigEndian.AppendUint32(nil, 2)
					c.Write(append(b, "dx"...))
				case 2: // nothing at all
				}
			}()
		}
		wg.Wait()
		if f := failed.Load(); f != 0 {
			t.Fatalf("%d of %d connections failed", f, n)
		}
		// A connection its client closed before the server accepted it is still in
		// the listen backlog when the dials return: wait for it to be opened too.
		waitFor(t, "every connection to be opened and closed", func() bool {
			return h.opened.Load() == int64(n) && s.NumConns() == 0
		})
		h.releaseDeferred()
		if o, c := h.opened.Load(), h.closed.Load(); o != int64(n) || c != int64(n) {
			t.Fatalf("opened %d, closed %d, want %d", o, c, n)
		}
		if fdsBefore >= 0 {
			waitFor(t, "descriptors to be closed", func() bool { return openFDs(t) <= fdsBefore })
		}
	})
}

// openFDs counts the process's open descriptors (-1 where /proc is missing).
func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// A client that closes its connection during a drain, with an answer still owed to it
// (a parked long poll), does not hold the drain until that answer comes due: Shutdown
// returns while the request is still unanswered, and the late answer is released.
// Both transports go on reading a draining connection, discarding, to see its peer go.
func TestConformanceShutdownPeerGoneDuringDrain(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		s, h, addr := k.start(t, Config{})
		c := k.dial(t, addr)
		send(t, c, "d1")
		waitFor(t, "deferred", func() bool { return h.numDeferred() == 1 })
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(context.Background()) }()
		waitListenerClosed(t, addr) // the drain has begun (or is about to): not a close before it
		c.Close()
		shutdownWithoutTheOwedAnswer(t, shut, h)
		if h.numDeferred() != 1 {
			t.Fatalf("%d deferred, want the unanswered request still there", h.numDeferred())
		}
		h.releaseDeferred()
		waitFor(t, "the late answer released", func() bool { return h.released.Load() == h.responded.Load() })
	})
}

// A client that goes on sending during a drain, in the middle of a frame, and then
// closes is seen to go as well: what it sends is discarded, not read as requests (the
// reactor discards a bounded amount per loop turn and comes back for the rest), and
// Shutdown returns while the answer owed to it is still unanswered.
func TestConformanceShutdownPeerSendsThenGoesDuringDrain(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		s, h, addr := k.start(t, Config{})
		c := k.dial(t, addr)
		send(t, c, "d1")
		waitFor(t, "deferred", func() bool { return h.numDeferred() == 1 })
		// A frame claiming 64 MiB, of which 8 MiB follow: it is being read when the
		// drain begins, and never completes.
		if _, err := c.Write(binary.BigEndian.AppendUint32(nil, 64<<20)); err != nil {
			t.Fatal(err)
		}
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(context.Background()) }()
		waitListenerClosed(t, addr)
		chunk := make([]byte, 64<<10)
		for range 128 {
			if _, err := c.Write(chunk); err != nil {
				t.Fatalf("writing during the drain: %v", err)
			}
		}
		c.Close()
		shutdownWithoutTheOwedAnswer(t, shut, h)
		if h.numDeferred() != 1 || h.served.Load() != 1 {
			t.Fatalf("%d deferred, %d served; want the one unanswered request and nothing else served", h.numDeferred(), h.served.Load())
		}
		h.releaseDeferred()
		waitFor(t, "the late answer released", func() bool { return h.released.Load() == h.responded.Load() })
	})
}

// shutdownWithoutTheOwedAnswer waits for the Shutdown of shut to return while h still
// owes its answer to a connection whose client closed.
func shutdownWithoutTheOwedAnswer(t *testing.T, shut <-chan error, h *confHandler) {
	t.Helper()
	select {
	case err := <-shut:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		h.releaseDeferred()
		t.Fatalf("Shutdown waited for the answer owed to a connection its client closed")
	}
}

// waitListenerClosed waits until addr refuses connections: Shutdown closed its listener,
// which it does just before the connections start draining.
func waitListenerClosed(t *testing.T, addr string) {
	t.Helper()
	waitFor(t, "the listener closed", func() bool {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
}

// TestConformanceFramesCutAnywhere: one stream of requests of sizes around the read
// buffer's (1 B to 3x readBufSize), written in pieces cut at random points (a byte,
// a piece of a size prefix, many requests at once), with pauses that leave a piece
// alone in the socket: every request is framed whole and answered in order.
func TestConformanceFramesCutAnywhere(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		_, _, addr := k.start(t, Config{MaxInFlight: 64})
		c := k.dial(t, addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		rng := rand.New(rand.NewPCG(7, 1))
		sizes := []int{1, 3, 4, 5, readBufSize/2 - 5, readBufSize/2 - 4, readBufSize / 2, readBufSize - 4, readBufSize, readBufSize + 1, 3 * readBufSize}
		const reqs = 300
		var stream []byte
		var want []string
		for j := range reqs {
			n := sizes[rng.IntN(len(sizes))]
			if rng.IntN(2) == 0 {
				n = 1 + rng.IntN(3*readBufSize)
			}
			p := []byte(fmt.Sprintf("e%d-", j))
			for len(p) < n {
				p = append(p, byte('a'+len(p)%26))
			}
			p = p[:max(n, len(fmt.Sprintf("e%d-", j)))]
			stream = binary.BigEndian.AppendUint32(stream, uint32(len(p)))
			stream = append(stream, p...)
			want = append(want, string(p))
		}
		go func() {
			for len(stream) > 0 {
				cut := 1 + rng.IntN(min(len(stream), []int{1, 3, 7, 100, 5000, 40000}[rng.IntN(6)]))
				if _, err := c.Write(stream[:cut]); err != nil {
					return
				}
				stream = stream[cut:]
				if rng.IntN(20) == 0 {
					time.Sleep(time.Millisecond) // pacing: the piece arrives alone, not a wait for a condition
				}
			}
		}()
		for j, w := range want {
			if got := recv(t, c); got != w {
				t.Fatalf("answer %d: %d bytes %.20q, want %d bytes %.20q", j, len(got), got, len(w), w)
			}
		}
	})
}
