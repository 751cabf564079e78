package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func startReactor(t *testing.T, cfg ReactorConfig, h Handler) (*Reactor, string) {
	t.Helper()
	r, err := NewReactor(cfg, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return r, ln.Addr().String()
}

// The steady-state read/dispatch/write path allocates nothing per request: pipelined
// round trips with a handler that allocates nothing either.
func TestReactorAllocsPerRequest(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation count is meaningless under -race; long under -short")
	}
	for _, onLoop := range []bool{false, true} {
		_, addr := startReactor(t, ReactorConfig{Loops: 1, ServeOnLoop: onLoop}, newStaticHandler(100, nil))
		c := dial(t, addr)
		frame := binary.BigEndian.AppendUint32(nil, 100)
		frame = append(frame, make([]byte, 100)...)
		buf := make([]byte, 104)
		roundTrips := func(n int) {
			go func() {
				for range n {
					c.Write(frame)
				}
			}()
			for range n {
				if _, err := io.ReadFull(c, buf); err != nil {
					t.Fatal(err)
				}
			}
		}
		roundTrips(2000) // warm the pools
		const n = 20000
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		roundTrips(n)
		runtime.ReadMemStats(&m1)
		per := float64(m1.Mallocs-m0.Mallocs) / n
		t.Logf("ServeOnLoop=%v: %.4f allocations per request (whole process)", onLoop, per)
		if per > 0.05 {
			t.Errorf("ServeOnLoop=%v: %.3f allocations per request", onLoop, per)
		}
	}
}

// A file range that is not in the page cache is read by a warmer, not by the loop,
// and the answer is still exact.
func TestReactorColdSendfileWarmedOffLoop(t *testing.T) {
	content := make([]byte, 8<<20)
	for i := range content {
		content[i] = byte(i*13 + i>>12)
	}
	f := testFile(t, content)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Skipf("fadvise: %v", err)
	}
	var l loop
	if l.cached(f, 0, 1) && l.cached(f, 4<<20, 1) {
		t.Skip("cannot evict the file from the page cache here (or RWF_NOWAIT unsupported)")
	}
	h := &confHandler{testHandler: &testHandler{}, bigFile: f}
	r, addr := startReactor(t, ReactorConfig{Loops: 1}, h)
	c := dial(t, addr)
	other := dial(t, addr)
	send(t, c, "F")
	send(t, other, "eok")
	if got := recv(t, other); got != "eok" {
		t.Fatalf("got %q", got)
	}
	got := recv(t, c)
	if got[:3] != "big" || got[3:] != string(content) {
		t.Fatalf("cold answer of %d bytes is wrong", len(got))
	}
	if r.warms.Load() == 0 {
		t.Fatal("no range was warmed")
	}
}

// A TLS listener is refused: TLS goes to the standard transport.
func TestReactorRefusesTLS(t *testing.T) {
	r, err := NewReactor(ReactorConfig{Loops: 1}, &testHandler{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := tls.NewListener(ln, &tls.Config{})
	done := make(chan error, 1)
	go func() { done <- r.Serve(tl) }()
	c := dial(t, ln.Addr().String())
	defer c.Close()
	if err := <-done; !errors.Is(err, ErrUnsupportedConn) {
		t.Fatalf("Serve on TLS: %v", err)
	}
}

// Connections spread over the loops.
func TestReactorSpreadsConnections(t *testing.T) {
	r, addr := startReactor(t, ReactorConfig{Loops: 4}, &testHandler{})
	for range 8 {
		c := dial(t, addr)
		send(t, c, "eok")
		if got := recv(t, c); got != "eok" {
			t.Fatalf("got %q", got)
		}
	}
	for i, l := range r.loops {
		if n := l.nconns.Load(); n != 2 {
			t.Errorf("loop %d has %d connections, want 2", i, n)
		}
	}
}

func TestNewKinds(t *testing.T) {
	h := &testHandler{}
	if _, err := New("bogus", ReactorConfig{}, h, nil); err == nil {
		t.Fatal("unknown kind accepted")
	}
	tr, err := New(KindReactor, ReactorConfig{Loops: 1}, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.(*Reactor); !ok {
		t.Fatalf("New(reactor) = %T", tr)
	}
	tr.Shutdown(context.Background())
	if tr, _ := New(KindStd, ReactorConfig{}, h, nil); tr == nil {
		t.Fatal("New(std) failed")
	}
}
