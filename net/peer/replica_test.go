package peer

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fetcher sends at the caller's version (or the highest the source serves), and two
// fetchers' long polls to one broker travel on two connections (neither waits for the
// other's answer).
func TestFetcherVersionAndParallelPolls(t *testing.T) {
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
	first := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.SessionID = 15, 10000, 7
		_, err := c.Fetcher(1, 0).Fetch(ctxT(t, 20*time.Second), req)
		first <- err
	}()
	eventually(t, 5*time.Second, "the first poll to park", func() bool { return held.Load() == 1 })
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.SessionID = 15, 10000, 8
	resp, err := c.FetchClient(1, 1).Fetch(ctxT(t, 5*time.Second), req)
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
	if _, err := c.Fetcher(1, 0).OffsetForLeaderEpoch(ctxT(t, 5*time.Second), ofe); err != nil {
		t.Fatal(err)
	}
	// A version the broker does not serve: the highest it does.
	keys := defaultKeys()
	for i := range keys {
		if keys[i].ApiKey == 1 {
			keys[i].MaxVersion = 12
		}
	}
	ts.setKeys(keys)
	c2 := newTestClient(t, Config{NodeID: 2, BrokerAddr: func(id int32) (string, bool) { return ts.addr(), id == 1 }})
	old := kmsg.NewPtrFetchRequest()
	old.Version = 15
	resp, err = c2.Fetcher(1, 0).Fetch(ctxT(t, 5*time.Second), old)
	if err != nil || resp.GetVersion() != 12 {
		t.Fatalf("v15 against a v12 broker: %v, answer v%d", err, resp.GetVersion())
	}
	// A broker the image does not know.
	if _, err := c2.Fetcher(9, 0).Fetch(ctxT(t, 5*time.Second), kmsg.NewPtrFetchRequest()); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("unknown broker: %v", err)
	}
}
