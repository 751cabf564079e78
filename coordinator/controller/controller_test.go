package controller

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// harness is a controller over a one-voter MemLog on a manual clock.
type harness struct {
	t      testing.TB
	log    *MemLog
	voter  *MemVoter
	clock  *ManualClock
	c      *Controller
	nextID uint32
}

func newHarness(t testing.TB, mod func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: NewManualClock(t0)}
	h.log = NewMemLog(1)
	h.log.Elect(1, 0)
	h.voter = h.log.Voter(1)
	h.voter.CatchUp(^uint64(0))
	cfg := Config{NodeID: 1, ClusterID: "cluster-a", Clock: h.clock, SessionTimeout: 9 * time.Second,
		NewTopicID: func() metadata.UUID {
			h.nextID++
			return metadata.UUID{0: 0x10, 1: byte(h.nextID), 2: byte(h.nextID >> 8), 3: byte(h.nextID >> 16), 15: 0x80}
		}}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg, h.voter)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	c.Start()
	t.Cleanup(c.Close)
	return h
}

// submit sends req and returns a function that reports its response (nil: none yet).
func (h *harness) submit(req kmsg.Request) func() kmsg.Response {
	var got kmsg.Response
	h.c.Submit(req, func(r kmsg.Response) {
		if got != nil {
			h.t.Errorf("response delivered twice")
		}
		got = r
	})
	return func() kmsg.Response { return got }
}

// settle commits everything pending, applies it and lets the controller observe it.
func (h *harness) settle() {
	for range 4 {
		h.log.Commit(-1)
		h.voter.CatchUp(^uint64(0))
		h.c.Poll()
	}
}

// do sends req and drives the log until it is answered.
func (h *harness) do(req kmsg.Request) kmsg.Response {
	h.t.Helper()
	get := h.submit(req)
	h.settle()
	r := get()
	if r == nil {
		h.t.Fatalf("no response to %T", req)
	}
	return r
}

func (h *harness) image() *metadata.Image {
	_, im := h.voter.Committed()
	return im
}

func (h *harness) offset() uint64 {
	off, _ := h.voter.Committed()
	return off
}

func registration(id int32, incarnation byte, rack string) *kmsg.BrokerRegistrationRequest {
	r := kmsg.NewPtrBrokerRegistrationRequest()
	r.Version = 3
	r.BrokerID, r.ClusterID = id, "cluster-a"
	r.IncarnationID = [16]byte{0: byte(id), 1: incarnation}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", uint16(9000+id)
	r.Listeners = []kmsg.BrokerRegistrationRequestListener{l}
	if rack != "" {
		r.Rack = kmsg.StringPtr(rack)
	}
	return r
}

func (h *harness) register(id int32, incarnation byte, rack string) *kmsg.BrokerRegistrationResponse {
	h.t.Helper()
	return h.do(registration(id, incarnation, rack)).(*kmsg.BrokerRegistrationResponse)
}

func heartbeat(id int32, epoch int64, offset uint64) *kmsg.BrokerHeartbeatRequest {
	r := kmsg.NewPtrBrokerHeartbeatRequest()
	r.Version = 1
	r.BrokerID, r.BrokerEpoch, r.CurrentMetadataOffset = id, epoch, int64(offset)
	return r
}

func (h *harness) heartbeat(id int32, epoch int64, mod func(*kmsg.BrokerHeartbeatRequest)) *kmsg.BrokerHeartbeatResponse {
	h.t.Helper()
	r := heartbeat(id, epoch, h.offset())
	if mod != nil {
		mod(r)
	}
	return h.do(r).(*kmsg.BrokerHeartbeatResponse)
}

