package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// startNamed serves a testHandler with a transport of kind k on a loopback listener
// named name, with cfg. It shuts the transport down at cleanup.
func (k transportKind) startNamed(t *testing.T, cfg Config, name string, h Handler) (servedTransport, string) {
	t.Helper()
	s, err := k.make(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(NamedListener(ln, name)) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return s, ln.Addr().String()
}

// refusals counts a Limiter's refusals by reason.
type refusals struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusals) add(listener, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[listener+"/"+reason]++
}

func (r *refusals) get(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[key]
}

// echoOK checks that c is served.
func echoOK(t *testing.T, c net.Conn) {
	t.Helper()
	send(t, c, "eok")
	if got := recv(t, c); got != "eok" {
		t.Fatalf("got %q", got)
	}
}

// Connections over max.connections, a listener's max.connections or the per-IP
// limits are closed at accept, before the handler hears of them; a slot frees when
// its connection ends. Both transports (and Std over TLS) share one Limiter.
func TestConformanceConnLimits(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		var ref refusals
		lim := NewLimiter(ConnLimits{MaxConns: 3, MaxConnsPerIP: 100,
			Listeners: map[string]ListenerLimits{"EXT": {MaxConns: 2}, "INTERNAL": {Protected: true}}}, ref.add, nil)
		h := &testHandler{}
		cfg := Config{Limiter: lim}
		_, ext := k.startNamed(t, cfg, "EXT", h)
		_, other := k.startNamed(t, cfg, "OTHER", h)
		_, internal := k.startNamed(t, cfg, "INTERNAL", h)

		a, b := k.dial(t, ext), k.dial(t, ext)
		echoOK(t, a)
		echoOK(t, b)
		over := dial(t, ext) // raw TCP: the TLS handshake never starts
		expectClosed(t, over)
		if ref.get("EXT/"+RefusedListener) != 1 {
			t.Fatalf("refusals %v", ref.n)
		}
		c := k.dial(t, other) // the third of max.connections=3
		echoOK(t, c)
		expectClosed(t, dial(t, other))
		if ref.get("OTHER/"+RefusedBroker) != 1 {
			t.Fatalf("refusals %v", ref.n)
		}
		echoOK(t, k.dial(t, internal)) // protected: beside the broker-wide limit
		a.Close()
		waitFor(t, "the slot to free", func() bool { return lim.Open() == 3 })
		echoOK(t, k.dial(t, ext))
		if n := h.served.Load(); n != 5 {
			t.Fatalf("served %d", n)
		}
	})
}

func TestConformancePerIPLimit(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		var ref refusals
		over, err := ParseIPOverrides("127.0.0.1:2, [::2]:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		lim := NewLimiter(ConnLimits{MaxConnsPerIP: 1, PerIPOverrides: over}, ref.add, nil)
		_, addr := k.startNamed(t, Config{Limiter: lim}, "PLAINTEXT", &testHandler{})
		echoOK(t, k.dial(t, addr))
		echoOK(t, k.dial(t, addr)) // the override allows 127.0.0.1 two
		expectClosed(t, dial(t, addr))
		if ref.get("PLAINTEXT/"+RefusedPerIP) != 1 {
			t.Fatalf("refusals %v", ref.n)
		}
	})
}

// max.connection.creation.rate throttles the accept loop: every connection is served,
// later, and the throttling is counted. A per-IP connection_creation_rate of 0
// refuses the address.
func TestConformanceCreationRate(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		var ref refusals
		lim := NewLimiter(ConnLimits{MaxCreationRate: 50}, ref.add, nil)
		_, addr := k.startNamed(t, Config{Limiter: lim}, "PLAINTEXT", &testHandler{})
		// Raw TCP connects (no TLS handshake): the kernel completes them at once, far
		// faster than 50 a second, so the accept loop must hold some back.
		conns := make([]net.Conn, 60)
		for i := range conns {
			conns[i] = dial(t, addr)
		}
		waitFor(t, "every connection to be admitted", func() bool { return lim.Open() == len(conns) })
		if ref.get("PLAINTEXT/"+ThrottledCreation) == 0 {
			t.Fatalf("60 connections at once under a rate of 50/s were not throttled: %v", ref.n)
		}
		if k.tls == nil {
			echoOK(t, conns[len(conns)-1])
		}
		ipLim := NewLimiter(ConnLimits{IPCreationRate: func(ip string) (float64, bool) { return 0, ip == "127.0.0.1" }}, ref.add, nil)
		_, addr = k.startNamed(t, Config{Limiter: ipLim}, "X", &testHandler{})
		expectClosed(t, dial(t, addr))
		if ref.get("X/"+RefusedIPRate) != 1 {
			t.Fatalf("refusals %v", ref.n)
		}
	})
}

