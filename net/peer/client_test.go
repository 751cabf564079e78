package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// echoGroups answers DescribeGroups with the groups asked for, so a caller can check
// it got its own answer.
func echoGroups(s *served) {
	req, ok := s.req.(*kmsg.DescribeGroupsRequest)
	if !ok {
		s.tr.Ticket.CloseConn()
		return
	}
	resp := kmsg.NewPtrDescribeGroupsResponse()
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = g
		resp.Groups = append(resp.Groups, rg)
	}
	s.respond(resp)
}

func describeGroups(name string) *kmsg.DescribeGroupsRequest {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{name}
	return req
}

func TestRequestVersionSelection(t *testing.T) {
	var got []int16
	var mu sync.Mutex
	ts := startTestServer(t, func(s *served) {
		mu.Lock()
		got = append(got, s.version)
		mu.Unlock()
		echoGroups(s)
	})
	// The peer serves DescribeGroups up to v3 only (below kmsg's maximum).
	keys := defaultKeys()
	for i := range keys {
		if keys[i].ApiKey == 15 {
			keys[i].MaxVersion = 3
		}
	}
	ts.setKeys(keys)
	c := newTestClient(t, Config{NodeID: 7, Voters: map[int32]string{1: ts.addr()}})
	req := describeGroups("g")
	resp, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, req)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if req.Version != 3 || resp.GetVersion() != 3 || got[0] != 3 {
		t.Fatalf("sent v%d (server saw %v), response v%d; want 3", req.Version, got, resp.GetVersion())
	}
	if g := resp.(*kmsg.DescribeGroupsResponse).Groups; len(g) != 1 || g[0].Group != "g" {
		t.Fatalf("response %+v", g)
	}
	// An API the peer does not serve fails without a round trip.
	var without []kmsg.ApiVersionsResponseApiKey
	for _, k := range defaultKeys() {
		if k.ApiKey != 19 {
			without = append(without, k)
		}
	}
	ts.setKeys(without)
	c2 := newTestClient(t, Config{NodeID: 7, Voters: map[int32]string{1: ts.addr()}})
	if _, err := c2.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, kmsg.NewPtrCreateTopicsRequest()); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("unserved api: %v", err)
	}
}

func TestRequestFlexibleHeaderAndClientID(t *testing.T) {
	ids := make(chan string, 1)
	ts := startTestServer(t, func(s *served) {
		ids <- s.clientID
		resp := kmsg.NewPtrBrokerHeartbeatResponse()
		resp.IsCaughtUp = true
		s.respond(resp)
	})
	c := newTestClient(t, Config{NodeID: 3, Voters: map[int32]string{1: ts.addr()}})
	resp, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, kmsg.NewPtrBrokerHeartbeatRequest())
	if err != nil {
		t.Fatal(err)
	}
	if clientID := <-ids; !resp.(*kmsg.BrokerHeartbeatResponse).IsCaughtUp || clientID != "samsa-node-3" {
		t.Fatalf("response %+v, client id %q", resp, clientID)
	}
}

// Many goroutines share one pipelined connection; the server answers each request
// later and out of order (the transport restores the order); every caller gets its
// own answer.
func TestRequestPipelined(t *testing.T) {
	var mu sync.Mutex
	var held []*served
	const n = 200
	ts := startTestServer(t, func(s *served) {
		mu.Lock()
		held = append(held, s)
		batch := held
		if len(held) >= 10 {
			held = nil
		} else {
			batch = nil
		}
		mu.Unlock()
		for i := len(batch) - 1; i >= 0; i-- { // answer newest first
			echoGroups(batch[i])
		}
	})
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{1: ts.addr()}, MaxInFlight: 32})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("g%d", i)
			resp, err := c.Request(ctxT(t, 10*time.Second), Voter(1), PurposeController, describeGroups(name))
			if err != nil {
				errs <- err
				return
			}
			if g := resp.(*kmsg.DescribeGroupsResponse).Groups; len(g) != 1 || g[0].Group != name {
				errs <- fmt.Errorf("asked %s, got %+v", name, g)
			}
		}()
	}
	// The last requests may not fill a batch of 10: flush what is held until done.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			ts.mu.Lock()
			conns := len(ts.conns)
			ts.mu.Unlock()
			if conns != 1 {
				t.Errorf("%d connections, want 1", conns)
			}
			return
		case <-time.After(20 * time.Millisecond):
			mu.Lock()
			batch := held
			held = nil
			mu.Unlock()
			for _, s := range batch {
				echoGroups(s)
			}
		}
	}
}