// join registers and unfences brokers; it returns their epochs.
func (h *harness) join(ids ...int32) map[int32]int64 {
	h.t.Helper()
	epochs := map[int32]int64{}
	for _, id := range ids {
		r := h.register(id, 1, "")
		if r.ErrorCode != 0 {
			h.t.Fatalf("register %d: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
		epochs[id] = r.BrokerEpoch
	}
	for _, id := range ids {
		if hb := h.heartbeat(id, epochs[id], nil); hb.ErrorCode != 0 || hb.IsFenced {
			h.t.Fatalf("heartbeat %d: %+v", id, hb)
		}
	}
	return epochs
}

func createTopic(name string, partitions int32, rf int16, cfgs ...string) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version = 7
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for i := 0; i+1 < len(cfgs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = cfgs[i], kmsg.StringPtr(cfgs[i+1])
		t.Configs = append(t.Configs, c)
	}
	r.Topics = append(r.Topics, t)
	return r
}

func (h *harness) createTopic(name string, partitions int32, rf int16, cfgs ...string) kmsg.CreateTopicsResponseTopic {
	h.t.Helper()
	return h.do(createTopic(name, partitions, rf, cfgs...)).(*kmsg.CreateTopicsResponse).Topics[0]
}

func code(c int16) error { return kerr.ErrorForCode(c) }

func TestNotControllerUntilLeading(t *testing.T) {
	h := newHarness(t, nil)
	h.log.Elect(-1, 0)
	if r := h.do(registration(1, 1, "")).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("without leadership: %v", code(r.ErrorCode))
	}
	if h.c.Active() {
		t.Fatal("active without leadership")
	}
	h.log.Elect(1, 0)
	// Leading but the term's first entry not applied yet: not ready for writes.
	get := h.submit(registration(1, 1, ""))
	if r := get().(*kmsg.BrokerRegistrationResponse); r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("before the term's first entry is applied: %v", code(r.ErrorCode))
	}
	h.voter.CatchUp(^uint64(0))
	if r := h.do(registration(1, 1, "")).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != 0 {
		t.Fatalf("after election: %v", code(r.ErrorCode))
	}
	if !h.c.Active() || h.c.Leader() != 1 {
		t.Fatal("not active after election")
	}
}

func TestRegistration(t *testing.T) {
	h := newHarness(t, nil)
	r := h.register(1, 1, "r1")
	if r.ErrorCode != 0 {
		t.Fatal(code(r.ErrorCode))
	}
	// The first epoch: max(MaxBrokerEpoch 0, committed offset 1) + 1.
	if r.BrokerEpoch != 2 {
		t.Fatalf("epoch %d, want 2", r.BrokerEpoch)
	}
	b, ok := h.image().Broker(1)
	if !ok || !b.Fenced || b.Epoch != 2 || b.Rack == nil || *b.Rack != "r1" || b.Port != 9001 {
		t.Fatalf("registered %+v", b)
	}
	// The registration committed at offset 2: a heartbeat reporting 1 is not caught up.
	hb := h.heartbeat(1, 2, func(r *kmsg.BrokerHeartbeatRequest) { r.CurrentMetadataOffset = 1 })
	if !hb.IsFenced || hb.IsCaughtUp {
		t.Fatalf("behind: %+v", hb)
	}
	hb = h.heartbeat(1, 2, nil)
	if hb.IsFenced || !hb.IsCaughtUp {
		t.Fatalf("caught up: %+v", hb)
	}
	if b, _ := h.image().Broker(1); b.Fenced {
		t.Fatal("still fenced in the image")
	}
	// Another incarnation while the session is live: refused.
	if r := h.register(1, 2, ""); r.ErrorCode != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("duplicate: %v", code(r.ErrorCode))
	}
	// The same incarnation again (a retry): a new epoch, fenced again.
	r = h.register(1, 1, "")
	if r.ErrorCode != 0 || r.BrokerEpoch <= 2 {
		t.Fatalf("re-registration: %+v", r)
	}
	if b, _ := h.image().Broker(1); !b.Fenced {
		t.Fatal("a re-registered broker is not fenced")
	}
	// Fenced (no live session): another incarnation may take the id.
	if r := h.register(1, 3, ""); r.ErrorCode != 0 {
		t.Fatalf("new incarnation of a fenced broker: %v", code(r.ErrorCode))
	}
	bad := registration(2, 1, "")
	bad.ClusterID = "cluster-b"
	if r := h.do(bad).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != kerr.InconsistentClusterID.Code {
		t.Fatalf("other cluster: %v", code(r.ErrorCode))
	}
	bad = registration(2, 1, "")
	bad.Listeners = append(bad.Listeners, bad.Listeners[0])
	if r := h.do(bad).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("listener twice: %v", code(r.ErrorCode))
	}
	// Epochs only grow, also past unregistration-free gaps: each is above the last.
	var last int64
	for id := int32(3); id < 6; id++ {
		e := h.register(id, 1, "").BrokerEpoch
		if e <= last {
			t.Fatalf("epoch %d after %d", e, last)
		}
		last = e
	}
}

