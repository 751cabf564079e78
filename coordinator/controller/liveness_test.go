package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// listeners is a fake CheckListener: what a connection to each broker's port finds
// (ListenerAccepts unless set), and how many checks each port saw.
type listeners struct {
	mu     sync.Mutex
	state  map[int32]ListenerState // by port
	checks map[int32]int
}

func newListeners() *listeners {
	return &listeners{state: map[int32]ListenerState{}, checks: map[int32]int{}}
}

func (l *listeners) set(broker int32, st ListenerState) {
	l.mu.Lock()
	l.state[9000+broker] = st
	l.mu.Unlock()
}

func (l *listeners) count(broker int32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checks[9000+broker]
}

func (l *listeners) check(_ context.Context, e metadata.Endpoint) ListenerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checks[e.Port]++
	if st, ok := l.state[e.Port]; ok {
		return st
	}
	return ListenerAccepts
}

// livenessHarness is a harness whose controller checks listeners with l, inline,
// with the default heartbeat interval (2 s: CloseGrace 3 s) and session (9 s).
func livenessHarness(t *testing.T, l *listeners) *harness {
	h := newHarness(t, func(c *Config) {
		if l != nil {
			c.CheckListener = l.check
		}
	})
	h.c.inlineChecks = true
	return h
}

// joinOn registers and unfences brokers, broker id heartbeating on connection id.
func (h *harness) joinOn(ids ...int32) map[int32]int64 {
	h.t.Helper()
	epochs := map[int32]int64{}
	for _, id := range ids {
		r := h.doOn(uint64(id), registration(id, 1, "")).(*kmsg.BrokerRegistrationResponse)
		if r.ErrorCode != 0 {
			h.t.Fatalf("register %d: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
		epochs[id] = r.BrokerEpoch
	}
	for _, id := range ids {
		if hb := h.heartbeatOn(uint64(id), id, epochs[id]); hb.ErrorCode != 0 || hb.IsFenced {
			h.t.Fatalf("heartbeat %d: %+v", id, hb)
		}
	}
	return epochs
}

func (h *harness) doOn(conn uint64, req kmsg.Request) kmsg.Response {
	h.t.Helper()
	var got kmsg.Response
	h.c.SubmitConn(conn, req, func(r kmsg.Response) { got = r })
	h.settle()
	if got == nil {
		h.t.Fatalf("no response to %T", req)
	}
	return got
}

func (h *harness) heartbeatOn(conn uint64, id int32, epoch int64) *kmsg.BrokerHeartbeatResponse {
	h.t.Helper()
	return h.doOn(conn, heartbeat(id, epoch, h.offset())).(*kmsg.BrokerHeartbeatResponse)
}

// tick advances the clock by d in steps of one timer tick, settling the log after
// each.
func (h *harness) tick(d time.Duration) {
	for end := h.clock.Now().Add(d); h.clock.Now().Before(end); {
		h.clock.Advance(DefaultTickInterval)
		h.settle()
	}
}

func (h *harness) fenced(id int32) bool {
	b, ok := h.image().Broker(id)
	return !ok || b.Fenced
}

// TestConnClosedGrace: a broker whose heartbeat connection closes is fenced once
// CloseGrace passes without a heartbeat on another connection; one that heartbeats
// on a new connection within it is not; without listener checks nothing happens
// sooner.
func TestConnClosedGrace(t *testing.T) {
	h := livenessHarness(t, nil)
	epochs := h.joinOn(1, 2, 3)
	h.createTopic("t", 3, 3)
	if g := CloseGrace(2 * time.Second); g != 3*time.Second {
		t.Fatalf("CloseGrace(2s) = %v", g)
	}
	h.tick(time.Second)
	h.heartbeatOn(1, 1, epochs[1])
	h.heartbeatOn(2, 2, epochs[2])
	h.heartbeatOn(3, 3, epochs[3])
	h.c.ConnClosed(1) // killed
	h.c.ConnClosed(2) // alive: it heartbeats again on another connection
	h.c.ConnClosed(99)
	h.tick(1900 * time.Millisecond)
	h.heartbeatOn(22, 2, epochs[2])
	h.heartbeatOn(3, 3, epochs[3])
	h.tick(900 * time.Millisecond) // 2.8 s after the close
	if h.fenced(1) {
		t.Fatal("fenced before the grace passed")
	}
	h.tick(300 * time.Millisecond)
	if !h.fenced(1) {
		t.Fatal("not fenced 3.1 s after its heartbeat connection closed")
	}
	if h.fenced(2) || h.fenced(3) {
		t.Fatal("a broker that heartbeats was fenced")
	}
	for _, p := range topic(t, h.image(), "t").Partitions {
		if p.Leader == 1 {
			t.Fatalf("the fenced broker still leads %+v", p)
		}
	}
	// Its old epoch stays fenced: a heartbeat of it is answered fenced.
	if r := h.heartbeatOn(11, 1, epochs[1]); !r.IsFenced {
		t.Fatalf("the lost epoch: %+v", r)
	}
}

// TestListenerCheckFencesGone: a broker whose heartbeat connection closes and whose
// endpoint, which accepted the controller's check before, now refuses is fenced at
// once. One whose endpoint still accepts (a process that closed its connection but
// lives) is not, nor one whose connection stays open and sends nothing (SIGSTOP):
// that one only at the session timeout.
func TestListenerCheckFencesGone(t *testing.T) {
	l := newListeners()
	h := livenessHarness(t, l)
	epochs := h.joinOn(1, 2, 3)
	h.createTopic("t", 3, 3)
	h.tick(200 * time.Millisecond) // the first checks of the three registrations
	for id := int32(1); id <= 3; id++ {
		if l.count(id) != 1 {
			t.Fatalf("broker %d: %d first checks", id, l.count(id))
		}
	}
	l.set(1, ListenerRefuses)
	h.c.ConnClosed(1)
	h.settle()
	if !h.fenced(1) {
		t.Fatal("a broker whose connection closed and whose endpoint refuses is not fenced at once")
	}
	h.c.ConnClosed(2) // its process lives
	h.tick(2 * time.Second)
	if h.fenced(2) {
		t.Fatal("fenced although its endpoint accepts")
	}
	if n := l.count(2); n < 3 {
		t.Fatalf("broker 2 checked %d times while detached", n)
	}
	h.heartbeatOn(20, 2, epochs[2])
	h.heartbeatOn(3, 3, epochs[3])
	// Broker 3 stops (its connection stays open): fenced by its session only.
	for range 4 {
		h.tick(2 * time.Second)
		h.heartbeatOn(20, 2, epochs[2])
	}
	if h.fenced(3) {
		t.Fatal("a silent broker whose connection is open was fenced before its session expired")
	}
	h.tick(2 * time.Second)
	if !h.fenced(3) || h.fenced(2) {
		t.Fatalf("after the session: fenced 3 %v, 2 %v", h.fenced(3), h.fenced(2))
	}
}

// TestListenerCheckSoonAfterClose: a killed process's heartbeat connection can
// close while its listener still accepts (its sockets close one by one as it
// exits); the checks that follow 10, 20, 40 ms later, between the controller's
// ticks, find it refusing and fence it.
func TestListenerCheckSoonAfterClose(t *testing.T) {
	l := newListeners()
	h := livenessHarness(t, l)
	h.joinOn(1, 2, 3)
	h.createTopic("t", 3, 3)
	h.tick(200 * time.Millisecond) // the first checks of the three registrations
	h.c.ConnClosed(1)              // checked at once: it still accepts
	h.settle()
	if h.fenced(1) || l.count(1) != 2 {
		t.Fatalf("after the close: fenced %v, %d checks", h.fenced(1), l.count(1))
	}
	l.set(1, ListenerRefuses) // its listener closed a moment later
	for range 3 {
		h.clock.Advance(10 * time.Millisecond)
		h.settle()
	}
	if !h.fenced(1) {
		t.Fatalf("not fenced 30 ms after its heartbeat connection closed (%d checks)", l.count(1))
	}
	if h.fenced(2) || h.fenced(3) {
		t.Fatal("a broker that heartbeats was fenced")
	}
}

// TestListenerCheckNeedsAcceptFirst: an endpoint that refused the controller's
// first check (an address the controller cannot reach) is no evidence: the broker
// is fenced by the grace or its session only.
func TestListenerCheckNeedsAcceptFirst(t *testing.T) {
	l := newListeners()
	l.set(1, ListenerRefuses)
	h := livenessHarness(t, l)
	h.joinOn(1, 2)
	h.tick(200 * time.Millisecond)
	h.c.ConnClosed(1)
	h.tick(2 * time.Second)
	if h.fenced(1) {
		t.Fatal("fenced on the refusal of an endpoint that never accepted")
	}
	if n := l.count(1); n != 1 {
		t.Fatalf("%d checks of an endpoint that refused the first", n)
	}
	h.tick(1100 * time.Millisecond)
	if !h.fenced(1) {
		t.Fatal("not fenced after the grace")
	}
}

// TestActivationChecksDetached: a controller that becomes active checks the brokers
// that have not heartbeated to it yet: the one whose endpoint now refuses (the
// former controller's own broker, killed with it) is fenced at once; the others
// keep their fresh sessions, and a new incarnation of a broker that has not
// heartbeated to the new controller registers once CloseGrace has passed.
func TestActivationChecksDetached(t *testing.T) {
	l := newListeners()
	h := livenessHarness(t, l)
	epochs := h.joinOn(1, 2, 3, 4)
	h.createTopic("t", 4, 3)
	h.tick(200 * time.Millisecond)
	h.log.Elect(-1, 0) // the leader dies
	h.c.Poll()
	l.set(1, ListenerRefuses)
	h.clock.Advance(1500 * time.Millisecond)
	h.log.Elect(1, 0) // this voter is elected
	h.voter.CatchUp(^uint64(0))
	h.c.Poll()
	h.settle()
	if !h.fenced(1) {
		t.Fatal("the gone broker is not fenced at activation")
	}
	for _, id := range []int32{2, 3, 4} {
		if h.fenced(id) {
			t.Fatalf("broker %d fenced at activation", id)
		}
	}
	h.heartbeatOn(2, 2, epochs[2])
	// Broker 3's new incarnation within the grace: its old one may still reach us.
	if r := h.doOn(33, registration(3, 2, "")).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("a new incarnation within the grace: %v", code(r.ErrorCode))
	}
	h.tick(3100 * time.Millisecond)
	h.heartbeatOn(2, 2, epochs[2])
	if r := h.doOn(33, registration(3, 2, "")).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != 0 {
		t.Fatalf("a new incarnation after the grace: %v", code(r.ErrorCode))
	}
	// Broker 4, which never heartbeated to this controller, is fenced by its session.
	h.tick(4 * time.Second)
	if h.fenced(4) {
		t.Fatal("broker 4 fenced before its session expired")
	}
	h.heartbeatOn(2, 2, epochs[2])
	h.tick(2500 * time.Millisecond)
	if !h.fenced(4) || h.fenced(2) {
		t.Fatalf("after the session: fenced 4 %v, 2 %v", h.fenced(4), h.fenced(2))
	}
}

// TestRegistrationAfterClose: the new incarnation of a broker whose heartbeat
// connection closed registers at once (no DUPLICATE_BROKER_REGISTRATION), also when
// the close is learned after a heartbeat that was read from that connection.
func TestRegistrationAfterClose(t *testing.T) {
	h := livenessHarness(t, nil)
	epochs := h.joinOn(1, 2)
	if r := h.doOn(11, registration(1, 2, "")).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("while its connection is open: %v", code(r.ErrorCode))
	}
	h.c.ConnClosed(1)
	if r := h.doOn(11, registration(1, 2, "")).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != 0 {
		t.Fatalf("after its connection closed: %v", code(r.ErrorCode))
	}
	// A heartbeat read from connection 2 before it closed, processed after: the
	// broker stays detached, as closed.
	h.c.ConnClosed(2)
	h.heartbeatOn(2, 2, epochs[2])
	h.tick(3100 * time.Millisecond)
	if !h.fenced(2) {
		t.Fatal("a heartbeat from a closed connection kept the broker attached")
	}
}