func TestParseIPOverrides(t *testing.T) {
	lookup := func(_ context.Context, host string) ([]string, error) {
		if host == "broker-a" {
			return []string{"10.0.0.1", "fd00::1"}, nil
		}
		return nil, errors.New("no such host")
	}
	got, err := ParseIPOverrides(" 127.0.0.1:5 ,broker-a:7,[::1]:0,", lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"127.0.0.1": 5, "10.0.0.1": 7, "fd00::1": 7, "::1": 0}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"nocount", "h:-1", "h:x", "unknown:3", ":3"} {
		if _, err := ParseIPOverrides(bad, lookup); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// muteHandler is a testHandler that mutes a connection on 'm' (then echoes) and
// records when each request was served.
type muteHandler struct {
	*testHandler
	mu     sync.Mutex
	served []time.Time
}

func (h *muteHandler) Serve(r Request) {
	h.mu.Lock()
	h.served = append(h.served, time.Now())
	h.mu.Unlock()
	if len(r.Frame) > 0 && r.Frame[0] == 'm' {
		if !Mute(r.Conn, 150*time.Millisecond) {
			panic("Mute not supported")
		}
		r.Frame = []byte("e-muted") // echoed
	}
	h.testHandler.Serve(r)
}

// Mute (KIP-219 throttling): the answer leaves at once, and the next request of the
// connection is not served before the mute ends; other connections are not muted.
func TestConformanceMute(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		h := &muteHandler{testHandler: &testHandler{}}
		_, addr := k.startNamed(t, Config{}, "", h)
		c := k.dial(t, addr)
		b := binary.BigEndian.AppendUint32(nil, 1)
		b = append(b, 'm')
		b = binary.BigEndian.AppendUint32(b, 2)
		b = append(b, 'e', '1')
		if _, err := c.Write(b); err != nil { // pipelined: the second is sent at once
			t.Fatal(err)
		}
		if got := recv(t, c); got != "e-muted" {
			t.Fatalf("got %q", got)
		}
		other := k.dial(t, addr)
		echoOK(t, other) // not muted
		if got := recv(t, c); got != "e1" {
			t.Fatalf("got %q", got)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.served) != 3 {
			t.Fatalf("served %d", len(h.served))
		}
		// The mute's own guarantee, a lower bound: the pipelined request was not
		// served before 300 ms had passed since the muting one.
		if gap := h.served[2].Sub(h.served[0]); gap < 150*time.Millisecond {
			t.Fatalf("the request after a 150 ms mute was served %v after it", gap)
		}
	})
}

// heapAndStacks is the memory the runtime holds for the heap and goroutine stacks,
// after a collection.
func heapAndStacks() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// A flood of half-open connections (a few bytes of a size prefix, or a prefix
// claiming 100 MB and three bytes of it, then nothing) costs a bounded amount per
// connection, does not keep other clients from being served, and is closed by the
// idle timeout (connections.max.idle.ms).
func TestConformanceHalfOpenFlood(t *testing.T) {
	forEachTransport(t, func(t *testing.T, k transportKind) {
		const n = 200
		cfg := Config{IdleTimeout: 400 * time.Millisecond, HandshakeTimeout: 400 * time.Millisecond}
		s, h, addr := k.start(t, cfg)
		before := heapAndStacks()
		conns := make([]net.Conn, 0, n)
		for i := range n {
			c := dial(t, addr) // raw TCP: over TLS the bytes are a stalled handshake
			if i%2 == 0 {
				c.Write([]byte{0, 0, 0})
			} else {
				c.Write([]byte{0x05, 0xF5, 0xE1, 0x00, 'e', 'x', 'y'}) // 100,000,000 bytes claimed
			}
			conns = append(conns, c)
		}
		if k.tls == nil {
			waitFor(t, "the flood to be accepted", func() bool { return s.NumConns() >= n })
		}
		good := k.dial(t, addr)
		echoOK(t, good)
		// Bound: 160 KiB a connection (Std: two goroutines, the slot ring and the first
		// 64 KiB of a claimed frame; the reactor less), against the 100 MB claimed.
		after := heapAndStacks()
		if after > before && after-before > n*160<<10 {
			t.Fatalf("%d half-open connections grew heap and stacks by %d KiB (%d KiB each)", n, (after-before)>>10, (after-before)/n>>10)
		}
		good.Close()
		for _, c := range conns {
			c.SetDeadline(time.Now().Add(20 * time.Second))
			expectClosed(t, c)
		}
		waitFor(t, "every connection to close", func() bool { return s.NumConns() == 0 })
		if h.served.Load() != 1 {
			t.Fatalf("served %d", h.served.Load())
		}
	})
}