func TestHeartbeatErrors(t *testing.T) {
	h := newHarness(t, nil)
	if r := h.heartbeat(7, 1, nil); r.ErrorCode != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("unregistered: %v", code(r.ErrorCode))
	}
	e := h.join(1)[1]
	if r := h.heartbeat(1, e-1, nil); r.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale: %v", code(r.ErrorCode))
	}
	r := h.heartbeat(1, e, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	if r.ErrorCode != 0 || !r.IsFenced {
		t.Fatalf("want fence: %+v", r)
	}
	if b, _ := h.image().Broker(1); !b.Fenced {
		t.Fatal("WantFence did not fence")
	}
	// A fenced broker asking to shut down may, at once.
	if r := h.heartbeat(1, e, func(r *kmsg.BrokerHeartbeatRequest) { r.WantShutdown = true }); !r.ShouldShutdown {
		t.Fatalf("fenced shutdown: %+v", r)
	}
}

// TestSessionExpiry: a broker that stops heartbeating is fenced after the session
// timeout, and its leaderships move.
func TestSessionExpiry(t *testing.T) {
	h := newHarness(t, nil)
	epochs := h.join(1, 2, 3)
	if ct := h.createTopic("t", 3, 3); ct.ErrorCode != 0 {
		t.Fatal(code(ct.ErrorCode))
	}
	leaders := func() []int32 {
		var out []int32
		for _, p := range topic(t, h.image(), "t").Partitions {
			out = append(out, p.Leader)
		}
		return out
	}
	if got := leaders(); !slices.Contains(got, 1) {
		t.Fatalf("broker 1 leads nothing: %v", got)
	}
	for range 6 { // 2 and 3 keep heartbeating for 12 s; 1 is silent
		h.clock.Advance(2 * time.Second)
		h.heartbeat(2, epochs[2], nil)
		h.heartbeat(3, epochs[3], nil)
		h.settle()
	}
	b, _ := h.image().Broker(1)
	if !b.Fenced {
		t.Fatal("silent broker not fenced")
	}
	if got := leaders(); slices.Contains(got, 1) {
		t.Fatalf("fenced broker still leads: %v", got)
	}
	for _, p := range topic(t, h.image(), "t").Partitions {
		if slices.Contains(p.ISR, 1) {
			t.Fatalf("fenced broker still in an ISR: %+v", p)
		}
	}
	for _, id := range []int32{2, 3} {
		if b, _ := h.image().Broker(id); b.Fenced {
			t.Fatalf("broker %d fenced", id)
		}
	}
	// It comes back: its old epoch stays fenced; registered again, it is unfenced.
	if r := h.heartbeat(1, epochs[1], nil); !r.IsFenced || r.ErrorCode != 0 {
		t.Fatalf("back with the old epoch: %+v", r)
	}
	e := h.register(1, 1, "").BrokerEpoch
	if r := h.heartbeat(1, e, nil); r.IsFenced {
		t.Fatalf("registered again: %+v", r)
	}
}

// TestFreshSessionsOnActivation: a new active controller gives every broker a full
// session, so brokers are not fenced for the silence of the failover.
func TestFreshSessionsOnActivation(t *testing.T) {
	h := newHarness(t, nil)
	h.join(1)
	h.clock.Advance(8 * time.Second)
	h.log.Elect(-1, 0) // leadership lost for a while
	h.c.Poll()
	h.clock.Advance(5 * time.Second)
	h.log.Elect(1, 0)
	h.voter.CatchUp(^uint64(0))
	h.c.Poll()
	h.clock.Advance(8 * time.Second) // 21 s since the last heartbeat, 8 s of this term
	h.settle()
	if b, _ := h.image().Broker(1); b.Fenced {
		t.Fatal("fenced within the new controller's first session")
	}
	h.clock.Advance(2 * time.Second)
	h.settle()
	if b, _ := h.image().Broker(1); !b.Fenced {
		t.Fatal("not fenced after a full session of silence")
	}
}