func TestRequestConnectionBreaksAndReconnects(t *testing.T) {
	var drop sync.Once
	var ts *testServer
	ts = startTestServer(t, func(s *served) {
		if req := s.req.(*kmsg.DescribeGroupsRequest); req.Groups[0] == "drop" {
			drop.Do(func() { go ts.dropConns() })
			return // never answered: the connection breaks under it
		}
		echoGroups(s)
	})
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{1: ts.addr()}})
	if _, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("a")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("drop"))
	if !errors.Is(err, ErrConnection) {
		t.Fatalf("request on a dropped connection: %v", err)
	}
	// The next requests reconnect once the short backoff passed.
	eventually(t, 5*time.Second, "a reconnect", func() bool {
		_, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("b"))
		if err != nil && !errors.Is(err, ErrBackoff) {
			t.Fatalf("after reconnect: %v", err)
		}
		return err == nil
	})
}

func TestRequestTimeoutClosesConnection(t *testing.T) {
	ts := startTestServer(t, func(s *served) {
		if req := s.req.(*kmsg.DescribeGroupsRequest); req.Groups[0] == "slow" {
			return // a peer that never answers
		}
		echoGroups(s)
	})
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{1: ts.addr()}, RequestTimeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("slow"))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("slow peer: %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("timed out after %v", el)
	}
	// The stuck connection was closed: a new one serves the next request.
	eventually(t, 5*time.Second, "a fresh connection", func() bool {
		_, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("fast"))
		return err == nil
	})
}

func TestRequestCallerCancelKeepsConnection(t *testing.T) {
	release := make(chan struct{})
	ts := startTestServer(t, func(s *served) {
		if req := s.req.(*kmsg.DescribeGroupsRequest); req.Groups[0] == "held" {
			go func() { <-release; echoGroups(s) }()
			return
		}
		echoGroups(s)
	})
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{1: ts.addr()}})
	ctx := ctxT(t, 50*time.Millisecond)
	if _, err := c.Request(ctx, Voter(1), PurposeController, describeGroups("held")); !errors.Is(err, ctx.Err()) || ctx.Err() == nil {
		t.Fatalf("cancelled request: %v", err)
	}
	close(release)
	// The late answer to "held" is dropped; the next request gets its own answer on the
	// same connection.
	resp, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("next"))
	if err != nil {
		t.Fatal(err)
	}
	if g := resp.(*kmsg.DescribeGroupsResponse).Groups; g[0].Group != "next" {
		t.Fatalf("got the answer to %q", g[0].Group)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.conns) != 1 {
		t.Fatalf("%d connections", len(ts.conns))
	}
}

func TestRequestBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: dials are refused
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{1: addr}, ReconnectBackoff: time.Hour, ReconnectBackoffMax: time.Hour})
	if _, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("a")); !errors.Is(err, ErrConnection) {
		t.Fatalf("first dial: %v", err)
	}
	_, err = c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("a"))
	if !errors.Is(err, ErrBackoff) || !errors.Is(err, ErrConnection) {
		t.Fatalf("second request inside the backoff: %v", err)
	}
	// Another purpose has its own connection and backoff.
	if _, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeMetadata, describeGroups("a")); !errors.Is(err, ErrConnection) || errors.Is(err, ErrBackoff) {
		t.Fatalf("other purpose: %v", err)
	}
	if _, err := c.Request(ctxT(t, 5*time.Second), Voter(9), PurposeController, describeGroups("a")); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("unknown voter: %v", err)
	}
	if _, err := c.Request(ctxT(t, 5*time.Second), Broker(1), PurposeController, describeGroups("a")); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("broker without BrokerAddr: %v", err)
	}
}

func TestBackoffGrows(t *testing.T) {
	c := newTestClient(t, Config{NodeID: 1, ReconnectBackoff: 50 * time.Millisecond, ReconnectBackoffMax: time.Second})
	s := &slot{c: c}
	prev := time.Duration(0)
	for f := 1; f <= 8; f++ {
		s.mu.failures = f
		d := s.backoffLocked()
		want := min(50*time.Millisecond<<(f-1), time.Second)
		if d < want*8/10 || d > want*12/10 {
			t.Fatalf("failure %d: backoff %v, want %v ±20%%", f, d, want)
		}
		if f <= 4 && d <= prev {
			t.Fatalf("failure %d: backoff %v did not grow from %v", f, d, prev)
		}
		prev = d
	}
}

func TestHandshakeWrongCluster(t *testing.T) {
	ts := startTestServer(t, echoGroups)
	ts.mu.Lock()
	ts.cluster, ts.node = "cluster-a", 1
	ts.mu.Unlock()
	c := newTestClient(t, Config{NodeID: 5, ClusterID: "cluster-b", Voters: map[int32]string{1: ts.addr()}})
	if _, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("a")); !errors.Is(err, ErrWrongNode) {
		t.Fatalf("other cluster: %v", err)
	}
	c2 := newTestClient(t, Config{NodeID: 5, ClusterID: "cluster-a", Voters: map[int32]string{1: ts.addr()}})
	if _, err := c2.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("a")); err != nil {
		t.Fatalf("same cluster: %v", err)
	}
	// A node answering at the address of another voter is refused too.
	c3 := newTestClient(t, Config{NodeID: 5, ClusterID: "cluster-a", Voters: map[int32]string{2: ts.addr()}})
	if _, err := c3.Request(ctxT(t, 5*time.Second), Voter(2), PurposeController, describeGroups("a")); !errors.Is(err, ErrWrongNode) {
		t.Fatalf("other node: %v", err)
	}
}