// TestControlledShutdownLeadingNothing: a broker that leads nothing and is in no ISR
// is told to shut down in the answer to its first WantShutDown heartbeat, fenced.
func TestControlledShutdownLeadingNothing(t *testing.T) {
	h := livenessHarness(t, nil)
	epochs := h.joinOn(1, 2)
	h.do(createTopicWithAssignment("t", []int32{1}))
	r := h.heartbeat(2, epochs[2], func(r *kmsg.BrokerHeartbeatRequest) { r.WantShutdown = true })
	if !r.ShouldShutdown || !r.IsFenced {
		t.Fatalf("first shutdown heartbeat of a broker leading nothing: %+v", r)
	}
	if !h.fenced(2) {
		t.Fatal("not fenced")
	}
	// Its restart registers at once.
	if r := h.register(2, 2, ""); r.ErrorCode != 0 {
		t.Fatalf("restart after a controlled shutdown: %v", code(r.ErrorCode))
	}
}

func createTopicWithAssignment(name string, replicas []int32) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version = 7
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	r.Topics = append(r.Topics, t)
	return r
}

// TestRegistrationOfSuccessor: a new incarnation naming the registered one as its
// predecessor registers at once, its predecessor's session live or not; one naming
// another is refused while the session is live; the tag survives the wire.
func TestRegistrationOfSuccessor(t *testing.T) {
	h := livenessHarness(t, nil)
	h.joinOn(1)
	b, _ := h.image().Broker(1)
	stranger := registration(1, 7, "")
	SetPredecessor(stranger, metadata.UUID{0: 9})
	if r := h.doOn(2, stranger).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("naming another predecessor: %v", code(r.ErrorCode))
	}
	next := registration(1, 8, "")
	SetPredecessor(next, b.IncarnationID)
	wire := next.AppendTo(nil)
	decoded := kmsg.NewPtrBrokerRegistrationRequest()
	decoded.Version = next.Version
	if err := decoded.ReadFrom(wire); err != nil || Predecessor(decoded) != b.IncarnationID {
		t.Fatalf("the tag on the wire: %v %v", err, Predecessor(decoded))
	}
	r := h.doOn(3, decoded).(*kmsg.BrokerRegistrationResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("the successor: %v", code(r.ErrorCode))
	}
	if hb := h.heartbeatOn(3, 1, r.BrokerEpoch); hb.IsFenced {
		t.Fatalf("the successor's heartbeat: %+v", hb)
	}
	// A copy of the directories started elsewhere (the same predecessor) finds the
	// successor registered and live.
	copied := registration(1, 9, "")
	SetPredecessor(copied, b.IncarnationID)
	if r := h.doOn(4, copied).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("a copy naming the same predecessor: %v", code(r.ErrorCode))
	}
}