func TestControlledShutdown(t *testing.T) {
	h := newHarness(t, nil)
	epochs := h.join(1, 2)
	h.createTopic("t", 2, 2)
	h.createTopic("solo", 1, 1) // one replica: leaderless while its broker shuts down
	solo := part(t, h.image(), "solo", 0).Leader
	down := solo
	other := int32(3) - down
	r := h.heartbeat(down, epochs[down], func(r *kmsg.BrokerHeartbeatRequest) { r.WantShutdown = true })
	if r.ShouldShutdown || r.IsFenced {
		t.Fatalf("first shutdown heartbeat: %+v", r)
	}
	im := h.image()
	if b, _ := im.Broker(down); !b.InControlledShutdown {
		t.Fatal("not in controlled shutdown")
	}
	if LeadsAny(im, down) {
		t.Fatal("leaderships did not move")
	}
	if p := part(t, im, "solo", 0); p.Leader != -1 {
		t.Fatalf("solo = %+v", p)
	}
	// The other broker has not reported the new offset: not yet.
	hb := heartbeat(down, epochs[down], h.offset())
	hb.WantShutdown = true
	if r := h.do(hb).(*kmsg.BrokerHeartbeatResponse); r.ShouldShutdown {
		t.Fatal("shut down before the new leaders caught up")
	}
	h.heartbeat(other, epochs[other], nil)
	r = h.heartbeat(down, epochs[down], func(r *kmsg.BrokerHeartbeatRequest) { r.WantShutdown = true })
	if !r.ShouldShutdown || !r.IsFenced {
		t.Fatalf("after catch-up: %+v", r)
	}
	if b, _ := h.image().Broker(down); !b.Fenced {
		t.Fatal("not fenced at the end of its shutdown")
	}
}

func TestCreateTopics(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxPartitionsPerOp = 20 })
	h.join(1, 2, 3)
	ct := h.createTopic("orders", 6, 3, "retention.ms", "1000")
	if ct.ErrorCode != 0 || ct.NumPartitions != 6 || ct.ReplicationFactor != 3 || ct.TopicID == [16]byte{} || len(ct.Configs) == 0 {
		t.Fatalf("create: %+v", ct)
	}
	ti := topic(t, h.image(), "orders")
	leaders := map[int32]int{}
	for _, p := range ti.Partitions {
		if len(p.Replicas) != 3 || !reflect.DeepEqual(p.ISR, p.Replicas) || p.Leader != p.Replicas[0] {
			t.Fatalf("partition %+v", p)
		}
		leaders[p.Leader]++
	}
	if len(leaders) != 3 || leaders[1] != 2 {
		t.Fatalf("leaders spread %v", leaders)
	}
	if v := h.image().Configs(metadata.ResourceTopic, "orders")["retention.ms"]; v != "1000" {
		t.Fatalf("config %q", v)
	}
	for _, tc := range []struct {
		name string
		req  *kmsg.CreateTopicsRequest
		code *kerr.Error
	}{
		{"exists", createTopic("orders", 1, 1), kerr.TopicAlreadyExists},
		{"rf above brokers", createTopic("x", 1, 4), kerr.InvalidReplicationFactor},
		{"bad name", createTopic("a/b", 1, 1), kerr.InvalidTopicException},
		{"collides", createTopic("ord.ers", 1, 1), nil},
		{"bad config", createTopic("y", 1, 1, "retention.ms", "soon"), kerr.InvalidConfig},
		{"unknown config", createTopic("y", 1, 1, "no.such", "1"), kerr.InvalidConfig},
		{"too many partitions", createTopic("y", 21, 1), kerr.PolicyViolation},
		{"zero partitions", createTopic("y", 0, 1), kerr.InvalidPartitions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.do(tc.req).(*kmsg.CreateTopicsResponse).Topics[0]
			want := int16(0)
			if tc.code != nil {
				want = tc.code.Code
			}
			if got.ErrorCode != want || (want != 0 && got.ErrorMessage == nil) {
				t.Fatalf("code %v (%v), want %v", code(got.ErrorCode), got.ErrorMessage, tc.code)
			}
		})
	}
	// ord.ers was created; ord_ers now collides with it.
	if got := h.createTopic("ord_ers", 1, 1); got.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("collision: %v", code(got.ErrorCode))
	}
	// Manual assignment, honoured; with counts: INVALID_REQUEST; unknown broker.
	req := createTopic("manual", -1, -1)
	for i, reps := range [][]int32{{3, 1}, {2, 3}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), reps
		req.Topics[0].ReplicaAssignment = append(req.Topics[0].ReplicaAssignment, a)
	}
	if got := h.do(req).(*kmsg.CreateTopicsResponse).Topics[0]; got.ErrorCode != 0 || got.ReplicationFactor != 2 {
		t.Fatalf("manual: %+v", got)
	}
	if p := part(t, h.image(), "manual", 0); !reflect.DeepEqual(p.Replicas, []int32{3, 1}) || p.Leader != 3 {
		t.Fatalf("manual p0 = %+v", p)
	}
	req.Topics[0].Topic, req.Topics[0].NumPartitions = "manual2", 2
	if got := h.do(req).(*kmsg.CreateTopicsResponse).Topics[0]; got.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("manual with counts: %v", code(got.ErrorCode))
	}
	req.Topics[0].NumPartitions = -1
	req.Topics[0].ReplicaAssignment[1].Replicas = []int32{2, 9}
	if got := h.do(req).(*kmsg.CreateTopicsResponse).Topics[0]; got.ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("unknown broker: %v", code(got.ErrorCode))
	}
	// A name twice in one request: both INVALID_REQUEST; ValidateOnly creates nothing.
	twice := createTopic("dup", 1, 1)
	twice.Topics = append(twice.Topics, twice.Topics[0])
	for _, got := range h.do(twice).(*kmsg.CreateTopicsResponse).Topics {
		if got.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("twice: %v", code(got.ErrorCode))
		}
	}
	vo := createTopic("v", 2, 2)
	vo.ValidateOnly = true
	if got := h.do(vo).(*kmsg.CreateTopicsResponse).Topics[0]; got.ErrorCode != 0 || got.NumPartitions != 2 {
		t.Fatalf("validate only: %+v", got)
	}
	if _, ok := h.image().Topic("v"); ok {
		t.Fatal("validate only created the topic")
	}
	// The partition budget spans the request's topics.
	two := createTopic("b1", 12, 1)
	two.Topics = append(two.Topics, createTopic("b2", 12, 1).Topics[0])
	got := h.do(two).(*kmsg.CreateTopicsResponse).Topics
	if got[0].ErrorCode != 0 || got[1].ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("budget: %v %v", code(got[0].ErrorCode), code(got[1].ErrorCode))
	}
}

