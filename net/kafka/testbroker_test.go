package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/transport"
)

// testBroker is a broker served on 127.0.0.1:0 by the std transport over a real engine
// and metadata store in a temporary directory, for tests of this package. Reuse it in
// handler tests: startTestBroker(t), tb.client(t), tb.admin(t), tb.raw(t),
// tb.restart(t).
type testBroker struct {
	t      testing.TB
	opts   testBrokerOptions
	dir    string
	node   *singleNode
	a      TestAssembly // the broker, assembled by net/broker
	b      *Broker      // its protocol adapter
	eng    *engine.Manager
	meta   *View // the broker's image (meta.Image())
	tr     transport.Transport
	addr   string
	served chan error
}

// testBrokerOptions tune startTestBroker; the zero value is a default broker.
type testBrokerOptions struct {
	Static     map[string]string     // broker keys, as if from server.properties
	Sync       engine.SyncPolicy     // default SyncNone (tests do not need fdatasync)
	Now        func() time.Time      // engine clock
	Registerer prometheus.Registerer // the broker's metrics (nil: unregistered)
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("SAMSA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// testTransport is the transport the package's tests run on: SAMSA_TEST_TRANSPORT=reactor
// or std (the default). `make test` runs the package once with each.
func testTransport(t testing.TB) string {
	switch k := os.Getenv("SAMSA_TEST_TRANSPORT"); k {
	case "", transport.KindStd:
		return transport.KindStd
	case transport.KindReactor:
		return k
	default:
		t.Fatalf("SAMSA_TEST_TRANSPORT=%q: want std or reactor", k)
		return ""
	}
}

func startTestBroker(t testing.TB, opts ...testBrokerOptions) *testBroker {
	t.Helper()
	tb := &testBroker{t: t, dir: t.TempDir()}
	if len(opts) > 0 {
		tb.opts = opts[0]
	} else {
		tb.opts.Sync = engine.SyncNone
	}
	tb.start()
	t.Cleanup(tb.stop)
	return tb
}

func (tb *testBroker) start() {
	t := tb.t
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	tb.node = startSingleNode(t, tb.dir, Config{NodeID: 1, ClusterID: "test-cluster", Host: "127.0.0.1", Port: int32(port), Static: tb.opts.Static, Registerer: tb.opts.Registerer},
		singleNodeOptions{Sync: tb.opts.Sync, Now: tb.opts.Now})
	tb.a, tb.b, tb.eng, tb.meta = tb.node.a, tb.node.b, tb.node.eng, tb.node.b.meta
	tb.addr, tb.served = ln.Addr().String(), make(chan error, 1)
	tb.tr, err = transport.New(testTransport(t), transport.ReactorConfig{UnlockedLoops: true}, tb.b, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	go func() { tb.served <- tb.tr.Serve(ln) }()
}

// stop shuts the broker down and closes its stores (idempotent).
func (tb *testBroker) stop() {
	if tb.tr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tb.tr.Shutdown(ctx); err != nil {
		tb.t.Errorf("shutdown: %v", err)
	}
	if err := <-tb.served; !errors.Is(err, transport.ErrClosed) {
		tb.t.Errorf("serve: %v", err)
	}
	tb.tr = nil
	if n := tb.b.panics.Load(); n != 0 {
		tb.t.Errorf("%d handler panics", n)
	}
	if err := tb.node.close(); err != nil {
		tb.t.Errorf("closing the node: %v", err)
	}
}

// image is the image the broker answers from.
func (tb *testBroker) image() *metadata.Image {
	_, im := tb.b.Image()
	return im
}

// restart stops the broker and starts it again on the same data (a new port).
func (tb *testBroker) restart() {
	tb.t.Helper()
	tb.stop()
	tb.start()
}

func (tb *testBroker) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tb.addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (tb *testBroker) admin(t testing.TB) *kadm.Client {
	return kadm.NewClient(tb.client(t))
}

// rawConn is a plain TCP connection speaking the protocol by hand with kmsg.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
}

func (tb *testBroker) raw(t testing.TB) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", tb.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, c: c}
}

func (rc *rawConn) write(b []byte) {
	rc.t.Helper()
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatal(err)
	}
}

// send writes req (at its set version) and returns its correlation id.
func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	rc.write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test")).AppendRequest(nil, req, rc.corr))
	return rc.corr
}

// readFrame reads one response frame.
func (rc *rawConn) readFrame() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(rc.c, hdr[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err := io.ReadFull(rc.c, b)
	return b, err
}

// recv reads the answer to a request of req's kind at version v, sent as corr.
func (rc *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	rc.t.Helper()
	b, err := rc.readFrame()
	if err != nil {
		rc.t.Fatalf("reading response: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		rc.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	b = b[4:]
	if req.IsFlexible() && req.Key() != 18 {
		if len(b) == 0 || b[0] != 0 {
			rc.t.Fatalf("bad response header tags")
		}
		b = b[1:]
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(b); err != nil {
		rc.t.Fatalf("decoding %T v%d: %v", resp, req.GetVersion(), err)
	}
	return resp
}

// roundTrip sends req and returns its response.
func (rc *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	return rc.recv(req, rc.send(req))
}

// expectClosed asserts the broker closed the connection.
func (rc *rawConn) expectClosed() {
	rc.t.Helper()
	if b, err := rc.readFrame(); err == nil {
		rc.t.Fatalf("connection open: got a %d-byte frame", len(b))
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		rc.t.Fatalf("connection not closed: %v", err)
	}
}
