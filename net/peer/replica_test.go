package peer

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The replica client sends at the caller's version, and two long polls in flight to
// one broker travel on two connections (neither waits for the other's answer).
func TestReplicaClientVersionAndParallelPolls(t *testing.T) {
	release := make(chan struct{})
	var versions sync.Map
	var held atomic.Int32
	ts := startTestServer(t, func(s *served) {
		switch req := s.req.(type) {
		case *kmsg.FetchRequest:
			versions.Store(s.version, true)
			resp := kmsg.NewPtrFetchResponse()
			resp.SessionID = req.SessionID
			if req.MaxWaitMillis > 0 && held.Add(1) == 1 {
				go func() { <-release; s.respond(resp) }() // the first long poll waits
				return
			}
			s.respond(resp)
		case *kmsg.OffsetForLeaderEpochRequest:
			s.respond(kmsg.NewPtrOffsetForLeaderEpochResponse())
		default:
			s.tr.Ticket.CloseConn()
		}
	})
	c := newTestClient(t, Config{NodeID: 2, BrokerAddr: func(id int32) (string, bool) { return ts.addr(), id == 1 }})
	rc := c.ReplicaClient()
	first := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.SessionID = 15, 10000, 7
		_, err := rc.Fetch(ctxT(t, 20*time.Second), 1, req)
		first <- err
	}()
	eventually(t, 5*time.Second, "the first poll to park", func() bool { return held.Load() == 1 })
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.SessionID = 15, 10000, 8
	resp, err := rc.Fetch(ctxT(t, 5*time.Second), 1, req)
	if err != nil || resp.SessionID != 8 {
		t.Fatalf("second poll while the first waits: %v %+v", err, resp)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, ok := versions.Load(int16(15)); !ok {
		t.Fatal("Fetch not sent at the caller's v15")
	}
	ts.mu.Lock()
	conns := len(ts.conns)
	ts.mu.Unlock()
	if conns != 2 {
		t.Fatalf("%d connections, want 2", conns)
	}
	ofe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ofe.Version = 4
	if _, err := rc.OffsetForLeaderEpoch(ctxT(t, 5*time.Second), 1, ofe); err != nil {
		t.Fatal(err)
	}
	// A version the broker does not serve fails without a round trip.
	keys := defaultKeys()
	for i := range keys {
		if keys[i].ApiKey == 1 {
			keys[i].MaxVersion = 12
		}
	}
	ts.setKeys(keys)
	c2 := newTestClient(t, Config{NodeID: 2, BrokerAddr: func(id int32) (string, bool) { return ts.addr(), true }})
	old := kmsg.NewPtrFetchRequest()
	old.Version = 15
	if _, err := c2.ReplicaClient().Fetch(ctxT(t, 5*time.Second), 1, old); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("v15 against a v12 broker: %v", err)
	}
}
