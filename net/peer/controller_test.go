package peer

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testVoterSet is three test voters of which the one named by active answers requests;
// the others answer NOT_CONTROLLER, as the controller listener of a voter that is not
// the active controller does.
//
// A voter marked silent answers nothing (a stopped process whose connections stay
// open); DescribeCluster (EndpointType 2) names the voters listed (default: the set
// itself).
type testVoterSet struct {
	servers map[int32]*testServer
	active  atomic.Int32
	hits    map[int32]*atomic.Int64
	silent  map[int32]*silence
	listed  atomic.Pointer[map[int32]string]
}

// silence holds a voter's answers while on (a stopped process), releasing them when
// turned off (SIGCONT).
type silence struct {
	mu      sync.Mutex
	on      bool
	release chan struct{}
}

func (s *silence) Store(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && !s.on:
		s.on, s.release = true, make(chan struct{})
	case !on && s.on:
		s.on = false
		close(s.release)
	}
}

// held returns the channel to wait on before answering, nil when not silent.
func (s *silence) held() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return nil
	}
	return s.release
}

func startVoters(t *testing.T, ids ...int32) *testVoterSet {
	vs := &testVoterSet{servers: map[int32]*testServer{}, hits: map[int32]*atomic.Int64{}, silent: map[int32]*silence{}}
	vs.active.Store(-1)
	for _, id := range ids {
		vs.hits[id] = new(atomic.Int64)
		vs.silent[id] = new(silence)
		var serve func(s *served)
		serve = func(s *served) {
			vs.hits[id].Add(1)
			if held := vs.silent[id].held(); held != nil {
				// Answered once the voter is no longer silent (SIGCONT).
				go func() {
					<-held
					vs.hits[id].Add(-1)
					serve(s)
				}()
				return
			}
			code := int16(0)
			if vs.active.Load() != id {
				code = kerr.NotController.Code
			}
			switch req := s.req.(type) {
			case *kmsg.DescribeClusterRequest:
				resp := kmsg.NewPtrDescribeClusterResponse()
				resp.EndpointType, resp.ClusterID, resp.ControllerID = req.EndpointType, "test-cluster", vs.active.Load()
				listed := vs.addrs()
				if l := vs.listed.Load(); l != nil {
					listed = *l
				}
				for lid, addr := range listed {
					host, port, _ := net.SplitHostPort(addr)
					p, _ := strconv.Atoi(port)
					resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: lid, Host: host, Port: int32(p)})
				}
				s.respond(resp)
			case *kmsg.BrokerHeartbeatRequest:
				resp := kmsg.NewPtrBrokerHeartbeatResponse()
				resp.ErrorCode = code
				resp.IsCaughtUp = req.BrokerID == 4
				s.respond(resp)
			case *kmsg.CreateTopicsRequest:
				resp := kmsg.NewPtrCreateTopicsResponse()
				for _, rt := range req.Topics {
					t := kmsg.NewCreateTopicsResponseTopic()
					t.Topic, t.ErrorCode = rt.Topic, code
					resp.Topics = append(resp.Topics, t)
				}
				s.respond(resp)
			case *kmsg.AlterPartitionRequest:
				resp := kmsg.NewPtrAlterPartitionResponse()
				resp.ErrorCode = code
				s.respond(resp)
			default:
				s.tr.Ticket.CloseConn()
			}
		}
		vs.servers[id] = startTestServer(t, serve)
	}
	return vs
}

func (vs *testVoterSet) addrs() map[int32]string {
	m := map[int32]string{}
	for id, ts := range vs.servers {
		m[id] = ts.addr()
	}
	return m
}

func heartbeat() *kmsg.BrokerHeartbeatRequest {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID = 4
	return req
}

func TestControllerChannelFindsActiveController(t *testing.T) {
	vs := startVoters(t, 1, 2, 3)
	vs.active.Store(3)
	c := newTestClient(t, Config{NodeID: 4, Voters: vs.addrs()})
	ch := c.ControllerChannel()
	resp, err := ch.Request(ctxT(t, 5*time.Second), heartbeat())
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.BrokerHeartbeatResponse); r.ErrorCode != 0 || !r.IsCaughtUp {
		t.Fatalf("response %+v", r)
	}
	if c.Leader() != 3 {
		t.Fatalf("leader hint %d, want 3", c.Leader())
	}
	// The next request goes to the learned leader first.
	before := vs.hits[1].Load() + vs.hits[2].Load()
	if _, err := ch.Request(ctxT(t, 5*time.Second), heartbeat()); err != nil {
		t.Fatal(err)
	}
	if after := vs.hits[1].Load() + vs.hits[2].Load(); after != before {
		t.Fatalf("the non-leaders were asked again (%d → %d)", before, after)
	}
	// Leadership moves: NOT_CONTROLLER from 3 sends the channel on to the new leader.
	vs.active.Store(1)
	if _, err := ch.Request(ctxT(t, 5*time.Second), heartbeat()); err != nil {
		t.Fatal(err)
	}
	if c.Leader() != 1 {
		t.Fatalf("leader hint %d after the move, want 1", c.Leader())
	}
	// Per-entry codes: a CreateTopics answered NOT_CONTROLLER for every topic is retried.
	vs.active.Store(2)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "a"}, {Topic: "b"}}
	resp, err = ch.Request(ctxT(t, 5*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("topic %s: code %d", rt.Topic, rt.ErrorCode)
		}
	}
}

func TestControllerChannelWaitsForAnElection(t *testing.T) {
	vs := startVoters(t, 1, 2, 3)
	c := newTestClient(t, Config{NodeID: 4, Voters: vs.addrs()})
	ch := c.ControllerChannel()
	// No controller: the channel keeps trying until its ctx ends.
	ctx := ctxT(t, 100*time.Millisecond)
	if _, err := ch.Request(ctx, heartbeat()); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNotController) {
		t.Fatalf("without a controller: %v", err)
	}
	// A controller is elected while a request is retrying.
	done := make(chan error, 1)
	go func() {
		_, err := ch.Request(ctxT(t, 10*time.Second), heartbeat())
		done <- err
	}()
	eventually(t, 5*time.Second, "a retry round", func() bool { return vs.hits[3].Load() > 3 })
	vs.active.Store(2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestControllerChannelSkipsDeadVoters(t *testing.T) {
	vs := startVoters(t, 1, 2, 3)
	vs.active.Store(3)
	c := newTestClient(t, Config{NodeID: 4, Voters: vs.addrs()})
	ch := c.ControllerChannel()
	if _, err := ch.Request(ctxT(t, 5*time.Second), heartbeat()); err != nil {
		t.Fatal(err)
	}
	// The leader dies; voter 1 takes over.
	vs.servers[3].stop()
	vs.active.Store(1)
	if _, err := ch.Request(ctxT(t, 5*time.Second), heartbeat()); err != nil {
		t.Fatal(err)
	}
	if c.Leader() != 1 {
		t.Fatalf("leader %d", c.Leader())
	}
}

func TestISRClient(t *testing.T) {
	vs := startVoters(t, 1, 2)
	vs.active.Store(2)
	c := newTestClient(t, Config{NodeID: 4, Voters: vs.addrs()})
	resp, err := c.ISRClient().AlterPartition(ctxT(t, 5*time.Second), kmsg.NewPtrAlterPartitionRequest())
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AlterPartition: %v %+v", err, resp)
	}
}