func TestCreateTopicsUsesUsableBrokersOnly(t *testing.T) {
	h := newHarness(t, nil)
	epochs := h.join(1, 2, 3)
	h.heartbeat(3, epochs[3], func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	if got := h.createTopic("t", 1, 3); got.ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("rf 3 with 2 usable brokers: %v", code(got.ErrorCode))
	}
	if got := h.createTopic("t", 4, 2); got.ErrorCode != 0 {
		t.Fatal(code(got.ErrorCode))
	}
	for _, p := range topic(t, h.image(), "t").Partitions {
		if slices.Contains(p.Replicas, 3) {
			t.Fatalf("placed on a fenced broker: %+v", p)
		}
	}
	// __consumer_offsets: -1/-1 take offsets.topic.* with the replication factor
	// capped at the usable brokers (2, not the default 3).
	got := h.createTopic(OffsetsTopic, -1, -1, "cleanup.policy", "compact")
	if got.ErrorCode != 0 || got.NumPartitions != 50 || got.ReplicationFactor != 2 {
		t.Fatalf("offsets topic: %+v", got)
	}
}

func TestDeleteTopicsAndPartitions(t *testing.T) {
	h := newHarness(t, nil)
	h.join(1, 2)
	id := h.createTopic("a", 1, 2).TopicID
	h.createTopic("b", 1, 1)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 6
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: id}, {Topic: kmsg.StringPtr("nope")}, {Topic: kmsg.StringPtr("b"), TopicID: id}}
	got := h.do(del).(*kmsg.DeleteTopicsResponse).Topics
	if got[0].ErrorCode != 0 || *got[0].Topic != "a" || got[1].ErrorCode != kerr.UnknownTopicOrPartition.Code || got[2].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("delete: %+v", got)
	}
	if _, ok := h.image().Topic("a"); ok {
		t.Fatal("a still exists")
	}
	old := kmsg.NewPtrDeleteTopicsRequest()
	old.Version = 3
	old.TopicNames = []string{"b"}
	if got := h.do(old).(*kmsg.DeleteTopicsResponse).Topics; got[0].ErrorCode != 0 {
		t.Fatalf("delete by name: %v", code(got[0].ErrorCode))
	}

	h.createTopic("c", 2, 2)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 3
	grow := kmsg.NewCreatePartitionsRequestTopic()
	grow.Topic, grow.Count = "c", 4
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{grow}
	if got := h.do(cp).(*kmsg.CreatePartitionsResponse).Topics[0]; got.ErrorCode != 0 {
		t.Fatal(code(got.ErrorCode))
	}
	ti := topic(t, h.image(), "c")
	if len(ti.Partitions) != 4 || len(ti.Partitions[3].Replicas) != 2 {
		t.Fatalf("grown: %+v", ti.Partitions)
	}
	for _, tc := range []struct {
		count int32
		a     [][]int32
		code  *kerr.Error
	}{
		{count: 4, code: kerr.InvalidPartitions},
		{count: 6, a: [][]int32{{1, 2}}, code: kerr.InvalidReplicaAssignment},
		{count: 5, a: [][]int32{{1}}, code: kerr.InvalidReplicaAssignment},
		{count: 5, a: [][]int32{{2, 1}}},
	} {
		g := kmsg.NewCreatePartitionsRequestTopic()
		g.Topic, g.Count = "c", tc.count
		for _, reps := range tc.a {
			g.Assignment = append(g.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: reps})
		}
		cp.Topics = []kmsg.CreatePartitionsRequestTopic{g}
		got := h.do(cp).(*kmsg.CreatePartitionsResponse).Topics[0]
		want := int16(0)
		if tc.code != nil {
			want = tc.code.Code
		}
		if got.ErrorCode != want {
			t.Fatalf("count %d %v: %v, want %v", tc.count, tc.a, code(got.ErrorCode), tc.code)
		}
	}
	if p := part(t, h.image(), "c", 4); !reflect.DeepEqual(p.Replicas, []int32{2, 1}) {
		t.Fatalf("manual new partition: %+v", p)
	}
	grow.Topic = "zz"
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{grow}
	if got := h.do(cp).(*kmsg.CreatePartitionsResponse).Topics[0]; got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", code(got.ErrorCode))
	}
}

