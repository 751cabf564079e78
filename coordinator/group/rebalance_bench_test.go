package group

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkRebalance measures one full rebalance of a Stable group of n members:
// every member rejoins, the last JoinGroup completes the join phase, each member
// sends SyncGroup from its join callback (the leader with an assignment), and the
// time runs until the last SyncGroup answer. No delays are configured, so the
// figure is the coordinator's own cost (goal: < 100 ms for 50 members). The Log is
// in memory; its batch encoding is included.
func BenchmarkRebalance(b *testing.B) {
	for _, n := range []int{10, 50, 200} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			h := newHarness(b, nil)
			h.log = newMemLog()
			h.start(func(c *Config) {
				c.InitialRebalanceDelay = -1
				c.Clock = nil // the production clock: timers on the purgatory's wheel
			})
			defer h.c.Close()
			ids, gen := benchStable(b, h, n)
			topics := consumerMeta("t")
			b.ReportAllocs()
			b.ResetTimer()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				var synced atomic.Int32
				done := make(chan struct{})
				var start time.Time
				var nextGen atomic.Int32
				for k, id := range ids {
					req := kmsg.NewPtrJoinGroupRequest()
					req.Version, req.Group, req.MemberID, req.ProtocolType = 9, "g", id, "consumer"
					req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10_000, 30_000
					req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: topics}}
					if k == len(ids)-1 {
						start = time.Now()
					}
					h.c.JoinGroup(req, "client", "/127.0.0.1", func(r *kmsg.JoinGroupResponse) {
						if r.ErrorCode != 0 {
							b.Errorf("join: %d", r.ErrorCode)
							return
						}
						nextGen.Store(r.Generation)
						s := kmsg.NewPtrSyncGroupRequest()
						s.Version, s.Group, s.MemberID, s.Generation = 5, "g", r.MemberID, r.Generation
						for _, m := range r.Members { // the leader assigns
							s.GroupAssignment = append(s.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: []byte("assignment")})
						}
						h.c.SyncGroup(s, func(sr *kmsg.SyncGroupResponse) {
							if sr.ErrorCode != 0 {
								b.Errorf("sync: %d", sr.ErrorCode)
							}
							if int(synced.Add(1)) == len(ids) {
								close(done)
							}
						})
					})
				}
				<-done
				total += time.Since(start)
				gen = nextGen.Load()
			}
			_ = gen
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/rebalance")
		})
	}
}

func benchStable(b *testing.B, h *harness, n int) ([]string, int32) {
	b.Helper()
	var res []*joinResult
	for i := 0; i < n; i++ {
		first := h.join("g", joinOpts{}).get()
		res = append(res, h.join("g", joinOpts{memberID: first.MemberID}))
	}
	// the first member completed a generation alone; the rest wait for it to rejoin
	r0 := res[0].get()
	if r0 == nil {
		b.Fatal("first join not answered")
	}
	rj := h.join("g", joinOpts{memberID: r0.MemberID})
	res[0] = rj
	h.settle(res...)
	ids := make([]string, n)
	var gen int32
	assign := map[string][]byte{}
	for i, r := range res {
		ids[i], gen = r.get().MemberID, r.get().Generation
		assign[ids[i]] = []byte("a")
	}
	for _, r := range res {
		j := r.get()
		var a map[string][]byte
		if j.LeaderID == j.MemberID {
			a = assign
		}
		h.sync("g", j.MemberID, j.Generation, nil, a)
	}
	return ids, gen
}

// BenchmarkOffsetCommit measures one OffsetCommit of 10 partitions by a Stable
// member, through record encoding and the in-memory Log.
func BenchmarkOffsetCommit(b *testing.B) {
	h := newHarness(b, nil)
	ids, gen := h.stableGroup("g", 1)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 8, "g", ids[0], gen
	md := ""
	t := kmsg.OffsetCommitRequestTopic{Topic: "orders"}
	for p := int32(0); p < 10; p++ {
		t.Partitions = append(t.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: 1, LeaderEpoch: 3, Metadata: &md})
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{t}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for p := range req.Topics[0].Partitions {
			req.Topics[0].Partitions[p].Offset = int64(i)
		}
		h.c.OffsetCommit(req, func(*kmsg.OffsetCommitResponse) {})
		if i%1024 == 0 { // keep the in-memory log from growing without bound
			h.log.mu.Lock()
			h.log.parts = map[int32][]byte{}
			h.log.mu.Unlock()
		}
	}
}

// BenchmarkHeartbeat measures one Heartbeat of a Stable member.
func BenchmarkHeartbeat(b *testing.B) {
	h := newHarness(b, nil)
	ids, gen := h.stableGroup("g", 1)
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 4, "g", ids[0], gen
	b.ReportAllocs()
	for b.Loop() {
		if r := h.c.Heartbeat(req); r.ErrorCode != 0 {
			b.Fatal(r.ErrorCode)
		}
	}
}

// BenchmarkConsumerJoin measures the consumer protocol's answer to BenchmarkRebalance:
// a member joins a Stable consumer group of n members subscribed to a topic of 256
// partitions, and every member heartbeats in turn (each taking its new assignment and
// giving up revoked partitions at once, as a client whose revocation callback returns
// at once) until the group is Stable again with every member at the new epoch. Reported:
// the coordinator's time for those heartbeats (ms/reconcile) and the heartbeat rounds
// they took (rounds/reconcile; in a real group a round lasts
// group.consumer.heartbeat.interval.ms, or less: clients heartbeat at once after a
// revocation). The newcomer then leaves, untimed, so each iteration starts alike.
func BenchmarkConsumerJoin(b *testing.B) {
	for _, n := range []int{10, 50, 200} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			h := newHarness(b, nil)
			h.setTopics(1, map[string]int32{"t": 256})
			ms := make([]*cgClient, n)
			for i := range ms {
				ms[i] = h.cgClient("g", fmt.Sprintf("member-%04d-0000000000", i), "t")
			}
			settle := func(cs []*cgClient) int {
				for round := 1; ; round++ {
					for _, c := range cs {
						if r := c.hb(); r.ErrorCode != 0 {
							b.Fatalf("heartbeat of %s: %d", c.id, r.ErrorCode)
						}
					}
					d := h.describeConsumer("g")
					stable := d.State == "Stable"
					for _, m := range d.Members {
						stable = stable && m.MemberEpoch == d.Epoch
					}
					if stable {
						return round
					}
					if round > 100 {
						b.Fatalf("no Stable group after %d rounds: %+v", round, d)
					}
				}
			}
			settle(ms)
			b.ReportAllocs()
			b.ResetTimer()
			var total time.Duration
			rounds := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				joiner := h.cgClient("g", fmt.Sprintf("joiner-%08d-000000000", i), "t")
				b.StartTimer()
				start := time.Now()
				rounds += settle(append([]*cgClient{joiner}, ms...))
				total += time.Since(start)
				b.StopTimer()
				joiner.leave()
				settle(ms)
				h.log.mu.Lock()
				h.log.parts = map[int32][]byte{} // keep the in-memory log from growing without bound
				h.log.mu.Unlock()
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/reconcile")
			b.ReportMetric(float64(rounds)/float64(b.N), "rounds/reconcile")
		})
	}
}
