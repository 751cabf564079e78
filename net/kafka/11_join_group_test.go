package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// groupTestBroker is a broker with short group timings: no initial rebalance delay,
// sessions down to 100 ms.
func groupTestBroker(t *testing.T, sync engine.SyncPolicy) *testBroker {
	tb := startTestBroker(t, testBrokerOptions{Sync: sync, Static: map[string]string{
		"group.initial.rebalance.delay.ms": "0",
		"group.min.session.timeout.ms":     "100",
	}})
	t.Cleanup(func() { tb.a.Close() }) // runs before tb.stop
	return tb
}

// groupMember is a franz-go group consumer whose assignment the test watches. Its
// connections go through a dialer the test can kill, as if its process died.
type groupMember struct {
	name string
	cl   *kgo.Client
	mu   sync.Mutex
	own  map[int32]bool

	dead  bool
	conns []net.Conn
}

func (m *groupMember) dial(ctx context.Context, network, host string) (net.Conn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead {
		return nil, errors.New("member killed")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err == nil {
		m.conns = append(m.conns, c)
	}
	return c, err
}

// kill cuts the member off: no LeaveGroup, no heartbeat; its session must expire.
func (m *groupMember) kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dead = true
	for _, c := range m.conns {
		c.Close()
	}
	m.own = map[int32]bool{}
}

func (m *groupMember) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.own {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func newGroupMember(t *testing.T, tb *testBroker, name, group, topic string, bal kgo.GroupBalancer, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{name: name, own: map[int32]bool{}}
	drop := func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range lost[topic] {
			delete(m.own, p)
		}
	}
	all := append([]kgo.Opt{
		kgo.Dialer(m.dial),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(bal),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(5 * time.Second),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range a[topic] {
				m.own[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(drop),
		kgo.OnPartitionsLost(drop),
	}, opts...)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tb.addr)}, all...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	return m
}

// waitBalanced waits until the members' assignments partition 0..n-1 exactly, each
// member owning at least one partition.
func waitBalanced(t *testing.T, n int32, ms ...*groupMember) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		seen := map[int32]int{}
		ok := true
		last = ""
		for _, m := range ms {
			own := m.owned()
			last += fmt.Sprintf("%s=%v ", m.name, own)
			if len(own) == 0 {
				ok = false
			}
			for _, p := range own {
				seen[p]++
			}
		}
		for p := int32(0); p < n && ok; p++ {
			ok = seen[p] == 1
		}
		if ok && len(seen) == int(n) {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	t.Fatalf("group never balanced over %d members: %s", len(ms), last)
}

func TestGroupConsumersRebalance(t *testing.T) {
	for _, bal := range []struct {
		name string
		b    func() kgo.GroupBalancer
	}{{"range", kgo.RangeBalancer}, {"cooperative-sticky", kgo.CooperativeStickyBalancer}} {
		t.Run(bal.name, func(t *testing.T) {
			tb := groupTestBroker(t, engine.SyncNone)
			mustCreate(t, tb.admin(t), "events", 6, nil)
			g := "g-" + bal.name
			a := newGroupMember(t, tb, "a", g, "events", bal.b())
			b := newGroupMember(t, tb, "b", g, "events", bal.b())
			c := newGroupMember(t, tb, "c", g, "events", bal.b())
			defer a.cl.Close()
			defer c.cl.Close()
			waitBalanced(t, 6, a, b, c)

			late := newGroupMember(t, tb, "late", g, "events", bal.b())
			waitBalanced(t, 6, a, b, c, late)

			b.cl.Close() // leaves the group
			waitBalanced(t, 6, a, c, late)

			// a member that dies: it stops heartbeating without leaving; its
			// session (3 s) expires and the others take its partitions.
			late.kill()
			defer late.cl.Close()
			waitBalanced(t, 6, a, c)

			d, err := kadm.NewClient(a.cl).DescribeGroups(testCtx(t), g)
			if err != nil {
				t.Fatal(err)
			}
			if dg := d[g]; dg.State != "Stable" || len(dg.Members) != 2 || dg.Protocol != bal.b().ProtocolName() {
				t.Fatalf("describe: %+v", dg)
			}
		})
	}
}