func incremental(rt kmsg.ConfigResourceType, name string, ops ...any) *kmsg.IncrementalAlterConfigsRequest {
	r := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = rt, name
	for i := 0; i+2 < len(ops)+1 && i+2 <= len(ops); i += 3 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = ops[i].(string), ops[i+1].(kmsg.IncrementalAlterConfigOp)
		if v, ok := ops[i+2].(string); ok {
			c.Value = &v
		}
		res.Configs = append(res.Configs, c)
	}
	r.Resources = append(r.Resources, res)
	return r
}

func TestAlterConfigs(t *testing.T) {
	h := newHarness(t, nil)
	h.join(1)
	h.createTopic("t", 1, 1)
	set, del, app := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete, kmsg.IncrementalAlterConfigOpAppend
	topicRT, brokerRT := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	for _, tc := range []struct {
		name string
		req  *kmsg.IncrementalAlterConfigsRequest
		code *kerr.Error
	}{
		{"set", incremental(topicRT, "t", "retention.ms", set, "5000", "min.insync.replicas", set, "1"), nil},
		{"append to a list", incremental(topicRT, "t", "cleanup.policy", app, "compact"), nil},
		{"append to a non-list", incremental(topicRT, "t", "retention.ms", app, "1"), kerr.InvalidConfig},
		{"invalid value", incremental(topicRT, "t", "retention.ms", set, "x"), kerr.InvalidConfig},
		{"unknown topic", incremental(topicRT, "nope", "retention.ms", set, "1"), kerr.UnknownTopicOrPartition},
		{"read-only broker key", incremental(brokerRT, "1", "node.id", set, "2"), kerr.InvalidConfig},
		{"broker key", incremental(brokerRT, "1", "log.retention.ms", set, "7000"), nil},
		{"cluster default", incremental(brokerRT, "", "log.segment.bytes", set, "3000000"), nil},
		{"read-only in Kafka", incremental(brokerRT, "", "num.partitions", set, "3"), kerr.InvalidConfig},
		{"dynamic in Kafka", incremental(brokerRT, "", "log.cleaner.backoff.ms", set, "100"), nil},
		{"not a broker id", incremental(brokerRT, "one", "log.retention.ms", set, "3"), kerr.InvalidRequest},
		{"key twice", incremental(topicRT, "t", "retention.ms", set, "1", "retention.ms", set, "2"), kerr.InvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.do(tc.req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
			want := int16(0)
			if tc.code != nil {
				want = tc.code.Code
			}
			if got.ErrorCode != want {
				t.Fatalf("code %v (%v), want %v", code(got.ErrorCode), got.ErrorMessage, tc.code)
			}
		})
	}
	im := h.image()
	if tc := im.Configs(metadata.ResourceTopic, "t"); tc["retention.ms"] != "5000" || tc["cleanup.policy"] != "delete,compact" {
		t.Fatalf("topic configs %v", tc)
	}
	if im.Configs(metadata.ResourceBroker, "1")["log.retention.ms"] != "7000" || im.Configs(metadata.ResourceBroker, "")["log.segment.bytes"] != "3000000" ||
		im.Configs(metadata.ResourceBroker, "")["log.cleaner.backoff.ms"] != "100" {
		t.Fatal("broker configs not recorded")
	}
	if got := h.do(incremental(topicRT, "t", "retention.ms", del, nil)).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; got.ErrorCode != 0 {
		t.Fatal(code(got.ErrorCode))
	}
	if _, ok := h.image().Configs(metadata.ResourceTopic, "t")["retention.ms"]; ok {
		t.Fatal("delete kept the key")
	}
	// AlterConfigs replaces the whole set: min.insync.replicas and cleanup.policy go.
	ac := kmsg.NewPtrAlterConfigsRequest()
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = topicRT, "t"
	res.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "segment.bytes", Value: kmsg.StringPtr("1048576")}}
	ac.Resources = []kmsg.AlterConfigsRequestResource{res}
	if got := h.do(ac).(*kmsg.AlterConfigsResponse).Resources[0]; got.ErrorCode != 0 {
		t.Fatal(code(got.ErrorCode))
	}
	if tc := h.image().Configs(metadata.ResourceTopic, "t"); !reflect.DeepEqual(tc, map[string]string{"segment.bytes": "1048576"}) {
		t.Fatalf("replaced configs %v", tc)
	}
}

