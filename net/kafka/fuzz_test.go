package kafka

import (
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/transport"
)

// fakeConn is a transport.Conn and transport.Responder that records answers in memory.
type fakeConn struct {
	mu       sync.Mutex
	answers  map[uint64]transport.Outcome
	closed   bool
	released int
}

func newFakeConn() *fakeConn { return &fakeConn{answers: make(map[uint64]transport.Outcome)} }

func (c *fakeConn) ID() uint64          { return 1 }
func (c *fakeConn) LocalAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092} }
func (c *fakeConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (c *fakeConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

func (c *fakeConn) Complete(seq uint64, how transport.Outcome, resp transport.Response) {
	resp.Size()
	if resp.Release != nil {
		resp.Release.Release()
	}
	c.mu.Lock()
	c.answers[seq] = how
	c.mu.Unlock()
}

// seedFrames returns a valid frame per served API at its min and max versions.
func seedFrames() [][]byte {
	var out [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	for _, a := range servedAPIs() {
		for _, v := range []int16{a.MinVersion, a.MaxVersion} {
			req := kmsg.RequestForKey(a.Key)
			req.SetVersion(v)
			if d, ok := req.(interface{ Default() }); ok {
				d.Default()
				req.SetVersion(v)
			}
			out = append(out, f.AppendRequest(nil, req, 7)[4:])
		}
	}
	return out
}

// FuzzRequestDecode feeds arbitrary frames through the dispatcher (header parse, kmsg
// decode, handler) over a fake connection: nothing may panic, and every request is
// answered (possibly by closing the connection). Requests that may legitimately park
// for as long as they ask (a long-poll Fetch, JoinGroup and SyncGroup waiting for a
// rebalance) are only checked for panics.
//
// Run it with: go test -run XXX -fuzz FuzzRequestDecode -fuzztime 5m ./net/kafka
func FuzzRequestDecode(f *testing.F) {
	for _, fr := range seedFrames() {
		f.Add(fr)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1})
	b := newFuzzBroker(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		c := newFakeConn()
		b.Serve(transport.Request{Conn: c, Ticket: transport.NewTicket(c, 0), Frame: frame})
		if n := b.panics.Load(); n != 0 {
			t.Fatalf("handler panicked on %x", frame)
		}
		if len(frame) >= 2 {
			switch int16(frame[0])<<8 | int16(frame[1]) {
			case 1, 11, 14: // may park
				return
			}
		}
		waitAnswered(t, c)
	})
}