func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncNone)
	mustCreate(t, tb.admin(t), "events", 6, nil)
	a := newGroupMember(t, tb, "a", "static", "events", kgo.RangeBalancer(), kgo.InstanceID("node-a"))
	b := newGroupMember(t, tb, "b", "static", "events", kgo.RangeBalancer(), kgo.InstanceID("node-b"))
	defer b.cl.Close()
	waitBalanced(t, 6, a, b)
	_, genB := b.cl.GroupMetadata()
	ownedA := fmt.Sprint(a.owned())
	a.cl.Close() // a static member does not leave on close
	a2 := newGroupMember(t, tb, "a2", "static", "events", kgo.RangeBalancer(), kgo.InstanceID("node-a"))
	defer a2.cl.Close()
	waitBalanced(t, 6, a2, b)
	if got := fmt.Sprint(a2.owned()); got != ownedA {
		t.Fatalf("restarted static member owns %s, had %s", got, ownedA)
	}
	if _, gen := b.cl.GroupMetadata(); gen != genB {
		t.Fatalf("generation moved from %d to %d: the restart rebalanced", genB, gen)
	}
	if _, gen := a2.cl.GroupMetadata(); gen != genB {
		t.Fatalf("restarted member has generation %d, group %d", gen, genB)
	}
}

func TestFindCoordinator(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncNone)
	rc := tb.raw(t)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKey = 3, "some-group"
	resp := rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if resp.ErrorCode != 0 || resp.NodeID != 1 || resp.Port <= 0 {
		t.Fatalf("v3: %+v", resp)
	}
	req = kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, []string{"a", "b", ""}
	resp = rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 3 || resp.Coordinators[0].ErrorCode != 0 || resp.Coordinators[1].NodeID != 1 ||
		resp.Coordinators[2].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("v4 batch: %+v", resp)
	}
	req = kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorType, req.CoordinatorKeys = 4, 1, []string{"txn"}
	// The transaction coordinator: this node, once __transaction_state is loaded
	// (COORDINATOR_NOT_AVAILABLE until then, which clients retry).
	for deadline := time.Now().Add(10 * time.Second); ; {
		r := rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		c := r.Coordinators[0]
		if c.ErrorCode == 0 && c.NodeID == 1 && c.Port > 0 {
			break
		}
		if c.ErrorCode != kerr.CoordinatorNotAvailable.Code || time.Now().After(deadline) {
			t.Fatalf("transaction key: %+v", r)
		}
	}
	// __consumer_offsets now exists, internal, compacted, 50 partitions
	td, err := tb.admin(t).ListTopicsWithInternal(testCtx(t), "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	if d := td["__consumer_offsets"]; d.Err != nil || !d.IsInternal || len(d.Partitions) != 50 {
		t.Fatalf("__consumer_offsets: %+v", d)
	}
}