// TestPendingImage: requests validate against the committed image plus the
// proposals in flight, and responses wait for their commit.
func TestPendingImage(t *testing.T) {
	h := newHarness(t, nil)
	h.join(1)
	a := h.submit(createTopic("x", 1, 1))
	b := h.submit(createTopic("x", 1, 1))
	if a() != nil {
		t.Fatal("answered before commit")
	}
	// b read the pending image a built: it answers after a commits.
	if b() != nil {
		t.Fatal("the read of pending state answered before the proposal it read committed")
	}
	h.settle()
	if c := a().(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; c != 0 {
		t.Fatal(code(c))
	}
	if c := b().(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; c != kerr.TopicAlreadyExists.Code {
		t.Fatalf("second create: %v", code(c))
	}
}

// TestLeadershipLossMidFlight: proposals in flight when leadership is lost are
// answered NOT_CONTROLLER (those the next term dropped) and the next term starts
// from the committed image.
func TestLeadershipLossMidFlight(t *testing.T) {
	h := newHarness(t, nil)
	h.join(1)
	kept := h.submit(createTopic("kept", 1, 1))
	lost := h.submit(createTopic("lost", 1, 1))
	h.log.Elect(1, 1) // the first pending entry commits in the new term, the second is dropped
	h.voter.CatchUp(^uint64(0))
	h.c.Poll()
	for _, get := range []func() kmsg.Response{kept, lost} {
		if r := get(); r == nil || r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != kerr.NotController.Code {
			t.Fatalf("in flight across the change: %+v", r)
		}
	}
	if _, ok := h.image().Topic("kept"); !ok {
		t.Fatal("kept entry not committed")
	}
	// The new term validates against the committed image: "kept" exists, "lost" not.
	if got := h.createTopic("kept", 1, 1); got.ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("kept again: %v", code(got.ErrorCode))
	}
	if got := h.createTopic("lost", 1, 1); got.ErrorCode != 0 {
		t.Fatalf("lost again: %v", code(got.ErrorCode))
	}
}

// failingQuorum fails chosen proposals after they were accepted, as a quorum whose
// entry was rejected does.
type failingQuorum struct {
	*MemVoter
	fail map[int]bool
	n    int
	held []chan ProposeResult
}

func (f *failingQuorum) Propose(recs []metadata.Record) <-chan ProposeResult {
	f.n++
	if f.fail[f.n] {
		ch := make(chan ProposeResult, 1)
		f.held = append(f.held, ch)
		return ch
	}
	return f.MemVoter.Propose(recs)
}

func TestFailedProposalQuiesces(t *testing.T) {
	log := NewMemLog(1)
	log.Elect(1, 0)
	v := log.Voter(1)
	v.CatchUp(^uint64(0))
	fq := &failingQuorum{MemVoter: v, fail: map[int]bool{2: true}}
	clock := NewManualClock(t0)
	c, err := New(Config{NodeID: 1, Clock: clock}, fq)
	if err != nil {
		t.Fatal(err)
	}
	settle := func() {
		log.Commit(-1)
		v.CatchUp(^uint64(0))
		c.Poll()
	}
	var first, second, third kmsg.Response
	c.Submit(registration(1, 1, ""), func(r kmsg.Response) { first = r })
	settle()
	c.Submit(registration(2, 1, ""), func(r kmsg.Response) { second = r }) // proposal 2: will fail
	c.Submit(registration(3, 1, ""), func(r kmsg.Response) { third = r })  // proposal 3: built on 2
	settle()
	if first == nil || second != nil || third == nil {
		t.Fatalf("before the failure: %v %v %v", first, second, third)
	}
	fq.held[0] <- ProposeResult{Err: errors.New("rejected")}
	c.Poll()
	if r := second.(*kmsg.BrokerRegistrationResponse); r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("failed proposal answered %v", code(r.ErrorCode))
	}
	// After the failure, pending restarts from the committed image: broker 2 is
	// unknown there, so its heartbeat is BROKER_ID_NOT_REGISTERED.
	var hb kmsg.Response
	c.Submit(heartbeat(2, 3, 0), func(r kmsg.Response) { hb = r })
	settle()
	if hb == nil || hb.(*kmsg.BrokerHeartbeatResponse).ErrorCode != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("after quiescing: %+v", hb)
	}
}