// Hostile peers: each misbehaviour fails the request with ErrMalformedResponse (or a
// connection error), promptly, and allocates nothing a length field claims.
func TestHostileResponses(t *testing.T) {
	frame := func(c net.Conn, b []byte) {
		c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
		c.Write(b)
	}
	cases := []struct {
		name string
		act  func(c net.Conn, corr int32, f []byte) bool
		want error
	}{
		{"huge size prefix", func(c net.Conn, corr int32, f []byte) bool {
			c.Write([]byte{0x7f, 0xff, 0xff, 0xff})
			return true
		}, ErrMalformedResponse},
		{"negative size prefix", func(c net.Conn, corr int32, f []byte) bool {
			c.Write([]byte{0xff, 0xff, 0xff, 0xf0})
			return true
		}, ErrMalformedResponse},
		{"wrong correlation id", func(c net.Conn, corr int32, f []byte) bool {
			frame(c, binary.BigEndian.AppendUint32(nil, uint32(corr+7)))
			return true
		}, ErrMalformedResponse},
		{"frame shorter than a correlation id", func(c net.Conn, corr int32, f []byte) bool {
			frame(c, []byte{1, 2})
			return true
		}, ErrMalformedResponse},
		{"body that does not decode", func(c net.Conn, corr int32, f []byte) bool {
			b := binary.BigEndian.AppendUint32(nil, uint32(corr))
			b = append(b, 0xff, 0xff, 0xff, 0x7f, 1) // throttle, then an array of 2^31 groups in 1 byte
			frame(c, b)
			return true
		}, ErrMalformedResponse},
		{"truncated frame then close", func(c net.Conn, corr int32, f []byte) bool {
			c.Write([]byte{0, 0, 1, 0, 0, 0})
			return false
		}, ErrConnection},
		{"close without answering", func(c net.Conn, corr int32, f []byte) bool {
			return false
		}, ErrConnection},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rp := startRawPeer(t, tc.act)
			c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{1: rp.addr()}, MaxResponseBytes: 1 << 20})
			start := time.Now()
			_, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("a"))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Fatalf("took %v", el)
			}
		})
	}
}

// A peer whose ApiVersions answer is garbage never becomes a connection.
func TestHostileHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var hdr [4]byte
				readFull(c, hdr[:])
				f := make([]byte, binary.BigEndian.Uint32(hdr[:]))
				readFull(c, f)
				b := append(append([]byte(nil), f[4:8]...), 0, 0, 0x7f, 0xff, 0xff, 0xff)
				c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
				c.Write(b)
			}()
		}
	}()
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{1: ln.Addr().String()}})
	if _, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("a")); !errors.Is(err, ErrMalformedResponse) {
		t.Fatalf("garbage handshake: %v", err)
	}
}

// A peer that accepts and never answers the handshake costs a dial timeout, not a hang.
func TestSilentPeerDialTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{1: ln.Addr().String()}, DialTimeout: 100 * time.Millisecond})
	start := time.Now()
	if _, err := c.Request(ctxT(t, 5*time.Second), Voter(1), PurposeController, describeGroups("a")); !errors.Is(err, ErrConnection) {
		t.Fatalf("silent peer: %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %v", el)
	}
}

func TestCloseFailsRequests(t *testing.T) {
	ts := startTestServer(t, func(s *served) {}) // never answers
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{1: ts.addr()}})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Request(ctxT(t, 10*time.Second), Voter(1), PurposeController, describeGroups("a"))
		errc <- err
	}()
	eventually(t, 5*time.Second, "the request to reach the server", func() bool { return ts.count.Load() == 1 })
	c.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("in flight at Close: %v", err)
	}
	if _, err := c.Request(ctxT(t, time.Second), Voter(1), PurposeController, describeGroups("a")); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestImageBrokerAddrs(t *testing.T) {
	im, err := (&metadata.Image{}).Apply(&metadata.RegisterBrokerRecord{ID: 2, Epoch: 1, Endpoints: []metadata.Endpoint{
		{Name: "PLAINTEXT", Host: "10.0.0.2", Port: 9092}, {Name: "REPLICATION", Host: "10.1.0.2", Port: 9094},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cur := im
	f := ImageBrokerAddrs(func() *metadata.Image { return cur }, "REPLICATION")
	if a, ok := f(2); !ok || a != "10.1.0.2:9094" {
		t.Fatalf("broker 2: %q %v", a, ok)
	}
	if _, ok := f(3); ok {
		t.Fatal("address of an unregistered broker")
	}
	if _, ok := ImageBrokerAddrs(func() *metadata.Image { return cur }, "SSL")(2); ok {
		t.Fatal("address of a listener the broker lacks")
	}
	cur = nil
	if _, ok := f(2); ok {
		t.Fatal("address from a nil image")
	}
}