// TestGroupBadInputOverTheWire: bad joins and commits get Kafka's codes and the
// group keeps working.
func TestGroupBadInputOverTheWire(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncNone)
	mustCreate(t, tb.admin(t), "events", 2, nil)
	a := newGroupMember(t, tb, "a", "g", "events", kgo.RangeBalancer())
	defer a.cl.Close()
	waitBalanced(t, 2, a)
	member, gen := a.cl.GroupMetadata()

	rc := tb.raw(t)
	join := func(ptype string, meta []byte) int16 {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.ProtocolType = 5, "g", ptype
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 3000, 3000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}}
		return rc.roundTrip(req).(*kmsg.JoinGroupResponse).ErrorCode
	}
	if code := join("connect", nil); code != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("other protocol type: %v", kerr.ErrorForCode(code))
	}
	if code := join("consumer", make([]byte, 2<<20)); code != kerr.InvalidRequest.Code {
		t.Errorf("oversized metadata: %v", kerr.ErrorForCode(code))
	}
	commit := func(member string, gen int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 8, "g", member, gen
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "events", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
		return rc.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := commit("nobody", gen); code != kerr.UnknownMemberID.Code {
		t.Errorf("unknown member commit: %v", kerr.ErrorForCode(code))
	}
	if code := commit(member, gen+7); code != kerr.IllegalGeneration.Code {
		t.Errorf("stale generation commit: %v", kerr.ErrorForCode(code))
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "g", member, gen-1
	if code := rc.roundTrip(hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.IllegalGeneration.Code {
		t.Errorf("stale heartbeat: %v", kerr.ErrorForCode(code))
	}
	// the group still works
	if code := commit(member, gen); code != 0 {
		t.Fatalf("member commit: %v", kerr.ErrorForCode(code))
	}
	if _, g2 := a.cl.GroupMetadata(); g2 != gen {
		t.Fatalf("bad input moved the generation from %d to %d", gen, g2)
	}
}

// BenchmarkGroupRebalanceTCP measures a full rebalance over TCP: n members, each on
// its own client connection, rejoin with new metadata; the time runs from the last
// JoinGroup sent to the last SyncGroup answer (the leader assigns in between). No
// initial rebalance delay is configured, so this is the coordinator and the wire.
func BenchmarkGroupRebalanceTCP(b *testing.B) {
	for _, n := range []int{10, 50, 200} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			tb := startTestBroker(b, testBrokerOptions{Sync: engine.SyncNone, Static: map[string]string{
				"group.initial.rebalance.delay.ms": "0",
				"offsets.topic.num.partitions":     "1",
			}})
			b.Cleanup(func() { tb.a.Close() })
			clients := make([]*kgo.Client, n)
			for i := range clients {
				clients[i] = tb.client(b)
			}
			ids := make([]string, n)
			gen := int32(-1)
			// rebalance runs one round; ok is false when some member met a
			// rebalance error (only while the group forms).
			rebalance := func(iter int) (d time.Duration, ok bool) {
				meta := kmsg.NewConsumerMemberMetadata()
				meta.Topics = []string{"t"}
				meta.UserData = []byte(fmt.Sprint(iter))
				md := meta.AppendTo(nil)
				var wg sync.WaitGroup
				var mu sync.Mutex
				var lastJoin, lastSync time.Time
				ok = true
				fail := func() {
					mu.Lock()
					ok = false
					mu.Unlock()
				}
				for i := range clients {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						ctx := context.Background()
						for {
							req := kmsg.NewPtrJoinGroupRequest()
							req.Group, req.MemberID, req.ProtocolType = "bench", ids[i], "consumer"
							req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 5000
							req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: md}}
							mu.Lock()
							if now := time.Now(); now.After(lastJoin) {
								lastJoin = now
							}
							mu.Unlock()
							jr, err := req.RequestWith(ctx, clients[i])
							if err != nil {
								b.Error(err)
								return
							}
							if jr.ErrorCode == kerr.MemberIDRequired.Code {
								ids[i] = jr.MemberID
								continue
							}
							if jr.ErrorCode != 0 {
								if jr.ErrorCode == kerr.UnknownMemberID.Code {
									ids[i] = "" // dropped while the group formed: join anew
								}
								fail()
								return
							}
							ids[i] = jr.MemberID
							sreq := kmsg.NewPtrSyncGroupRequest()
							sreq.Group, sreq.MemberID, sreq.Generation = "bench", jr.MemberID, jr.Generation
							for _, m := range jr.Members {
								sreq.GroupAssignment = append(sreq.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: []byte{0, 0}})
							}
							sr, err := sreq.RequestWith(ctx, clients[i])
							if err != nil {
								b.Error(err)
								return
							}
							if sr.ErrorCode != 0 {
								fail()
								return
							}
							mu.Lock()
							if now := time.Now(); now.After(lastSync) {
								lastSync = now
							}
							gen = jr.Generation
							mu.Unlock()
							return
						}
					}(i)
				}
				wg.Wait()
				return lastSync.Sub(lastJoin), ok
			}
			iter := 0
			for formed := 0; formed < 2; iter++ { // the group forms: two clean rounds in a row
				if iter > 50 {
					b.Fatal("the group did not form")
				}
				if _, ok := rebalance(iter); ok {
					formed++
				} else {
					formed = 0
				}
			}
			b.ResetTimer()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				d, ok := rebalance(iter + i)
				if !ok {
					b.Fatal("a member met a rebalance error in a measured round")
				}
				total += d
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/rebalance")
			_ = gen
		})
	}
}