func TestHandleTimesOut(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	r, err := h.c.Handle(ctx, registration(1, 1, "")) // nothing commits: the log is not driven
	if err != nil {
		t.Fatal(err)
	}
	if r.(*kmsg.BrokerRegistrationResponse).ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("timeout: %v", code(r.(*kmsg.BrokerRegistrationResponse).ErrorCode))
	}
	if _, err := h.c.Handle(ctx, kmsg.NewPtrProduceRequest()); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("produce: %v", err)
	}
}

// TestHandleWithRun: the blocking API over a live auto-committing log.
func TestHandleWithRun(t *testing.T) {
	_, v := NewSingleMemLog(1)
	c, err := New(Config{NodeID: 1}, v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	r, err := c.Handle(ctx, registration(1, 1, ""))
	if err != nil || r.(*kmsg.BrokerRegistrationResponse).ErrorCode != 0 {
		t.Fatalf("%v %+v", err, r)
	}
}

// TestTopicIDExhaustion: an id generator that only repeats itself makes the second
// CreateTopics fail, not hang.
func TestTopicIDExhaustion(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.NewTopicID = func() metadata.UUID { return metadata.UUID{0: 1, 15: 0x80} }
	})
	h.join(1)
	if got := h.createTopic("a", 1, 1); got.ErrorCode != 0 {
		t.Fatal(code(got.ErrorCode))
	}
	if got := h.createTopic("b", 1, 1); got.ErrorCode != kerr.UnknownServerError.Code {
		t.Fatalf("repeated id: %v", code(got.ErrorCode))
	}
}
