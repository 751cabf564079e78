package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/transport"
)

func testLogger() *slog.Logger {
	if os.Getenv("SAMSA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// served is one request as a test server's handler sees it.
type served struct {
	key, version int16
	corr         int32
	clientID     string
	req          kmsg.Request // decoded (a *SamsaRaftRequest for key 10000, Message copied)
	tr           transport.Request
}

// respond answers s with resp at the request's version.
func (s *served) respond(resp kmsg.Response) {
	resp.SetVersion(s.version)
	b := binary.BigEndian.AppendUint32(nil, uint32(s.corr))
	if s.req.IsFlexible() && s.key != 18 {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	s.tr.Ticket.Respond(transport.Response{Chunks: []transport.Chunk{{Bytes: b}}})
}

// testServer is a small Kafka-framed server on net/transport: it answers ApiVersions
// with its key table and hands every other request to handle (which must answer it,
// now or later, unless the request has no response).
type testServer struct {
	t       testing.TB
	ln      net.Listener
	tr      transport.Transport
	served  chan error
	keys    []kmsg.ApiVersionsResponseApiKey
	cluster string // answered REBOOTSTRAP_REQUIRED to ApiVersions v5 naming another
	node    int32
	handle  func(s *served)
	count   atomic.Int64 // requests other than ApiVersions

	mu    sync.Mutex
	conns map[uint64]transport.Conn
}

// defaultKeys advertises every kmsg API at every version kmsg knows, and SamsaRaft v0.
func defaultKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		if r := kmsg.RequestForKey(k); r != nil {
			keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: r.MaxVersion()})
		}
	}
	return append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: SamsaRaftKey})
}

func startTestServer(t testing.TB, handle func(s *served)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, ln: ln, keys: defaultKeys(), handle: handle, served: make(chan error, 1), conns: map[uint64]transport.Conn{}, node: -1}
	ts.tr = transport.NewStd(transport.Config{}, ts, testLogger())
	go func() { ts.served <- ts.tr.Serve(ln) }()
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) addr() string { return ts.ln.Addr().String() }

// setKeys changes the advertised key table (for connections opened from now on).
func (ts *testServer) setKeys(keys []kmsg.ApiVersionsResponseApiKey) {
	ts.mu.Lock()
	ts.keys = keys
	ts.mu.Unlock()
}

func (ts *testServer) stop() {
	if ts.tr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ts.tr.Shutdown(ctx)
	if err := <-ts.served; !errors.Is(err, transport.ErrClosed) {
		ts.t.Errorf("serve: %v", err)
	}
	ts.tr = nil
}

// dropConns closes every open connection (a broken network).
func (ts *testServer) dropConns() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, c := range ts.conns {
		c.Close()
	}
}

func (ts *testServer) ConnOpened(c transport.Conn) {
	ts.mu.Lock()
	ts.conns[c.ID()] = c
	ts.mu.Unlock()
}

func (ts *testServer) ConnClosed(c transport.Conn) {
	ts.mu.Lock()
	delete(ts.conns, c.ID())
	ts.mu.Unlock()
}

// Serve implements transport.Handler.
func (ts *testServer) Serve(tr transport.Request) {
	f := tr.Frame
	if len(f) < 10 {
		tr.Ticket.CloseConn()
		return
	}
	s := &served{key: int16(binary.BigEndian.Uint16(f)), version: int16(binary.BigEndian.Uint16(f[2:])), corr: int32(binary.BigEndian.Uint32(f[4:])), tr: tr}
	n := int(int16(binary.BigEndian.Uint16(f[8:])))
	body := f[10:]
	if n > 0 && n <= len(body) {
		s.clientID = string(body[:n])
		body = body[n:]
	}
	if s.key == SamsaRaftKey {
		s.req = &SamsaRaftRequest{Message: append([]byte(nil), body...)}
	} else {
		req := kmsg.RequestForKey(s.key)
		if req == nil {
			tr.Ticket.CloseConn()
			return
		}
		req.SetVersion(s.version)
		if req.IsFlexible() {
			var err error
			if body, err = skipTags(body); err != nil {
				tr.Ticket.CloseConn()
				return
			}
		}
		if err := req.ReadFrom(body); err != nil {
			tr.Ticket.CloseConn()
			return
		}
		s.req = req
	}
	if s.key == 18 {
		ts.answerApiVersions(s)
		return
	}
	ts.count.Add(1)
	ts.handle(s)
}

func (ts *testServer) answerApiVersions(s *served) {
	req := s.req.(*kmsg.ApiVersionsRequest)
	resp := kmsg.NewPtrApiVersionsResponse()
	ts.mu.Lock()
	resp.ApiKeys = ts.keys
	cluster, node := ts.cluster, ts.node
	ts.mu.Unlock()
	if cluster != "" && req.ClusterID != nil && (*req.ClusterID != cluster || req.NodeID != node) {
		resp.ErrorCode = 129 // REBOOTSTRAP_REQUIRED
	}
	// ApiVersions answers with response header v0 at every version.
	resp.SetVersion(s.version)
	b := binary.BigEndian.AppendUint32(nil, uint32(s.corr))
	b = resp.AppendTo(b)
	s.tr.Ticket.Respond(transport.Response{Chunks: []transport.Chunk{{Bytes: b}}})
}

// newTestClient returns a client with fast timeouts, closed at the end of the test.
func newTestClient(t testing.TB, cfg Config) *Client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	if cfg.ReconnectBackoff == 0 {
		cfg.ReconnectBackoff, cfg.ReconnectBackoffMax = 5*time.Millisecond, 20*time.Millisecond
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 5 * time.Millisecond
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// rawPeer is a hand-driven TCP peer for hostile behaviour: it completes the
// ApiVersions handshake itself, then hands each later request frame to act.
type rawPeer struct {
	ln net.Listener
}

func startRawPeer(t testing.TB, act func(c net.Conn, corr int32, frame []byte) bool) *rawPeer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rp := &rawPeer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	serveRawPeer(rp, act)
	return rp
}

// serveRawPeer serves rp's listener as startRawPeer does.
func serveRawPeer(rp *rawPeer, act func(c net.Conn, corr int32, frame []byte) bool) {
	ln := rp.ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					var hdr [4]byte
					if _, err := readFull(c, hdr[:]); err != nil {
						return
					}
					f := make([]byte, binary.BigEndian.Uint32(hdr[:]))
					if _, err := readFull(c, f); err != nil {
						return
					}
					key, corr := int16(binary.BigEndian.Uint16(f)), int32(binary.BigEndian.Uint32(f[4:]))
					if key == 18 {
						resp := kmsg.NewPtrApiVersionsResponse()
						resp.ApiKeys = defaultKeys()
						resp.Version = int16(binary.BigEndian.Uint16(f[2:]))
						b := binary.BigEndian.AppendUint32(nil, uint32(corr))
						b = resp.AppendTo(b)
						c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
						c.Write(b)
						continue
					}
					if !act(c, corr, f) {
						return
					}
				}
			}()
		}
	}()
}

func (rp *rawPeer) addr() string { return rp.ln.Addr().String() }

// respondRaw writes resp as the answer to the request frame (its version and
// correlation id) on c.
func respondRaw(c net.Conn, frame []byte, resp kmsg.Response) {
	resp.SetVersion(int16(binary.BigEndian.Uint16(frame[2:])))
	b := binary.BigEndian.AppendUint32(nil, binary.BigEndian.Uint32(frame[4:]))
	if resp.IsFlexible() {
		b = append(b, 0) // the response header's empty tag section
	}
	b = resp.AppendTo(b)
	c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
	c.Write(b)
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
